package gitdiff

import (
	"bytes"
	"fmt"
	"github.com/cowfs/cowfs/internal/longtest"
	"io/fs"
	"maps"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// names are path elements chosen to hit git's quoting: spaces (not
// quoted, but a tab after ---/+++), tabs, newlines, quotes, backslashes,
// UTF-8, a control byte, DEL, an invalid UTF-8 byte, a leading dash.
var testNames = portableNames([]string{
	"a", "b", "c.txt", "P", "P-1", "P.x", "sp ace", "tab\there", "nl\nname",
	`q"uote`, `back\slash`, "é", "\x01ctl", "del\x7f", "bad\xff", "-dash", "z",
})

// portableNames drops the names the file system cannot hold: APFS on macOS
// refuses names that are not valid UTF-8.
func portableNames(names []string) []string {
	if runtime.GOOS == "darwin" {
		return slices.DeleteFunc(names, func(n string) bool { return !utf8.ValidString(n) })
	}
	return names
}

// genContent returns file content of a random flavour.
func genContent(r *rand.Rand) string {
	vocab := []string{"", "a", "b", "}", "\tx := 1", "    return", "func f() {", "// c"}
	var b strings.Builder
	n := r.IntN(30)
	switch r.IntN(10) {
	case 0:
		return ""
	case 1: // binary
		for range r.IntN(200) + 1 {
			b.WriteByte(byte(r.IntN(4) * 85))
		}
		b.WriteByte(0)
		for range r.IntN(50) {
			b.WriteByte(byte(r.IntN(256)))
		}
		return b.String()
	case 2: // CRLF
		for range n {
			b.WriteString(vocab[r.IntN(len(vocab))] + "\r\n")
		}
	case 3: // CR only
		for range n {
			b.WriteString(vocab[r.IntN(len(vocab))] + "\r")
		}
	case 4: // invalid UTF-8 and long lines
		for range n {
			if r.IntN(3) == 0 {
				b.WriteString(strings.Repeat("long ", 2000))
			}
			b.WriteString("\xff\xfe" + vocab[r.IntN(len(vocab))] + "\n")
		}
	default:
		for range n {
			b.WriteString(vocab[r.IntN(len(vocab))])
			if r.IntN(4) == 0 {
				fmt.Fprintf(&b, " %d", r.IntN(1000))
			}
			b.WriteByte('\n')
		}
	}
	if r.IntN(4) == 0 && b.Len() > 0 {
		s := b.String()
		return s[:len(s)-1] // no newline at end of file
	}
	return b.String()
}

// edit returns s with a few lines inserted, deleted or replaced.
func edit(r *rand.Rand, s string) string {
	lines := strings.SplitAfter(s, "\n")
	for range r.IntN(4) + 1 {
		i := r.IntN(len(lines) + 1)
		switch r.IntN(3) {
		case 0:
			lines = slices.Insert(lines, i, fmt.Sprintf("new %d\n", r.IntN(100)))
		case 1:
			if i < len(lines) {
				lines = slices.Delete(lines, i, i+1)
			}
		case 2:
			if i < len(lines) {
				lines[i] = fmt.Sprintf("changed %d\n", r.IntN(100))
			}
		}
	}
	return strings.Join(lines, "")
}

func genPath(r *rand.Rand) string {
	elems := make([]string, r.IntN(3)+1)
	for i := range elems {
		elems[i] = testNames[r.IntN(len(testNames))]
	}
	return strings.Join(elems, "/")
}

func genEntry(r *rand.Rand) entry {
	switch r.IntN(8) {
	case 0:
		// Targets never resolve inside the tree: git apply cannot create
		// "P/x" while "P" is a symlink loop (lstat gives ELOOP), whatever
		// the patch order. TestTypeChangesGit covers symlinks that resolve.
		return entry{fs.ModeSymlink, "t/" + genPath(r)}
	case 1:
		return entry{0o755, genContent(r)}
	}
	return entry{0o644, genContent(r)}
}

func genTree(r *rand.Rand) tree {
	t := tree{}
	for range r.IntN(12) {
		t.put(genPath(r), genEntry(r))
	}
	return t
}

// mutate applies random operations: edits, exec-bit flips, deletions of
// files and whole directories, type changes file<->symlink and
// file<->directory, creations.
func mutate(r *rand.Rand, old tree) tree {
	t := old.clone()
	for range r.IntN(8) + 1 {
		paths := slices.Sorted(maps.Keys(t))
		if len(paths) == 0 || r.IntN(5) == 0 {
			t.put(genPath(r), genEntry(r))
			continue
		}
		p := paths[r.IntN(len(paths))]
		e := t[p]
		switch r.IntN(11) {
		case 8, 9: // a move, with an edit or not
			delete(t, p)
			if r.IntN(2) == 0 && e.mode != fs.ModeSymlink {
				e.data = edit(r, e.data)
			}
			t.put(genPath(r), e)
		case 10: // a directory moves
			i := strings.LastIndexByte(p, '/')
			to := genPath(r)
			if i < 0 || to == p[:i] || under(to, p[:i]) {
				continue
			}
			dir := p[:i]
			for _, q := range paths {
				if qe, ok := t[q]; ok && under(q, dir) {
					delete(t, q)
					t.put(to+q[len(dir):], qe)
				}
			}
		case 0:
			delete(t, p)
		case 1: // remove a whole directory
			if i := strings.LastIndexByte(p, '/'); i >= 0 {
				t.removeAll(p[:i])
			}
		case 2: // the file becomes a directory
			t.put(p+"/"+testNames[r.IntN(len(testNames))], genEntry(r))
		case 3: // a directory becomes a file
			if i := strings.LastIndexByte(p, '/'); i >= 0 {
				t.put(p[:i], genEntry(r))
			}
		case 4:
			if e.mode == fs.ModeSymlink {
				t[p] = entry{0o644, e.data}
			} else {
				t[p] = entry{fs.ModeSymlink, "target/" + p}
			}
		case 5:
			if e.mode != fs.ModeSymlink {
				t[p] = entry{e.mode ^ 0o111, e.data}
			}
		default:
			if e.mode == fs.ModeSymlink {
				t[p] = entry{e.mode, e.data + "x"}
			} else {
				t[p] = entry{e.mode, edit(r, e.data)}
			}
		}
	}
	return t
}

// inexactRename matches the header of a rename with edits.
var inexactRename = regexp.MustCompile(`(?m)^similarity index [1-9][0-9]%$`)

func shuffled(r *rand.Rand, cs []Change) []Change {
	r.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
	return cs
}

// TestRoundTripGit applies patches of random tree changes with real git
// apply and git apply -R and compares the trees byte for byte, with the
// executable bit. The same patches are applied with go-gitdiff.
func TestRoundTripGit(t *testing.T) {
	git := gitPath(t)
	n := longtest.N(50, 150)
	if testing.Short() {
		n = 20
	}
	seen := map[string]int{}
	defer func() {
		// The generators must keep producing every case the patch format has.
		for _, k := range []string{"GIT binary patch", "new file mode 120000", "old mode", "\\ No newline", "\"a/", "\t\n", "\r\n", "dir->file", "file->dir", "similarity index 100%", "inexact rename"} {
			if seen[k] == 0 && !t.Failed() {
				t.Errorf("no generated patch exercised %q", k)
			}
		}
	}()
	for i := range n {
		r := rand.New(rand.NewPCG(uint64(i), 3))
		old := genTree(r)
		new := mutate(r, old)
		for p := range new {
			for q := range old {
				if under(q, p) {
					seen["dir->file"]++
				}
				if under(p, q) {
					seen["file->dir"]++
				}
			}
		}
		var buf bytes.Buffer
		if err := Write(&buf, shuffled(r, changesBetween(old, new, r.IntN(2) == 0))); err != nil {
			t.Fatalf("seed %d: Write: %v", i, err)
		}
		if buf.Len() == 0 {
			// git apply refuses an empty patch; there must be nothing to do.
			if d := treeDiff(old, new); d != "" {
				t.Fatalf("seed %d: empty patch for a change:\n%s", i, d)
			}
			continue
		}
		for _, k := range []string{"GIT binary patch", "new file mode 120000", "old mode", "\\ No newline", "\"a/", "\t\n", "\r\n", "similarity index 100%"} {
			if bytes.Contains(buf.Bytes(), []byte(k)) {
				seen[k]++
			}
		}
		if inexactRename.Match(buf.Bytes()) {
			seen["inexact rename"]++
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			roundTrip(t, git, old, new, buf.Bytes())
		})
	}
}

// TestRoundTripGoGitdiff is the in-process second opinion: more cases than
// the git test can afford, applied with bluekeyes/go-gitdiff.
func TestRoundTripGoGitdiff(t *testing.T) {
	for i := range longtest.N(500, 2000) {
		r := rand.New(rand.NewPCG(uint64(i), 4))
		old := genTree(r)
		new := mutate(r, old)
		var buf bytes.Buffer
		if err := Write(&buf, shuffled(r, changesBetween(old, new, true))); err != nil {
			t.Fatalf("seed %d: Write: %v", i, err)
		}
		got, err := applyGoGitdiff(old, buf.Bytes())
		if err != nil {
			t.Fatalf("seed %d: go-gitdiff: %v\npatch:\n%s", i, err, buf.Bytes())
		}
		if d := treeDiff(new, got); d != "" {
			t.Fatalf("seed %d: go-gitdiff result:\n%s\npatch:\n%s", i, d, buf.Bytes())
		}
	}
}

// TestNoChangesNoOutput: equal sides render nothing at all.
func TestNoChangesNoOutput(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 50 {
		tr := genTree(r)
		var buf bytes.Buffer
		if err := Write(&buf, changesBetween(tr, tr, true)); err != nil {
			t.Fatal(err)
		}
		if buf.Len() != 0 {
			t.Fatalf("equal trees gave a patch:\n%s", buf.Bytes())
		}
	}
}

// under reports whether p lies strictly under directory dir.
func under(p, dir string) bool {
	return dir != "" && len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir)
}
