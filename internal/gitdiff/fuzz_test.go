package gitdiff

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzWrite renders one changed path from fuzzed content, modes and name.
// Write must not panic, must reject only invalid names, and its output
// must apply with go-gitdiff; for small inputs, and where git can create
// the name, it must also round-trip through real git apply and -R.
func FuzzWrite(f *testing.F) {
	f.Add("f", []byte("a\nb\nc\n"), []byte("a\nB\nc\n"), uint8(0b11))
	f.Add("sp ace/é", []byte("x"), []byte("x\n"), uint8(0b1111))
	f.Add("q\"\\\t\n", []byte(""), []byte("\x00bin"), uint8(0b10))
	f.Add("l", []byte("target"), []byte("data\n"), uint8(0b010011))
	f.Add("crlf", []byte("a\r\nb\r\n"), []byte("a\rb\r"), uint8(0b01))
	f.Add("../x", []byte("a"), []byte("b"), uint8(0b11))
	git, _ := lookGit()
	f.Fuzz(func(t *testing.T, path string, old, new []byte, flags uint8) {
		side := func(exists bool, data []byte, exec, symlink bool) (entry, *File) {
			if !exists {
				return entry{}, nil
			}
			e := entry{0o644, string(data)}
			switch {
			case symlink && len(data) > 0 && len(data) < 256 && bytes.IndexByte(data, 0) < 0:
				e.mode = fs.ModeSymlink
			case exec:
				e.mode = 0o755
			}
			return e, e.file()
		}
		oe, of := side(flags&1 != 0, old, flags&4 != 0, flags&16 != 0)
		ne, nf := side(flags&2 != 0, new, flags&8 != 0, flags&32 != 0)
		var buf bytes.Buffer
		err := Write(&buf, []Change{{Path: path, Old: of, New: nf}})
		if checkPath(path) != nil {
			if !errors.Is(err, ErrInvalidChange) {
				t.Fatalf("invalid path %q: err = %v, want ErrInvalidChange", path, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		oldTree, newTree := tree{}, tree{}
		if of != nil {
			oldTree[path] = oe
		}
		if nf != nil {
			newTree[path] = ne
		}
		got, err := applyGoGitdiff(oldTree, buf.Bytes())
		if err != nil {
			// go-gitdiff misparses some names git quotes correctly (one
			// ending in `"\`): there real git is the judge.
			if git == "" || len(old)+len(new) > 4096 || !gitCanCreate(path) {
				t.Fatalf("go-gitdiff: %v\npatch:\n%s", err, buf.Bytes())
			}
			roundTrip(t, git, oldTree, newTree, buf.Bytes())
			return
		}
		if d := treeDiff(newTree, got); d != "" {
			t.Fatalf("go-gitdiff result:\n%s\npatch:\n%s", d, buf.Bytes())
		}
		if git == "" || buf.Len() == 0 || len(old)+len(new) > 4096 || !gitCanCreate(path) {
			return
		}
		roundTrip(t, git, oldTree, newTree, buf.Bytes())
	})
}

// gitCanCreate reports whether path is a name the file system takes (APFS
// on macOS wants UTF-8) and git apply does not refuse (".git" and its NTFS
// aliases: any element containing "git" is left out to be safe).
func gitCanCreate(path string) bool {
	if runtime.GOOS == "darwin" && !utf8.ValidString(path) {
		return false
	}
	for elem := range strings.SplitSeq(path, "/") {
		if len(elem) > 200 || strings.Contains(strings.ToLower(elem), "git") {
			return false
		}
	}
	return true
}

// TestGitCanCreate: the names FuzzWrite applies with git can be created,
// and the ones it leaves out are the ones git refuses.
func TestGitCanCreate(t *testing.T) {
	dir := t.TempDir()
	for _, p := range portableNames([]string{"a", "sp ace/é", "q\"\\\t\n", "\x01\x7f\xff"}) {
		if !gitCanCreate(p) {
			t.Errorf("gitCanCreate(%q) = false", p)
		}
		name := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{".git/x", "a/.GIT", "git~1", strings.Repeat("x", 201)} {
		if gitCanCreate(p) {
			t.Errorf("gitCanCreate(%q) = true", p)
		}
	}
}

// FuzzLineDiff checks the line differ alone, fast: the unchanged lines of
// both sides must be the same sequence (the diff is valid), and the number
// of changed lines must be n+m-2*LCS, computed by the textbook dynamic
// program (the diff is minimal), also after git's sliding.
func FuzzLineDiff(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nc\nd\n")
	f.Add("}\n\n}\n\n}\n", "}\n\n}\n")
	f.Add("x\r\ny", "x\ny")
	f.Add("", "a")
	f.Fuzz(func(t *testing.T, old, new string) {
		a, b := splitLines(nil, old), splitLines(nil, new)
		if len(a)*len(b) > 250000 {
			t.Skip("too large for the quadratic oracle")
		}
		var d lineDiffer
		ca, cb := d.diff(a, b)
		checkDiff(t, a, b, ca, cb)
		// The budget check must know the exact edit distance.
		ra, rb := toRunes(a, b)
		dist := len(a) + len(b) - 2*lcs(a, b)
		if !d.within(ra, rb, dist) || (dist > 0 && d.within(ra, rb, dist-1)) {
			t.Fatalf("within disagrees with the edit distance %d", dist)
		}
	})
}

func toRunes(a, b []string) (ra, rb []rune) {
	ids := map[string]rune{}
	id := func(l string) rune {
		if _, ok := ids[l]; !ok {
			ids[l] = rune(len(ids))
		}
		return ids[l]
	}
	for _, l := range a {
		ra = append(ra, id(l))
	}
	for _, l := range b {
		rb = append(rb, id(l))
	}
	return ra, rb
}

// checkDiff fails unless ca/cb is a valid and minimal line diff of a and b.
func checkDiff(t *testing.T, a, b []string, ca, cb []bool) {
	t.Helper()
	var keptA, keptB []string
	changed := 0
	for i, l := range a {
		if ca[i] {
			changed++
		} else {
			keptA = append(keptA, l)
		}
	}
	for j, l := range b {
		if cb[j] {
			changed++
		} else {
			keptB = append(keptB, l)
		}
	}
	if strings.Join(keptA, "\x00") != strings.Join(keptB, "\x00") || len(keptA) != len(keptB) {
		t.Fatalf("unchanged lines differ:\n%q\n%q", keptA, keptB)
	}
	if want := len(a) + len(b) - 2*lcs(a, b); changed != want {
		t.Fatalf("%d changed lines, minimal is %d\na=%q\nb=%q", changed, want, a, b)
	}
}

func lcs(a, b []string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
