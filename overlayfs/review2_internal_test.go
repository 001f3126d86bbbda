package overlayfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReview2LateSawDirAfterCommit: Stat stats a lower directory outside
// the lock (lowerStat) and records it in the cache of real lower
// directories after its lstat. A Commit that replaces that directory with
// a file can run in between: it drops the caches, then the Stat's late
// store puts the old directory back, for good (only Commit drops it).
// Every later operation trusts it: Mkdir under what is now a file
// succeeds in the layer, where os says ENOTDIR. This plays the late store.
func TestReview2LateSawDirAfterCommit(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	l := c.primary()
	since := l.commits.Load() // the racing Stat's, before its lstat of "d"
	if err := c.RemoveAll(filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	fh, err := c.Create(filepath.Join(root, "d"))
	if err != nil {
		t.Fatal(err)
	}
	fh.Close()
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	l.sawDirSince("d", since) // the racing Stat's store, after its lstat saw the old directory
	want := os.Mkdir(filepath.Join(root, "d", "sub"), 0o755)
	got := c.Mkdir(filepath.Join(root, "d", "sub"), 0o755)
	if !errors.Is(want, syscall.ENOTDIR) || !errors.Is(got, syscall.ENOTDIR) {
		t.Fatalf("Mkdir under a file committed over a directory: got %v, os %v", got, want)
	}
}
