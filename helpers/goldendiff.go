package helpers

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A golden patch that differs from the run's is not shown as a diff of two
// patches (whose index and @@ lines change with every edit) but path by
// path: which paths one patch changes and the other does not, and, for a
// path both change differently, a diff of the file's content as the golden
// would leave it against the content this run left. Both sides are
// rebuilt from the root's files by applying each patch's section, so the
// comparison is between files, whatever hunks the patches cut.

// patchFile is one "diff --git" section of a patch, applied: the state it
// leaves its path in.
type patchFile struct {
	path    string // the path it leaves changed (the new name of a rename)
	from    string // the old name of a rename, else ""
	deleted bool
	mode    string // git mode after: 100644, 100755, 120000
	data    []byte // content after (text sections)
	binary  string // blob id after (binary sections), "" for text
	err     error  // the section could not be applied to the root
}

// same reports whether a and b leave the path alike (a rename and a
// creation of the same bytes do: the rename's source is compared apart).
func (a *patchFile) same(b *patchFile) bool {
	return a.deleted == b.deleted && a.mode == b.mode &&
		a.binary == b.binary && bytes.Equal(a.data, b.data) && a.err == nil && b.err == nil
}

// describe says in a few words what a section does to its path.
func (a *patchFile) describe() string {
	switch {
	case a.deleted:
		return "deletes it"
	case a.from != "":
		return "renames " + a.from + " to it"
	case a.mode == "120000":
		return "makes it a symlink to " + strconv.Quote(string(a.data))
	}
	return "writes it (mode " + a.mode + ")"
}

// goldenMismatch renders the path-by-path comparison of the golden patch
// want with the run's patch got, both relative to root.
func goldenMismatch(root string, want, got []byte) string {
	ws, gs := applyPatch(root, want), applyPatch(root, got)
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range ws {
			if !yield(p) {
				return
			}
		}
		for p := range gs {
			if _, ok := ws[p]; !ok && !yield(p) {
				return
			}
		}
	})
	var b strings.Builder
	for _, p := range paths {
		w, g := ws[p], gs[p]
		switch {
		case g == nil:
			fmt.Fprintf(&b, "- %s: the golden changes it (%s), this run does not\n", p, w.describe())
		case w == nil:
			fmt.Fprintf(&b, "+ %s: this run changes it (%s), the golden does not\n", p, g.describe())
		case w.same(g):
		default:
			fmt.Fprintf(&b, "M %s: this run leaves it otherwise than the golden:\n", p)
			writeFileDiff(&b, p, w, g)
		}
	}
	if b.Len() == 0 {
		// Equal effects written differently (section order, hunks).
		return "the patches have the same effect on every path but differ in form:\n" + textDiff("patch", want, got)
	}
	return b.String()
}

// writeFileDiff explains how w (golden) and g (this run) leave path p.
func writeFileDiff(b *strings.Builder, p string, w, g *patchFile) {
	for _, s := range []*patchFile{w, g} {
		if s.err != nil {
			fmt.Fprintf(b, "    (cannot rebuild it from the root: %v)\n", s.err)
			return
		}
	}
	if w.deleted != g.deleted || w.mode != g.mode {
		fmt.Fprintf(b, "    golden:   %s\n    this run: %s\n", w.describe(), g.describe())
	}
	switch {
	case w.deleted || g.deleted:
	case w.binary != "" || g.binary != "":
		if w.binary != g.binary {
			fmt.Fprintf(b, "    binary content differs (golden blob %s, this run %s)\n", cmpOr(w.binary, "text"), cmpOr(g.binary, "text"))
		}
	case !bytes.Equal(w.data, g.data):
		d := textDiff(p, w.data, g.data)
		for l := range strings.Lines(d) {
			b.WriteString("    " + l)
		}
		if !strings.HasSuffix(d, "\n") {
			b.WriteByte('\n')
		}
	}
}

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// applyPatch applies each section of a git patch (as gitdiff writes them)
// to the files of root, by path. A section that does not apply is kept
// with its error.
func applyPatch(root string, patch []byte) map[string]*patchFile {
	out := map[string]*patchFile{}
	for _, sec := range splitSections(patch) {
		pf := applySection(root, sec)
		out[pf.path] = pf
	}
	// A rename deletes its source, as a deletion section would.
	for _, pf := range out {
		if _, ok := out[pf.from]; pf.from != "" && !ok {
			out[pf.from] = &patchFile{path: pf.from, deleted: true}
		}
	}
	return out
}

// splitSections cuts a patch at each "diff --git" line.
func splitSections(patch []byte) [][]string {
	var secs [][]string
	for l := range strings.Lines(string(patch)) {
		if strings.HasPrefix(l, "diff --git ") || len(secs) == 0 {
			secs = append(secs, nil)
		}
		secs[len(secs)-1] = append(secs[len(secs)-1], l)
	}
	return secs
}

var errBadSection = errors.New("not a section gitdiff writes")

func applySection(root string, lines []string) *patchFile {
	pf := &patchFile{}
	head := strings.TrimSuffix(strings.TrimPrefix(lines[0], "diff --git "), "\n")
	pf.path = sectionPath(head)
	old := pf.path
	i := 1
	for ; i < len(lines); i++ {
		l := strings.TrimSuffix(lines[i], "\n")
		switch {
		case strings.HasPrefix(l, "new file mode "):
			pf.mode, old = strings.TrimPrefix(l, "new file mode "), ""
		case strings.HasPrefix(l, "deleted file mode "):
			pf.deleted = true
		case strings.HasPrefix(l, "new mode "):
			pf.mode = strings.TrimPrefix(l, "new mode ")
		case strings.HasPrefix(l, "old mode "), strings.HasPrefix(l, "similarity index "):
		case strings.HasPrefix(l, "rename from "):
			pf.from, old = unquoteName(strings.TrimPrefix(l, "rename from ")), unquoteName(strings.TrimPrefix(l, "rename from "))
		case strings.HasPrefix(l, "rename to "):
			pf.path = unquoteName(strings.TrimPrefix(l, "rename to "))
		case strings.HasPrefix(l, "index "):
			if f := strings.Fields(l); len(f) == 3 && pf.mode == "" {
				pf.mode = f[2]
			}
			if ids := strings.Split(strings.Fields(l)[1], ".."); len(ids) == 2 && len(ids[1]) == 40 {
				pf.binary = ids[1]
			}
		default:
			goto body
		}
	}
body:
	if pf.deleted {
		return pf
	}
	var base []byte
	if old != "" {
		if base, pf.err = readLower(root, old, &pf.mode); pf.err != nil {
			return pf
		}
	}
	if pf.binary != "" {
		return pf
	}
	pf.data, pf.err = applyHunks(base, lines[i:])
	return pf
}

// readLower reads the root's file rel (a symlink's target), and fills in
// its git mode when the section gave none.
func readLower(root, rel string, mode *string) ([]byte, error) {
	name := filepath.Join(root, filepath.FromSlash(rel))
	fi, err := os.Lstat(name)
	if err != nil {
		return nil, err
	}
	m := "100644"
	var data []byte
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		m = "120000"
		t, err := os.Readlink(name)
		if err != nil {
			return nil, err
		}
		data = []byte(t)
	default:
		if fi.Mode()&0o100 != 0 {
			m = "100755"
		}
		if data, err = os.ReadFile(name); err != nil {
			return nil, err
		}
	}
	if *mode == "" {
		*mode = m
	}
	return data, nil
}

// applyHunks applies the text hunks in lines ("---", "+++", "@@" and
// what follows) to base.
func applyHunks(base []byte, lines []string) ([]byte, error) {
	src := strings.SplitAfter(string(base), "\n")
	if src[len(src)-1] == "" {
		src = src[:len(src)-1]
	}
	var out []string
	pos := 0 // next line of src to copy
	last := byte(0)
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "+++ "):
		case strings.HasPrefix(l, "@@ -"):
			var start, n int
			spec := strings.Fields(l)[1][1:]
			s, c, ok := strings.Cut(spec, ",")
			var err error
			if start, err = strconv.Atoi(s); err != nil {
				return nil, errBadSection
			}
			n = 1
			if ok {
				if n, err = strconv.Atoi(c); err != nil {
					return nil, errBadSection
				}
			}
			if n == 0 {
				start++ // "-k,0": insertion after line k
			}
			if start-1 < pos || start-1 > len(src) {
				return nil, errBadSection
			}
			out = append(out, src[pos:start-1]...)
			pos = start - 1
		case strings.HasPrefix(l, "\\"):
			if last != '-' && len(out) > 0 {
				out[len(out)-1] = strings.TrimSuffix(out[len(out)-1], "\n")
			}
		case l != "" && (l[0] == ' ' || l[0] == '-'):
			if pos >= len(src) || strings.TrimSuffix(src[pos], "\n") != strings.TrimSuffix(l[1:], "\n") {
				return nil, fmt.Errorf("the root's content does not match the patch: %w", errBadSection)
			}
			if l[0] == ' ' {
				out = append(out, src[pos])
			}
			pos++
			last = l[0]
		case l != "" && l[0] == '+':
			out = append(out, l[1:])
			last = '+'
		}
	}
	out = append(out, src[pos:]...)
	return []byte(strings.Join(out, "")), nil
}

// sectionPath is the path of a "diff --git a/X b/X" line: both names are
// the same but for renames, whose names the section gives again.
func sectionPath(head string) string {
	if strings.HasPrefix(head, `"`) {
		if q, err := strconv.QuotedPrefix(head); err == nil {
			return strings.TrimPrefix(unquoteName(q), "a/")
		}
	}
	n := (len(head) - len("a/ b/")) / 2
	if n <= 0 || len(head) < 2+n {
		return head
	}
	return head[2 : 2+n]
}

// unquoteName undoes git's C-quoting of a name, if quoted.
func unquoteName(s string) string {
	if !strings.HasPrefix(s, `"`) {
		return s
	}
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}
