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

// TestReview2LateLowerLinkAfterCommit: Stat lstats a lower name outside
// the lock and, finding a symlink, takes the lock again and walks with that
// symlink as seen (lowerLink), re-checking only that the layer has no
// entry there. A Commit in between that replaced the symlink with a file
// leaves the layer without an entry there too, so the walk follows a
// symlink that no longer exists: Readlink of a file, EINVAL, an answer the
// view gave at no instant (before: the target's info; after: the file's).
// This plays the Stat's steps around the Commit.
func TestReview2LateLowerLinkAfterCommit(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "d", "t"), []byte("target"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("t", filepath.Join(root, "d", "l")); err != nil {
		t.Fatal(err)
	}
	c, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	l := c.primary()
	name := filepath.Join(root, "d", "l")
	since := l.commits.Load() // the Stat's, before its lstat
	fi, err := os.Lstat(name)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("lstat: %v %v", fi, err)
	}
	if err := c.Remove(name); err != nil {
		t.Fatal(err)
	}
	fh, err := c.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	fh.Write([]byte("new"))
	fh.Close()
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(filepath.Join(root, "d", "t")); err != nil { // another goroutine's
		t.Fatal(err)
	}
	l.mu.RLock()
	got, err := l.statWalk("stat", name, "", true, l.lowerLink(name, fi, since))
	l.mu.RUnlock()
	if err != nil || got.Size() != 3 {
		t.Fatalf("Stat across a Commit that replaced a symlink by a file: %v, %v; want the file's info (size 3)", got, err)
	}
}
