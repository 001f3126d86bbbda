package overlayfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestRewrittenFilesLeaveNothing: files opened for writing again and
// again leave nothing behind once unlinked: no count, no content, no
// orphan, whether a handle was still open at the unlink (the last Close
// drops them) or not. Some files are removed one by one, the others with
// their directory. (It pinned the index of files, which is gone.)
func TestRewrittenFilesLeaveNothing(t *testing.T) {
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
		for range 3 {
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
			h, err := c.OpenFile(name, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, h.(*file))
		}
	}
	l := c.primary()
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
	if len(l.opened) != 0 || len(l.orphan) != 0 || l.blobs.Len() != 0 {
		t.Errorf("after every file was unlinked and closed: %d counts, %d orphans, %d contents; want none",
			len(l.opened), len(l.orphan), l.blobs.Len())
	}
}

// TestRestoreLeavesNoOpenCounts: a test suite restores one snapshot
// after each test. Files each test wrote twice (so put in the index of
// files, their counts kept at zero by release) are gone with the Restore,
// but their counts stayed in opened for the life of the Fs: it grew by one
// per file ever indexed, without bound.
func TestRestoreLeavesNoOpenCounts(t *testing.T) {
	root := t.TempDir()
	c, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Snapshot()
	for i := range 50 {
		name := filepath.Join(root, fmt.Sprintf("t%02d", i))
		for range 2 {
			f, err := c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
		c.Restore(s)
	}
	l := c.primary()
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if n := len(l.opened); n > 1 {
		t.Errorf("after 50 tests restored away, with no handle open: %d open counts kept; want at most one", n)
	}
}
