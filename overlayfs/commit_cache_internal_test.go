package overlayfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCommitReplacingSeenDirectory: the resolver caches the real lower
// directories it walks through. A Commit that replaces such a directory
// with a file moves the family's epoch, so the next operation sees the
// file: Mkdir under it fails with ENOTDIR, as on os. (It played a Stat's
// late store into the cache across a Commit; with no lookup outside the
// lock that race is gone, and the sequence is what is left to check.)
func TestCommitReplacingSeenDirectory(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(filepath.Join(root, "d", "x")); !os.IsNotExist(err) { // walks through d
		t.Fatal(err)
	}
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
	want := os.Mkdir(filepath.Join(root, "d", "sub"), 0o755)
	got := c.Mkdir(filepath.Join(root, "d", "sub"), 0o755)
	if !errors.Is(want, syscall.ENOTDIR) || !errors.Is(got, syscall.ENOTDIR) {
		t.Fatalf("Mkdir under a file committed over a directory: got %v, os %v", got, want)
	}
}

// TestCommitReplacingSeenSymlink: Stat of a lower symlink, then a Commit
// that replaced the symlink with a file: Stat gives the file's info, as os
// does after. (It played the lock-free Stat's steps around the Commit.)
func TestCommitReplacingSeenSymlink(t *testing.T) {
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
	name := filepath.Join(root, "d", "l")
	if fi, err := c.Stat(name); err != nil || fi.Size() != 6 {
		t.Fatalf("Stat of the symlink: %v, %v", fi, err)
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
	got, err := c.Stat(name)
	want, werr := os.Stat(name)
	if err != nil || werr != nil || got.Size() != want.Size() || got.Mode() != want.Mode() {
		t.Fatalf("Stat across a Commit that replaced a symlink by a file: %v, %v; os: %v, %v", got, err, want, werr)
	}
}
