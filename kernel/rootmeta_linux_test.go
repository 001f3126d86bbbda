package kernel

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// TestRootMetaThroughKernel checks the root directory's own metadata
// against the real kernel overlay. Materialize: the layer chmods and
// chowns the root; mounted over the lower, the kernel's merged root shows
// the view's mode, owner and time. Import: a command changes the mode of
// the mounted root (so the kernel writes the upper root); the imported
// layer lists the change at "." and its view's root has the mode the
// kernel showed.
func TestRootMetaThroughKernel(t *testing.T) {
	needMount(t)
	opts := Options{UserXattr: !inInitUserNS()}
	lower := t.TempDir()
	writeTree(t, lower)
	if err := os.Chmod(lower, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Chmod(lower, 0o750|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if err := f.Chown(lower, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	checkKernelView(t, f, opts, cmpOpts{times: true, dtimes: true, owners: true})

	d := t.TempDir()
	upper, work, mnt := filepath.Join(d, "upper"), filepath.Join(d, "work"), filepath.Join(d, "mnt")
	for _, p := range []string{upper, work, mnt} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m, err := Mount(context.Background(), lower, upper, work, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	chErr := os.Chmod(mnt, 0o711|fs.ModeSticky)
	kfi, statErr := os.Stat(mnt)
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if chErr != nil || statErr != nil {
		t.Fatal(chErr, statErr)
	}
	g, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(upper, g, opts); err != nil {
		t.Fatal(err)
	}
	want := overlayfs.Change{Root: g.Root(), Path: ".", Kind: overlayfs.Modified, Mode: kfi.Mode(), OldMode: fs.ModeDir | 0o755}
	if cs := g.Changes(); len(cs) != 1 || cs[0] != want {
		t.Errorf("Changes() after Import = %v, want [%v]", cs, want)
	}
	vfi, err := g.Stat(lower)
	if err != nil {
		t.Fatal(err)
	}
	if vfi.Mode() != kfi.Mode() {
		t.Errorf("the imported view's root has mode %v, the kernel's merged root %v", vfi.Mode(), kfi.Mode())
	}
}
