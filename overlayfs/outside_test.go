//go:build linux

package overlayfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"

	"github.com/cowfs/cowfs/overlayfs"
)

// outsideIntoRoot builds parent/root (a.txt, d/b.txt) and parent/outside
// with symlinks into the root: flink -> root/a.txt, dlink -> root/newfile
// (dangling), chain -> flink, dirlink -> root/d.
func outsideIntoRoot(t *testing.T, parent string) (root, outside string) {
	t.Helper()
	root, outside = filepath.Join(parent, "root"), filepath.Join(parent, "outside")
	for _, d := range []string{filepath.Join(root, "d"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range map[string]string{"a.txt": "alpha\n", "d/b.txt": "beta\n"} {
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"flink":   filepath.Join(root, "a.txt"),
		"dlink":   "../root/newfile",
		"chain":   "flink",
		"dirlink": filepath.Join(root, "d"),
	} {
		if err := os.Symlink(target, filepath.Join(outside, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

// TestOutsideNamesIntoRoot: with AllowOutsideWrites, writes through
// outside names that reach the root (a final symlink, a dangling one, a
// chain, a directory symlink) change the layer exactly as os changes a
// copy of the tree, and the real root stays byte- and metadata-identical.
func TestOutsideNamesIntoRoot(t *testing.T) {
	osParent, cowParent := t.TempDir(), t.TempDir()
	osRoot, osOut := outsideIntoRoot(t, osParent)
	root, out := outsideIntoRoot(t, cowParent)
	sum := hashTree(t, root)
	c := newCow(t, root, overlayfs.AllowOutsideWrites())
	mt := time.Unix(1_500_000_000, 0)
	steps := []struct {
		name string
		run  func(fsys target, out string) error
	}{
		{"WriteFile(flink)", func(fsys target, out string) error {
			return afero.WriteFile(fsys, filepath.Join(out, "flink"), []byte("via flink\n"), 0o600)
		}},
		{"WriteFile(dlink)", func(fsys target, out string) error {
			return afero.WriteFile(fsys, filepath.Join(out, "dlink"), []byte("new via dlink\n"), 0o640)
		}},
		{"append(chain)", func(fsys target, out string) error {
			f, err := fsys.OpenFile(filepath.Join(out, "chain"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			_, err = f.WriteString("appended\n")
			return errors.Join(err, f.Close())
		}},
		{"Chmod(flink)", func(fsys target, out string) error { return fsys.Chmod(filepath.Join(out, "flink"), 0o751) }},
		{"Chtimes(chain)", func(fsys target, out string) error { return fsys.Chtimes(filepath.Join(out, "chain"), mt, mt) }},
		{"Chown(flink)", func(fsys target, out string) error { return fsys.Chown(filepath.Join(out, "flink"), 1, 2) }},
		{"WriteFile(dirlink/c.txt)", func(fsys target, out string) error {
			return afero.WriteFile(fsys, filepath.Join(out, "dirlink", "c.txt"), []byte("c\n"), 0o644)
		}},
		{"Chmod(dirlink)", func(fsys target, out string) error { return fsys.Chmod(filepath.Join(out, "dirlink"), 0o700) }},
		{"WriteFile(outside file)", func(fsys target, out string) error {
			return afero.WriteFile(fsys, filepath.Join(out, "plain"), []byte("outside\n"), 0o644)
		}},
	}
	for _, s := range steps {
		want, got := s.run(osTarget{}, osOut), s.run(c, out)
		if describeErr(want, osParent) != describeErr(got, cowParent) {
			t.Errorf("%s: os %v, cowfs %v", s.name, want, got)
		}
	}
	checkUnchanged(t, root, sum)
	wantTree, err := walkTarget(osTarget{}, osRoot)
	if err != nil {
		t.Fatal(err)
	}
	gotTree, err := walkTarget(c, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range diffTrees(wantTree, gotTree) {
		t.Errorf("the view of the root differs from os's copy: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(out, "plain")); err != nil || string(data) != "outside\n" {
		t.Errorf("an outside write that reaches no root goes to the real file: %q, %v", data, err)
	}
}

// TestOutsideSwapRace: while a goroutine swaps outside/x between a plain
// file and a symlink to root/a.txt, Chmod, Chtimes and appends through
// outside/x (1,000 tries; 10,000 with COWFS_LONG=1) never reach the real
// root, which stays byte- and metadata-identical.
func TestOutsideSwapRace(t *testing.T) {
	tries := 1000
	if os.Getenv("COWFS_LONG") == "1" {
		tries = 10000
	}
	parent := t.TempDir()
	root, out := outsideIntoRoot(t, parent)
	sum := hashTree(t, root)
	c := newCow(t, root, overlayfs.AllowOutsideWrites())
	x, tmpLink, tmpFile := filepath.Join(out, "x"), filepath.Join(out, "x.link"), filepath.Join(out, "x.file")
	if err := os.WriteFile(x, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var swaps atomic.Int64
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if i%2 == 0 {
				os.Remove(tmpLink)
				os.Symlink(filepath.Join(root, "a.txt"), tmpLink)
				os.Rename(tmpLink, x)
			} else {
				os.WriteFile(tmpFile, []byte("x\n"), 0o644)
				os.Rename(tmpFile, x)
			}
			swaps.Add(1)
		}
	})
	mt := time.Unix(1_400_000_000, 0)
	for swaps.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	deadline := time.Now().Add(time.Minute)
	i := 0
	for ; (i < tries || swaps.Load() < int64(tries)) && time.Now().Before(deadline); i++ {
		switch i % 3 {
		case 0:
			c.Chmod(x, 0o600|os.FileMode(i%2)*0o100)
		case 1:
			c.Chtimes(x, mt, mt)
		case 2:
			if f, err := c.OpenFile(x, os.O_WRONLY|os.O_APPEND, 0); err == nil {
				f.WriteString("z")
				f.Close()
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d tries against %d swaps", i, swaps.Load())
	checkUnchanged(t, root, sum)
}

// TestOutsideTreeWithAlias: RemoveAll and Rename of an outside directory
// holding a bind mount of the root, or of one of its directories, fail
// with EBUSY before anything is touched: the real root and the outside
// tree stay as they were. Skipped without mount privilege.
func TestOutsideTreeWithAlias(t *testing.T) {
	for _, src := range []string{"", "d"} {
		t.Run("alias of root/"+src, func(t *testing.T) {
			parent := t.TempDir()
			root, out := outsideIntoRoot(t, parent)
			alias := filepath.Join(out, "sub", "alias")
			if err := os.MkdirAll(alias, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, "sub", "keep"), []byte("k"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mount(filepath.Join(root, src), alias, "", unix.MS_BIND, ""); err != nil {
				t.Skipf("no bind mount (%v): needs mount privilege", err)
			}
			t.Cleanup(func() {
				unix.Unmount(alias, unix.MNT_DETACH)
				unix.Unmount(filepath.Join(parent, "moved", "alias"), unix.MNT_DETACH) // had the Rename gone through
			})
			sum, outSum := hashTree(t, root), hashTree(t, out)
			c := newCow(t, root, overlayfs.AllowOutsideWrites())
			if err := c.RemoveAll(out); !errors.Is(err, syscall.EBUSY) {
				t.Errorf("RemoveAll(outside) = %v, want EBUSY", err)
			}
			if err := c.RemoveAll(filepath.Join(out, "sub")); !errors.Is(err, syscall.EBUSY) {
				t.Errorf("RemoveAll(outside/sub) = %v, want EBUSY", err)
			}
			if err := c.Rename(filepath.Join(out, "sub"), filepath.Join(parent, "moved")); !errors.Is(err, syscall.EBUSY) {
				t.Errorf("Rename(outside/sub) = %v, want EBUSY", err)
			}
			checkUnchanged(t, root, sum)
			checkUnchanged(t, out, outSum)
		})
	}
}
