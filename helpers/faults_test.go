package helpers_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/overlayfs"
)

// TestFailWriteNth: the second of three writes fails with EIO and writes
// nothing; the file ends as os's does after the first and third writes.
func TestFailWriteNth(t *testing.T) {
	root := t.TempDir()
	ov, err := overlayfs.New(root, helpers.FailWrite("log", 2), helpers.FailSync("other"))
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(root, "log")
	fh, err := ov.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	for _, s := range []string{"one ", "two ", "three"} {
		_, err := fh.WriteString(s)
		errs = append(errs, err)
	}
	if err := fh.Sync(); err != nil {
		t.Errorf("Sync of log: %v; FailSync(other) must not match it", err)
	}
	fh.Close()
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], syscall.EIO) {
		t.Fatalf("errors %v, want nil, EIO, nil", errs)
	}
	var pe *os.PathError
	if !errors.As(errs[1], &pe) || pe.Op != "write" || pe.Path != name {
		t.Errorf("error %#v, want a *PathError for write %s", errs[1], name)
	}
	// The oracle: os with the failed write left out.
	want := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(want, []byte("one three"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, _ := os.ReadFile(want)
	g, err := ov.IOFS().(interface{ ReadFile(string) ([]byte, error) }).ReadFile("log")
	if err != nil || string(g) != string(w) {
		t.Errorf("content %q (%v), os has %q", g, err, w)
	}
}

// TestDiskFullAfterZero: nothing fits; a create still works (an inode is
// free), as on a tmpfs of size 0 pages with inodes left.
func TestDiskFullAfterZero(t *testing.T) {
	root := t.TempDir()
	ov, err := overlayfs.New(root, helpers.DiskFullAfter(0))
	if err != nil {
		t.Fatal(err)
	}
	fh, err := ov.Create(filepath.Join(root, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if n, err := fh.Write([]byte("x")); n != 0 || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Write = %d, %v; want 0, ENOSPC", n, err)
	}
}
