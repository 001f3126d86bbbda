package helpers

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cowfs/cowfs/internal/gitdiff"
)

// GoldenName returns the base name (without extension) of the golden files
// of the test named name: name with each "/" of a subtest turned into "__"
// and every byte outside [A-Za-z0-9._-] into "_". "TestX/case #1"
// (which t.Name() spells "TestX/case_#1") gives "TestX__case__1".
func GoldenName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '/':
			b.WriteString("__")
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == '_':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	if s := b.String(); s != "" && strings.Trim(s, ".") != "" {
		return s
	}
	return "_" + b.String()
}

// Patch returns the layer as a git patch ([overlayfs.Fs.WriteDiff]). An
// error rendering it is fatal to the test.
func (e *Env) Patch() string {
	e.t.Helper()
	var b bytes.Buffer
	if err := e.ov.WriteDiff(&b); err != nil {
		e.t.Fatalf("helpers: patch: %v", err)
	}
	return b.String()
}

// GoldenPatch compares the layer's git patch with the golden file
// <GoldenDir>/<GoldenName>.patch ("testdata/TestName.patch" by default) and
// reports a mismatch with t.Errorf, path by path: the paths only one of
// the two patches changes, and for a path both change differently a diff
// of the file's content as the golden leaves it against this run's (not a
// diff of the two patches, whose index and @@ lines move with any edit). With [EnvUpdateGolden] set it writes the golden
// instead, when it is missing or differs. It returns whether the patch
// matched (or the golden was written).
//
// A test that changes nothing has an empty golden patch.
func (e *Env) GoldenPatch() bool {
	e.t.Helper()
	got := []byte(e.Patch())
	name := e.goldenFile(".patch")
	want, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		e.t.Errorf("helpers: %v", err)
		return false
	}
	if err == nil && bytes.Equal(want, got) {
		return true
	}
	if e.updating() {
		if err := writeGolden(name, got); err != nil {
			e.t.Errorf("helpers: %v", err)
			return false
		}
		e.logf("updated golden patch %s", rel(name))
		return true
	}
	// The patch itself is logged at the end of the failed test.
	if err != nil {
		e.t.Errorf("helpers: golden patch %s is missing: run with %s=1 to create it", rel(name), EnvUpdateGolden)
		return false
	}
	e.t.Errorf("helpers: the patch differs from the golden %s, path by path (a: golden, b: this run; run with %s=1 to accept it):\n%s",
		rel(name), EnvUpdateGolden, bound(goldenMismatch(e.ov.Root(), want, got), LogLimit))
	return false
}

// writeGolden writes a golden file, creating its directory.
func writeGolden(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return os.WriteFile(name, data, 0o644)
}

// textDiff returns a unified diff (three lines of context) from want to
// got, as git prints it, under the name name.
func textDiff(name string, want, got []byte) string {
	var b strings.Builder
	side := func(p []byte) *gitdiff.File {
		return &gitdiff.File{Mode: 0o644, Content: func() ([]byte, error) { return p, nil }}
	}
	name = strings.TrimLeft(filepath.ToSlash(name), "/")
	err := gitdiff.Write(&b, []gitdiff.Change{{Path: name, Old: side(want), New: side(got)}})
	if err != nil {
		// Only a name gitdiff refuses gets here: fall back to a safe one.
		b.Reset()
		if err := gitdiff.Write(&b, []gitdiff.Change{{Path: "golden", Old: side(want), New: side(got)}}); err != nil {
			return fmt.Sprintf("(no diff: %v)", err)
		}
	}
	return b.String()
}

// rel returns name relative to the working directory when it lies below
// it, for shorter messages.
func rel(name string) string {
	wd, err := os.Getwd()
	if err != nil {
		return name
	}
	if r, err := filepath.Rel(wd, name); err == nil && filepath.IsLocal(r) {
		return r
	}
	return name
}

// bound cuts s to at most limit bytes at a line end, saying how much was
// left out.
func bound(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := strings.LastIndexByte(s[:limit], '\n') + 1
	if cut == 0 {
		cut = limit
	}
	return fmt.Sprintf("%s... (%d more bytes)\n", s[:cut], len(s)-cut)
}
