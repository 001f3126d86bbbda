//go:build linux

package overlayfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// TestCommitSpecialFiles: FIFOs and sockets the layer holds (copied up for
// a chmod or a rename, or put there as kernel.Import does for a command's
// mkfifo) are written by Commit as what they are. Oracle: the same
// operations done with os and unix.Mkfifo on a plain copy of the tree.
func TestCommitSpecialFiles(t *testing.T) {
	type step struct {
		cow func(c *overlayfs.Fs, root string) error
		os  func(root string) error
	}
	fifoEntry := func(rel string, perm os.FileMode) overlayfs.LayerEntry {
		return overlayfs.LayerEntry{Path: rel, Type: overlayfs.EntryFIFO, Mode: perm, Uid: os.Getuid(), Gid: os.Getgid()}
	}
	mkfifo := func(p string, perm uint32) error {
		if err := unix.Mkfifo(p, perm); err != nil {
			return err
		}
		return os.Chmod(p, os.FileMode(perm))
	}
	cases := map[string]step{
		"chmod lower fifo": {
			cow: func(c *overlayfs.Fs, r string) error { return c.Chmod(r+"/p", 0o640) },
			os:  func(r string) error { return os.Chmod(r+"/p", 0o640) },
		},
		"chmod lower socket": {
			cow: func(c *overlayfs.Fs, r string) error { return c.Chmod(r+"/s", 0o600) },
			os:  func(r string) error { return os.Chmod(r+"/s", 0o600) },
		},
		"rename lower fifo into a dir": {
			cow: func(c *overlayfs.Fs, r string) error { return c.Rename(r+"/p", r+"/d/q") },
			os:  func(r string) error { return os.Rename(r+"/p", r+"/d/q") },
		},
		"remove lower fifo": {
			cow: func(c *overlayfs.Fs, r string) error { return c.Remove(r + "/p") },
			os:  func(r string) error { return os.Remove(r + "/p") },
		},
		"new fifo in a new dir": {
			cow: func(c *overlayfs.Fs, r string) error {
				if err := c.Mkdir(r+"/n", 0o755); err != nil {
					return err
				}
				return c.PutEntry(fifoEntry("n/p", 0o644), nil)
			},
			os: func(r string) error {
				if err := os.Mkdir(r+"/n", 0o755); err != nil {
					return err
				}
				return mkfifo(r+"/n/p", 0o644)
			},
		},
		"fifo replaces a lower file": {
			cow: func(c *overlayfs.Fs, r string) error {
				if err := c.Remove(r + "/f"); err != nil {
					return err
				}
				return c.PutEntry(fifoEntry("f", 0o600), nil)
			},
			os: func(r string) error {
				if err := os.Remove(r + "/f"); err != nil {
					return err
				}
				return mkfifo(r+"/f", 0o600)
			},
		},
		"fifo replaces a lower directory": {
			cow: func(c *overlayfs.Fs, r string) error {
				if err := c.RemoveAll(r + "/d"); err != nil {
					return err
				}
				return c.PutEntry(fifoEntry("d", 0o600), nil)
			},
			os: func(r string) error {
				if err := os.RemoveAll(r + "/d"); err != nil {
					return err
				}
				return mkfifo(r+"/d", 0o600)
			},
		},
	}
	for name, st := range cases {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			mk := func(root string) {
				must(t, os.MkdirAll(filepath.Join(root, "d"), 0o755))
				must(t, os.WriteFile(filepath.Join(root, "f"), []byte("f\n"), 0o644))
				must(t, os.WriteFile(filepath.Join(root, "d", "x"), []byte("x\n"), 0o644))
				must(t, mkfifo(filepath.Join(root, "p"), 0o644))
				if err := unix.Mknod(filepath.Join(root, "s"), unix.S_IFSOCK|0o644, 0); err != nil {
					t.Fatal(err)
				}
			}
			root, want := filepath.Join(base, "root"), filepath.Join(base, "want")
			mk(root)
			mk(want)
			c, err := overlayfs.New(root)
			must(t, err)
			must(t, st.cow(c, c.Root()))
			must(t, st.os(want))
			view := mustWalk(t, c, c.Root())
			if err := errors.Join(diffTrees(mustWalk(t, osTarget{}, want), view)...); err != nil {
				t.Fatalf("view before Commit differs from os:\n%v", err)
			}
			if err := c.Commit(); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			if err := errors.Join(diffTrees(mustWalk(t, osTarget{}, want), mustWalk(t, osTarget{}, root))...); err != nil {
				t.Errorf("disk after Commit differs from os:\n%v", err)
			}
			if cs := c.Changes(); len(cs) != 0 {
				t.Errorf("Changes() after Commit = %s, want none", fmtChanges(cs))
			}
		})
	}
}
