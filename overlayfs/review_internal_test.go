package overlayfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestReviewRestoreLeavesNoCounts: a test suite restores one snapshot
// after each test. Files each test wrote twice (so put in the index of
// files, their counts kept at zero by release) are gone with the Restore,
// but their counts stayed in opened for the life of the Fs: it grew by one
// per file ever indexed, without bound.
func TestReviewRestoreLeavesNoCounts(t *testing.T) {
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
