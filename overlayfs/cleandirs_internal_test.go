package overlayfs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// cleanOracle is what cleanRel decides, said with path.Clean: a relative
// slash path that cleaning leaves as it is, that does not climb out with
// "..", and whose components are C strings the kernel takes as names.
func cleanOracle(rel string) bool {
	if rel == "" || path.Clean(rel) != rel || strings.HasPrefix(rel, "/") ||
		rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, "\x00") {
		return false
	}
	for c := range strings.SplitSeq(rel, "/") {
		if len(c) > nameMax {
			return false
		}
	}
	return true
}

// TestCleanRel compares cleanRel with cleanOracle on names built from the
// bytes that matter (slash, dot, NUL, a letter) and on long components.
func TestCleanRel(t *testing.T) {
	long := strings.Repeat("x", nameMax)
	fixed := []string{"", "a", ".", "..", "...", ".a", "a.", "a/.", "a/..", "./a", "../a", "a/./b",
		"a/../b", "a//b", "/a", "a/", "a\x00", long, long + "x", "a/" + long, "a/" + long + "x",
		long + "x/a", long + "/a/" + long}
	r := rand.New(rand.NewPCG(14, 14))
	alphabet := []string{"/", ".", "a", "\x00", "..", long}
	for range 20000 {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		fixed = append(fixed, b.String())
	}
	for _, rel := range fixed {
		dir, ok := cleanRel(rel)
		if want := cleanOracle(rel); ok != want {
			t.Errorf("cleanRel(%q) = %v, want %v", rel, ok, want)
			continue
		}
		want := path.Dir(rel)
		if want == "." {
			want = ""
		}
		if ok && dir != want {
			t.Errorf("cleanRel(%q) dir = %q, want %q", rel, dir, want)
		}
	}
}

// TestIndexedFilesLeaveNothing: files in the index of files whose open
// counts stay at zero (see release) leave nothing behind once unlinked:
// no count, no content, no orphan, no index entry, whether a handle was
// still open at the unlink (the last Close drops them) or not. Some files
// are removed one by one, the others with their directory.
func TestIndexedFilesLeaveNothing(t *testing.T) {
	root := t.TempDir()
	c, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string) {
		t.Helper()
		for range 3 { // the second open puts it in the index, the third finds it there
			f, err := c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte(name)); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var open []*file
	for i := range 40 {
		name := filepath.Join(dir, fmt.Sprintf("f%02d", i))
		write(name)
		if i%4 == 0 {
			h, err := c.OpenFile(name, os.O_RDWR, 0) // indexed: a sticky handle
			if err != nil {
				t.Fatal(err)
			}
			if !h.(*file).sticky {
				t.Fatalf("%s: the handle of an indexed file is not sticky", name)
			}
			open = append(open, h.(*file))
		}
	}
	l := c.primary()
	if n := len(l.paths.clean.files); n != 40 {
		t.Fatalf("index holds %d files, want 40", n)
	}
	for i := range 20 {
		if err := c.Remove(filepath.Join(dir, fmt.Sprintf("f%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, h := range open {
		if _, err := h.Write([]byte("still there")); err != nil {
			t.Fatal(err)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if len(l.opened) != 0 || len(l.orphan) != 0 || l.blobs.Len() != 0 || len(l.paths.clean.files) != 0 {
		t.Errorf("after every file was unlinked and closed: %d counts, %d orphans, %d contents, %d index entries; want none",
			len(l.opened), len(l.orphan), l.blobs.Len(), len(l.paths.clean.files))
	}
}

// TestFindDropsClearedSlots: a reader without the lock that found a slot
// before a clear may put it in last after the clear; find must not hand it
// out again, or a Stat starting after the write that cleared would trust
// the state from before it.
func TestFindDropsClearedSlots(t *testing.T) {
	c := &cleanDirs{}
	old := c.slot("d")
	old.st.Store(uint32(dirClean | dirKnown | dirBare))
	c.clear()
	c.last.Store(old) // the racing reader's late store
	if s := c.find("d"); s != nil {
		t.Fatalf("find handed out the slot dropped by clear (state %b)", s.st.Load())
	}
	if st := c.state("d"); st != 0 {
		t.Fatalf("state after clear = %b, want 0", st)
	}
	fresh := c.slot("d")
	c.last.Store(old)
	if s := c.find("d"); s != fresh {
		t.Fatalf("find = %p, want the slot made after the clear %p", s, fresh)
	}
}
