package overlayfs_test

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// TestCommitFaults makes the disk refuse one write of a commit, at every
// write in turn (EIO before it), then runs Recover: the tree is exactly the
// old one when the refusal came before the commit point (staging, the
// intent) and exactly the new one (os on a copy) after it, and no journal
// is left. Recover itself is then interrupted at each of its writes and run
// again: still exactly the new tree.
func TestCommitFaults(t *testing.T) {
	scratch := lcSyncFreeDir(t)
	base, root := filepath.Join(scratch, "base"), filepath.Join(scratch, "root")
	wlBase(t, base, 6, 40)
	ops := wlGenerate(t, base, rand.New(rand.NewPCG(3, 13)), 60)
	oldTree, newTree := snapTree(t, base), wlOracle(t, base, scratch, ops)

	layer := func() *overlayfs.Fs {
		resetTree(t, base, root)
		c := newCow(t, root)
		if err := wlRun(c, root, ops); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Count the writes of an undisturbed commit.
	var writes []string
	c := layer()
	if err := overlayfs.CommitWithFaults(c, func(op, rel string) error {
		writes = append(writes, op+" "+rel)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if d := newTree.diff(snapTree(t, root)); len(d) > 0 {
		t.Fatalf("the undisturbed commit differs from os:\n%s", strings.Join(d, "\n"))
	}
	eio := &fs.PathError{Op: "write", Path: "injected", Err: syscall.EIO}
	afterPoint := 0
	for i, w := range writes {
		c := layer()
		n := 0
		err := overlayfs.CommitWithFaults(c, func(op, rel string) error {
			n++
			if n == i+1 {
				return eio
			}
			return nil
		})
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("fault at write %d (%s): Commit = %v, want an error wrapping EIO", i, w, err)
		}
		before := strings.HasPrefix(w, "stage ") || strings.HasPrefix(w, "seal ")
		if got := errors.Is(err, overlayfs.ErrInterruptedCommit); got == before {
			t.Errorf("fault at write %d (%s): errors.Is(err, ErrInterruptedCommit) = %v", i, w, got)
		}
		if before {
			if d := oldTree.diff(snapTree(t, root)); len(d) > 0 {
				t.Fatalf("fault at write %d (%s) before the commit point changed the tree:\n%s", i, w, strings.Join(d, "\n"))
			}
			if cs := c.Changes(); len(cs) == 0 {
				t.Errorf("fault at write %d (%s): the layer lost its changes", i, w)
			}
		}
		want, label := oldTree, "old"
		if !before {
			want, label = newTree, "new"
			afterPoint++
		}
		if err := overlayfs.Recover(root); err != nil {
			t.Fatalf("fault at write %d (%s): Recover: %v", i, w, err)
		}
		if d := want.diff(snapTree(t, root)); len(d) > 0 {
			t.Fatalf("fault at write %d (%s), then Recover: not the %s tree:\n%s", i, w, label, strings.Join(d, "\n"))
		}
		if _, err := os.Lstat(filepath.Join(root, ".cowfs-commit")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("fault at write %d (%s): a journal is left after Recover", i, w)
		}
	}
	if afterPoint == 0 {
		t.Fatalf("no write after the commit point among %d", len(writes))
	}

	// Recover interrupted at each of its own writes, then run again.
	for k := 1; ; k++ {
		c := layer()
		stop := errors.New("stop")
		n := 0
		err := overlayfs.CommitWithFaults(c, func(op, rel string) error {
			if op == "trash" || op == "place" {
				return stop // the commit point is passed: interrupted
			}
			return nil
		})
		if !errors.Is(err, overlayfs.ErrInterruptedCommit) {
			t.Fatalf("Commit stopped after the commit point = %v", err)
		}
		err = overlayfs.RecoverWithFaults(root, func(op, rel string) error {
			n++
			if n == k {
				return eio
			}
			return nil
		})
		if err == nil {
			if k == 1 {
				t.Fatal("Recover made no write")
			}
			t.Logf("Recover interrupted at each of its %d writes and run again gave the new tree", k-1)
			break
		}
		if err := overlayfs.Recover(root); err != nil {
			t.Fatalf("Recover after a Recover interrupted at write %d: %v", k, err)
		}
		if d := newTree.diff(snapTree(t, root)); len(d) > 0 {
			t.Fatalf("Recover interrupted at write %d, then Recover: not the new tree:\n%s", k, strings.Join(d, "\n"))
		}
	}
	t.Logf("%d commit writes, %d of them after the commit point", len(writes), afterPoint)
}

// TestCommitSwapDuringCommit swaps, after the commit point, a directory the
// commit writes into for a symlink out of the root: the move into it fails
// with an error wrapping ErrOutsideRoot, and nothing outside the root is
// written (by the Commit or by the Recover that follows).
func TestCommitSwapDuringCommit(t *testing.T) {
	for _, target := range []string{"abs", "../outside"} {
		t.Run(target, func(t *testing.T) {
			base := t.TempDir()
			root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
			mkTree(t, root, map[string]string{"d/f": "f\n"})
			mkTree(t, outside, map[string]string{"keep": "outside\n"})
			if target == "abs" {
				target = outside
			}
			c := newCow(t, root)
			if err := writeVia(c, filepath.Join(root, "d/new")); err != nil {
				t.Fatal(err)
			}
			beforeOut := snapTree(t, outside)
			swapped := false
			err := overlayfs.CommitWithFaults(c, func(op, rel string) error {
				if op == "place" && !swapped {
					swapped = true
					return swapForSymlink(filepath.Join(root, "d"), target)
				}
				return nil
			})
			if !errors.Is(err, overlayfs.ErrOutsideRoot) || !errors.Is(err, overlayfs.ErrInterruptedCommit) {
				t.Errorf("Commit with d swapped mid-way = %v, want ErrOutsideRoot and ErrInterruptedCommit", err)
			}
			if err := overlayfs.Recover(root); !errors.Is(err, overlayfs.ErrOutsideRoot) {
				t.Errorf("Recover with d still swapped = %v, want ErrOutsideRoot", err)
			}
			if d := beforeOut.diff(snapTree(t, outside)); len(d) > 0 {
				t.Errorf("the outside changed:\n%s", strings.Join(d, "\n"))
			}
			if fi, err := os.Lstat(filepath.Join(root, "d")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
				t.Errorf("d is no longer the symlink: %v %v", fi, err)
			}
		})
	}
}
