//go:build linux

package overlayfs_test

// The WithFaults differential: the same steps run on os, where the
// failure is real (a read-only bind mount for EROFS, a full tmpfs for
// ENOSPC and for a short write), and on an overlay of an equal tree whose
// injector simulates it. Each step's outcome (bytes moved, error shape
// with names made relative, errno) and the final trees must agree.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// atomicWrite is the code under test: write a temporary file, fsync it,
// rename it over name; on failure remove the temporary file.
func atomicWrite(fsys afero.Fs, name string, data []byte) (err error) {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = fsys.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.Rename(tmp, name)
}

// outcome describes an error with root made relative: its shape and errno.
func outcome(root string, n int, err error) string {
	s := fmt.Sprintf("n=%d ", n)
	if err == nil {
		return s + "ok"
	}
	var e syscall.Errno
	errors.As(err, &e)
	return s + strings.ReplaceAll(shape(err), root+"/", "") + " " + e.Error()
}

type diffStep struct {
	name string
	run  func(fsys afero.Fs, root string) (int, error)
}

func runSteps(fsys afero.Fs, root string, steps []diffStep) []string {
	var out []string
	for _, s := range steps {
		n, err := s.run(fsys, root)
		out = append(out, s.name+": "+outcome(root, n, err))
	}
	return out
}

// writeSteps are steps that each would change the tree.
func writeSteps() []diffStep {
	p := filepath.Join
	return []diffStep{
		{"atomicWrite", func(fsys afero.Fs, root string) (int, error) {
			return 0, atomicWrite(fsys, p(root, "f"), []byte("new"))
		}},
		{"mkdir", func(fsys afero.Fs, root string) (int, error) { return 0, fsys.Mkdir(p(root, "x"), 0o755) }},
		{"mkdirall", func(fsys afero.Fs, root string) (int, error) { return 0, fsys.MkdirAll(p(root, "d/y/z"), 0o755) }},
		{"remove", func(fsys afero.Fs, root string) (int, error) { return 0, fsys.Remove(p(root, "f")) }},
		{"rename", func(fsys afero.Fs, root string) (int, error) { return 0, fsys.Rename(p(root, "f"), p(root, "g")) }},
		{"symlink", func(fsys afero.Fs, root string) (int, error) {
			return 0, fsys.(afero.Linker).SymlinkIfPossible("f", p(root, "s"))
		}},
		{"chmod", func(fsys afero.Fs, root string) (int, error) { return 0, fsys.Chmod(p(root, "f"), 0o600) }},
		{"chtimes", func(fsys afero.Fs, root string) (int, error) {
			return 0, fsys.Chtimes(p(root, "f"), time.Unix(1, 0), time.Unix(1, 0))
		}},
		{"create", func(fsys afero.Fs, root string) (int, error) { _, err := fsys.Create(p(root, "new")); return 0, err }},
		{"stat", func(fsys afero.Fs, root string) (int, error) { _, err := fsys.Stat(p(root, "f")); return 0, err }},
	}
}

// TestFaultsDifferentialEROFS: os on a read-only bind mount, the overlay
// with every mutating operation failing with EROFS.
func TestFaultsDifferentialEROFS(t *testing.T) {
	src := faultFixture(t)
	ro := t.TempDir()
	if err := unix.Mount(src, ro, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("a bind mount needs privileges: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(ro, unix.MNT_DETACH) })
	if err := unix.Mount("", ro, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("remounting read-only: %v", err)
	}
	lower := faultFixture(t)
	mutating := map[string]bool{"mkdir": true, "remove": true, "rename": true, "symlink": true, "link": true,
		"chmod": true, "chown": true, "chtimes": true, "truncate": true, "write": true}
	var armed atomic.Bool
	ov, err := overlayfs.New(lower, overlayfs.WithFaults(func(op, name string) error {
		// The steps open only to create or write: every open fails, as
		// every mutation, while they run.
		if armed.Load() && (mutating[op] || op == "open") {
			return syscall.EROFS
		}
		return nil
	}))
	must(t, err)
	want := runSteps(afero.NewOsFs(), ro, writeSteps())
	armed.Store(true)
	got := runSteps(ov, lower, writeSteps())
	armed.Store(false)
	compareSteps(t, want, got)
	if w, g := treeOf(t, afero.NewOsFs(), ro), treeOf(t, ov, lower); w != g {
		t.Errorf("final trees differ:\nos:\n%s\noverlay:\n%s", w, g)
	}
	if len(ov.Changes()) != 0 {
		t.Errorf("the layer changed: %v", ov.Changes())
	}
}

func compareSteps(t *testing.T, want, got []string) {
	t.Helper()
	for i := range want {
		if want[i] != got[i] {
			t.Errorf("step %d: os %s; overlay %s", i, want[i], got[i])
		}
	}
	t.Logf("%d steps agree with os:\n%s", len(want), strings.Join(want, "\n"))
}

// TestFaultsDifferentialENOSPC: os on a full tmpfs, the overlay with
// writes failing with ENOSPC; then a short write: os on a tmpfs with one
// page free, the overlay with a ShortIO of 4096 bytes.
func TestFaultsDifferentialENOSPC(t *testing.T) {
	mem := mountTmpfs(t, "size=4k")
	must(t, os.WriteFile(filepath.Join(mem, "fill"), make([]byte, 4096), 0o644))
	must(t, os.WriteFile(filepath.Join(mem, "f"), nil, 0o644))
	lower := t.TempDir()
	must(t, os.WriteFile(filepath.Join(lower, "fill"), make([]byte, 4096), 0o644))
	must(t, os.WriteFile(filepath.Join(lower, "f"), nil, 0o644))
	ov, err := overlayfs.New(lower, overlayfs.WithFaults(func(op, name string) error {
		if op == "write" {
			return syscall.ENOSPC
		}
		return nil
	}))
	must(t, err)
	steps := []diffStep{
		{"atomicWrite", func(fsys afero.Fs, root string) (int, error) {
			return 0, atomicWrite(fsys, filepath.Join(root, "f"), []byte("new"))
		}},
		{"append", func(fsys afero.Fs, root string) (int, error) {
			fh, err := fsys.OpenFile(filepath.Join(root, "f"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return 0, err
			}
			defer fh.Close()
			return fh.Write([]byte("more"))
		}},
	}
	compareSteps(t, runSteps(afero.NewOsFs(), mem, steps), runSteps(ov, lower, steps))
	if w, g := treeOf(t, afero.NewOsFs(), mem), treeOf(t, ov, lower); w != g {
		t.Errorf("final trees differ:\nos:\n%s\noverlay:\n%s", w, g)
	}

	short := mountTmpfs(t, "size=8k")
	must(t, os.WriteFile(filepath.Join(short, "fill"), make([]byte, 4096), 0o644))
	lower2 := t.TempDir()
	must(t, os.WriteFile(filepath.Join(lower2, "fill"), make([]byte, 4096), 0o644))
	ov2, err := overlayfs.New(lower2, overlayfs.WithFaults(func(op, name string) error {
		if op == "write" {
			return overlayfs.ShortIO{N: 4096, Err: syscall.ENOSPC}
		}
		return nil
	}))
	must(t, err)
	big := []diffStep{{"write 6000", func(fsys afero.Fs, root string) (int, error) {
		fh, err := fsys.Create(filepath.Join(root, "big"))
		if err != nil {
			return 0, err
		}
		defer fh.Close()
		data := make([]byte, 6000)
		for i := range data {
			data[i] = byte(i)
		}
		return fh.Write(data)
	}}}
	compareSteps(t, runSteps(afero.NewOsFs(), short, big), runSteps(ov2, lower2, big))
	if w, g := treeOf(t, afero.NewOsFs(), short), treeOf(t, ov2, lower2); w != g {
		t.Errorf("final trees differ:\nos:\n%s\noverlay:\n%s", w, g)
	}
}
