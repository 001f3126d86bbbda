package kernel

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
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

// TestMaterializeKeepsHoles materializes a layer file with a 64 MiB hole
// and a copied-up sparse lower file: in the upper, read with os, the bytes
// are exact and the file system allocated far less than their size.
func TestMaterializeKeepsHoles(t *testing.T) {
	const size = 64 << 20
	lower := t.TempDir()
	if err := os.WriteFile(filepath.Join(lower, "sparse"), []byte("head"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(lower, "sparse"), size); err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := f.OpenFile(filepath.Join(lower, "big"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, err1 := fh.WriteAt([]byte("start"), 0)
	_, err2 := fh.WriteAt([]byte("end"), size-3)
	if err := errors.Join(err1, err2, fh.Close(), f.Chmod(filepath.Join(lower, "sparse"), 0o600)); err != nil {
		t.Fatal(err)
	}
	upper := filepath.Join(t.TempDir(), "upper")
	if err := Materialize(f, upper, Options{UserXattr: true}); err != nil {
		t.Fatal(err)
	}
	wantBig := make([]byte, size)
	copy(wantBig, "start")
	copy(wantBig[size-3:], "end")
	wantSparse := make([]byte, size)
	copy(wantSparse, "head")
	for name, want := range map[string][]byte{"big": wantBig, "sparse": wantSparse} {
		p := filepath.Join(upper, name)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes in the upper, not the %d bytes of the view", name, len(got), len(want))
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Blocks*512 > 1<<20 {
			t.Errorf("%s: %d bytes allocated for a file of %d bytes that is nearly all hole", name, st.Blocks*512, size)
		}
	}
}
