//go:build linux

package overlayfs_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cowfs/cowfs/overlayfs"
)

// TestDeviceNodeNotCopiedUp: a change to a lower character device (here
// 1:3, what /dev/null is) fails with ErrSpecialFile instead of turning it
// into a regular file in the layer; the device is then seen as os sees it
// on the untouched real tree, and read, Lstat and Remove still work as on
// os (checked on a real copy).
func TestDeviceNodeNotCopiedUp(t *testing.T) {
	mk := func(dir string) {
		if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"null", "d/null2"} {
			if err := unix.Mknod(filepath.Join(dir, p), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
				t.Skipf("mknod of a character device is not permitted: %v", err)
			}
			// mknod applies the umask: make the modes exact.
			if err := os.Chmod(filepath.Join(dir, p), 0o666); err != nil {
				t.Fatal(err)
			}
		}
	}
	root, osDir := t.TempDir(), t.TempDir()
	mk(root)
	mk(osDir)
	before := hashTree(t, root)
	c := newCow(t, root)
	dev := filepath.Join(root, "null")
	when := time.Unix(1e9, 0)
	for _, tc := range []struct {
		desc string
		err  error
	}{
		{"Chmod", c.Chmod(dev, 0o600)},
		{"Chown", c.Chown(dev, os.Getuid(), os.Getgid())},
		{"Chtimes", c.Chtimes(dev, when, when)},
		{"OpenFile O_WRONLY", openErr(c.OpenFile(dev, os.O_WRONLY, 0))},
		{"OpenFile O_RDWR|O_TRUNC", openErr(c.OpenFile(dev, os.O_RDWR|os.O_TRUNC, 0))},
		{"Rename", c.Rename(dev, filepath.Join(root, "moved"))},
		{"Rename of a directory holding one", c.Rename(filepath.Join(root, "d"), filepath.Join(root, "d2"))},
	} {
		if !errors.Is(tc.err, overlayfs.ErrSpecialFile) || !errors.Is(tc.err, errors.ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrSpecialFile", tc.desc, tc.err)
		}
		var pe *fs.PathError
		var le *os.LinkError
		if !errors.As(tc.err, &pe) && !errors.As(tc.err, &le) {
			t.Errorf("%s: err %T is neither *fs.PathError nor *os.LinkError", tc.desc, tc.err)
		} else if pe != nil && pe.Path != dev {
			t.Errorf("%s: error names %q, want %q", tc.desc, pe.Path, dev)
		}
	}
	if cs := c.Changes(); len(cs) != 0 {
		t.Errorf("Changes = %v, want none", cs)
	}
	checkUnchanged(t, root, before)

	// The view is os's view of the untouched copy.
	for _, p := range []string{"null", "d/null2"} {
		want, err := os.Lstat(filepath.Join(osDir, p))
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := c.LstatIfPossible(filepath.Join(root, p))
		if err != nil {
			t.Fatalf("Lstat %s: %v", p, err)
		}
		if got.Mode() != want.Mode() || got.Size() != want.Size() {
			t.Errorf("Lstat %s: mode %v size %d, os says %v %d", p, got.Mode(), got.Size(), want.Mode(), want.Size())
		}
		if st, ok := got.Sys().(*syscall.Stat_t); !ok || st.Rdev != unix.Mkdev(1, 3) {
			t.Errorf("Lstat %s: Sys %#v, want a Stat_t with rdev 1:3", p, got.Sys())
		}
	}
	// Reading passes through to the device: EOF at once, as os.
	h, err := c.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := h.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Errorf("Read = %d, %v; want 0, EOF", n, err)
	}
	h.Close()
	// Remove works as on os: a whiteout, the device gone from the view.
	if err := c.Remove(dev); err != nil {
		t.Errorf("Remove: %v", err)
	}
	if err := os.Remove(filepath.Join(osDir, "null")); err != nil {
		t.Fatal(err)
	}
	wt, err := walkTarget(osTarget{}, osDir)
	if err != nil {
		t.Fatal(err)
	}
	gt, err := walkTarget(c, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range diffTrees(wt, gt) {
		t.Error(e)
	}
	checkUnchanged(t, root, before)
}

// openErr closes f, if any, and returns err.
func openErr(f interface{ Close() error }, err error) error {
	if err == nil {
		f.Close()
	}
	return err
}
