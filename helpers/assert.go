package helpers

import (
	"bytes"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/cowfs/cowfs/overlayfs"
)

// NoChanges reports, with t.Errorf, every change in the layer, and returns
// whether there was none.
func (e *Env) NoChanges() bool {
	e.t.Helper()
	cs := e.ov.Changes()
	if len(cs) == 0 {
		return true
	}
	e.t.Errorf("helpers: want no changes, got %d:\n%s", len(cs), bound(changeList(cs), LogLimit))
	return false
}

// Changed checks the layer's changes against want, given in the form of
// [overlayfs.Change.String] ("A path", "M path", "D path"), in any order.
// It reports missing and unexpected changes with t.Errorf and returns
// whether they were equal. A deleted directory lists itself and each of its
// descendants.
func (e *Env) Changed(want ...string) bool {
	e.t.Helper()
	var got []string
	for _, c := range e.ov.Changes() {
		got = append(got, c.String())
	}
	return e.sameSet("changes", want, got)
}

// ChangedPaths checks that exactly the given root-relative slash paths
// changed, in any order and whatever the kind of change; see [Env.Changed].
func (e *Env) ChangedPaths(paths ...string) bool {
	e.t.Helper()
	var got []string
	for _, c := range e.ov.Changes() {
		got = append(got, c.Path)
	}
	return e.sameSet("changed paths", paths, got)
}

func (e *Env) sameSet(what string, want, got []string) bool {
	e.t.Helper()
	want = slices.Sorted(slices.Values(want))
	slices.Sort(got)
	if slices.Equal(want, got) {
		return true
	}
	var b strings.Builder
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || i < len(want) && want[i] < got[j]:
			fmt.Fprintf(&b, "\tmissing:    %s\n", want[i])
			i++
		case i == len(want) || got[j] < want[i]:
			fmt.Fprintf(&b, "\tunexpected: %s\n", got[j])
			j++
		default:
			i++
			j++
		}
	}
	e.t.Errorf("helpers: %s differ from what the test expects:\n%s", what, bound(b.String(), LogLimit))
	return false
}

// FileContent checks that the file at name (a slash path relative to the
// root) reads as want in the overlay's view, symlinks followed. It reports
// a difference, or a file that cannot be read, with t.Errorf, and returns
// whether the content was want.
func (e *Env) FileContent(name, want string) bool {
	e.t.Helper()
	got, err := fs.ReadFile(e.ov.IOFS(), name)
	if err != nil {
		e.t.Errorf("helpers: cannot check the content of %s: %v", name, err)
		return false
	}
	if string(got) == want {
		return true
	}
	e.t.Errorf("helpers: %s does not hold what the test expects (a: want, b: got):\n%s",
		name, bound(textDiff(name, []byte(want), got), LogLimit))
	return false
}

// changeList formats changes one per line, in the form of Change.String.
func changeList(cs []overlayfs.Change) string {
	var b bytes.Buffer
	for _, c := range cs {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	return b.String()
}
