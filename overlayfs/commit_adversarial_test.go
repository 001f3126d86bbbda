package overlayfs_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// treeState is everything a tree holds that a commit could change: per
// path (the root itself as "."), the type and every mode bit (setuid,
// setgid and sticky included), the bytes of a file, the target of a
// symlink, the owner and, for files, the modification time. Directory
// times are left out: a commit's journal is created (and removed) in the
// root, which moves the root's time.
type treeState map[string]string

// snapTree reads the state of the tree at dir with os, never following a
// symlink.
func snapTree(t testing.TB, dir string) treeState {
	t.Helper()
	out := treeState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		s := fmt.Sprintf("%v", fi.Mode())
		if uid, gid, ok := sysOwner(fi); ok {
			s += fmt.Sprintf(" %d:%d", uid, gid)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			s += " -> " + target
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s += fmt.Sprintf(" %x %d mtime=%d", sha256.Sum256(data), len(data), fi.ModTime().UnixNano())
		}
		out[filepath.ToSlash(rel)] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diff lists the paths at which two states differ.
func (s treeState) diff(other treeState) []string {
	var out []string
	for _, k := range sortedKeys(s, other) {
		if a, b := s[k], other[k]; a != b {
			out = append(out, fmt.Sprintf("%s: %q vs %q", k, a, b))
		}
	}
	return out
}

// TestCommitAdversarialLower changes the lower on disk between the layer's
// operations and Commit, in the ways that made the old Commit write
// outside the root or over someone else's file, and checks that Commit
// refuses: a *CommitError wrapping ErrConflict that names exactly the
// changed paths (and wraps ErrOutsideRoot where a swapped-in symlink leads
// outside), the root byte for byte as the disk change left it, nothing
// outside the root changed, no journal left. The oracle is os: the tree is
// read back with Lstat, ReadFile and Readlink.
func TestCommitAdversarialLower(t *testing.T) {
	cases := []struct {
		name    string
		layer   func(c *overlayfs.Fs, root string) error
		disk    func(root, outside string) error
		want    []string // conflicts
		escapes bool
	}{{
		name:  "dir the layer wrote into swapped for an absolute symlink out of the root",
		layer: func(c *overlayfs.Fs, root string) error { return writeVia(c, filepath.Join(root, "d/new")) },
		disk:  func(root, outside string) error { return swapForSymlink(filepath.Join(root, "d"), outside) },
		want:  []string{"d"}, escapes: true,
	}, {
		name:  "dir the layer wrote into swapped for a ../ symlink out of the root",
		layer: func(c *overlayfs.Fs, root string) error { return writeVia(c, filepath.Join(root, "d/new")) },
		disk:  func(root, outside string) error { return swapForSymlink(filepath.Join(root, "d"), "../outside") },
		want:  []string{"d"}, escapes: true,
	}, {
		name: "MkdirAll under a dir swapped for a ../.. symlink",
		layer: func(c *overlayfs.Fs, root string) error {
			return c.MkdirAll(filepath.Join(root, "g/h/new/deeper"), 0o755)
		},
		disk: func(root, outside string) error { return swapForSymlink(filepath.Join(root, "g/h"), "../../outside") },
		want: []string{"g/h"}, escapes: true,
	}, {
		name:  "dir the layer wrote into swapped for a symlink inside the root",
		layer: func(c *overlayfs.Fs, root string) error { return writeVia(c, filepath.Join(root, "d/new")) },
		disk:  func(root, outside string) error { return swapForSymlink(filepath.Join(root, "d"), "g") },
		want:  []string{"d"},
	}, {
		name: "file the layer rewrote replaced by a directory and back",
		layer: func(c *overlayfs.Fs, root string) error {
			return writeVia(c, filepath.Join(root, "a"))
		},
		disk: func(root, outside string) error {
			p := filepath.Join(root, "a")
			data, _ := os.ReadFile(p)
			if err := errors.Join(os.Remove(p), os.Mkdir(p, 0o755), os.Remove(p)); err != nil {
				return err
			}
			return os.WriteFile(p, data, 0o644)
		},
		want: []string{"a"},
	}, {
		name:  "file the layer rewrote replaced by a directory",
		layer: func(c *overlayfs.Fs, root string) error { return writeVia(c, filepath.Join(root, "a")) },
		disk: func(root, outside string) error {
			p := filepath.Join(root, "a")
			return errors.Join(os.Remove(p), os.Mkdir(p, 0o755))
		},
		want: []string{"a"},
	}, {
		name:  "the same new path created on disk",
		layer: func(c *overlayfs.Fs, root string) error { return writeVia(c, filepath.Join(root, "d/new")) },
		disk: func(root, outside string) error {
			return os.WriteFile(filepath.Join(root, "d/new"), []byte("theirs\n"), 0o644)
		},
		want: []string{"d/new"},
	}, {
		name:  "the same new directory created on disk",
		layer: func(c *overlayfs.Fs, root string) error { return c.Mkdir(filepath.Join(root, "n"), 0o755) },
		disk:  func(root, outside string) error { return os.Mkdir(filepath.Join(root, "n"), 0o755) },
		want:  []string{"n"},
	}, {
		name: "a new symlink where the disk got another",
		layer: func(c *overlayfs.Fs, root string) error {
			return c.SymlinkIfPossible("a", filepath.Join(root, "s"))
		},
		disk: func(root, outside string) error { return os.Symlink(outside, filepath.Join(root, "s")) },
		want: []string{"s"},
	}, {
		name:  "an addition deep under a deleted directory",
		layer: func(c *overlayfs.Fs, root string) error { return c.RemoveAll(filepath.Join(root, "e")) },
		disk: func(root, outside string) error {
			return os.WriteFile(filepath.Join(root, "e/x/y/new"), []byte("theirs\n"), 0o644)
		},
		want: []string{"e/x/y"},
	}, {
		name: "a directory whose mode the layer changed replaced by a file",
		layer: func(c *overlayfs.Fs, root string) error {
			return c.Chmod(filepath.Join(root, "g"), 0o700)
		},
		disk: func(root, outside string) error {
			p := filepath.Join(root, "g")
			return errors.Join(os.RemoveAll(p), os.WriteFile(p, nil, 0o644))
		},
		want: []string{"g"},
	}, {
		name: "a file renamed away edited on disk, its target created",
		layer: func(c *overlayfs.Fs, root string) error {
			return c.Rename(filepath.Join(root, "a"), filepath.Join(root, "d/a2"))
		},
		disk: func(root, outside string) error {
			return errors.Join(
				os.WriteFile(filepath.Join(root, "a"), []byte("edited\n"), 0o644),
				os.WriteFile(filepath.Join(root, "d/a2"), []byte("theirs\n"), 0o644))
		},
		want: []string{"a", "d/a2"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
			mkTree(t, root, map[string]string{
				"a": "a\n", "d/f": "f\n", "g/h/i": "i\n", "e/x/y/z": "z\n",
			})
			mkTree(t, outside, map[string]string{"keep": "outside\n"})
			c := newCow(t, root)
			if err := tc.layer(c, root); err != nil {
				t.Fatalf("layer: %v", err)
			}
			if err := tc.disk(root, outside); err != nil {
				t.Fatalf("disk change: %v", err)
			}
			before, beforeOut := snapTree(t, root), snapTree(t, outside)
			err := c.Commit()
			var ce *overlayfs.CommitError
			if !errors.As(err, &ce) || !errors.Is(err, overlayfs.ErrConflict) {
				t.Fatalf("Commit = %v, want a *CommitError wrapping ErrConflict", err)
			}
			if !slices.Equal(ce.Conflicts, tc.want) {
				t.Errorf("Conflicts = %q, want %q", ce.Conflicts, tc.want)
			}
			if got := errors.Is(err, overlayfs.ErrOutsideRoot); got != tc.escapes {
				t.Errorf("errors.Is(err, ErrOutsideRoot) = %v, want %v (err %v)", got, tc.escapes, err)
			}
			if d := before.diff(snapTree(t, root)); len(d) > 0 {
				t.Errorf("the refused Commit changed the root:\n%s", strings.Join(d, "\n"))
			}
			if d := beforeOut.diff(snapTree(t, outside)); len(d) > 0 {
				t.Errorf("the refused Commit changed the outside:\n%s", strings.Join(d, "\n"))
			}
			if err := overlayfs.Recover(root); err != nil {
				t.Errorf("Recover: %v", err)
			}
			if d := before.diff(snapTree(t, root)); len(d) > 0 {
				t.Errorf("Recover after the refused Commit changed the root:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// writeVia writes a file through the overlay.
func writeVia(c *overlayfs.Fs, name string) error {
	fh, err := c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = fh.Write([]byte("from the layer\n"))
	return errors.Join(err, fh.Close())
}

// swapForSymlink replaces the directory dir by a symlink to target.
func swapForSymlink(dir, target string) error {
	return errors.Join(os.RemoveAll(dir), os.Symlink(target, dir))
}

// mkTree writes files (with their parents) under dir.
func mkTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNewRefusesUnfinishedJournal leaves an interrupted commit's journal in
// a root: New refuses it with an error wrapping ErrInterruptedCommit that
// says to call Recover, a Commit through an Fs made before refuses too and
// writes nothing, and after Recover New works.
func TestNewRefusesUnfinishedJournal(t *testing.T) {
	root := t.TempDir()
	mkTree(t, root, map[string]string{"a": "a\n"})
	early := newCow(t, root)
	if err := writeVia(early, filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, ".cowfs-commit", "stage"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := overlayfs.New(root)
	if !errors.Is(err, overlayfs.ErrInterruptedCommit) || !strings.Contains(err.Error(), "Recover") {
		t.Fatalf("New on a root with a journal = %v, want an error wrapping ErrInterruptedCommit naming Recover", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != root {
		t.Errorf("New error %#v, want a *fs.PathError naming %s", err, root)
	}
	if err := early.Commit(); !errors.Is(err, overlayfs.ErrInterruptedCommit) {
		t.Errorf("Commit on a root with a journal = %v, want ErrInterruptedCommit", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused Commit wrote b: %v", err)
	}
	if err := overlayfs.Recover(root); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, ".cowfs-commit")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Recover left the journal: %v", err)
	}
	if _, err := overlayfs.New(root); err != nil {
		t.Errorf("New after Recover: %v", err)
	}
	if err := early.Commit(); err != nil {
		t.Errorf("Commit after Recover: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "b")); !bytes.Equal(data, []byte("from the layer\n")) {
		t.Errorf("b after Commit = %q", data)
	}
}

// TestCommitReadOnlyRoot commits onto a root the process cannot write (a
// read-only bind mount): an error wrapping EROFS, nothing written, the
// layer intact.
func TestCommitReadOnlyRoot(t *testing.T) {
	root := t.TempDir()
	mkTree(t, root, map[string]string{"a": "a\n"})
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := lcMount("--bind", root, ro); err != nil {
		t.Skipf("cannot bind-mount (needs Linux, mount(8) and CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { lcUnmount(ro) })
	if err := lcMount("-o", "remount,bind,ro", ro); err != nil {
		t.Skipf("cannot remount read-only: %v", err)
	}
	c := newCow(t, ro)
	if err := writeVia(c, filepath.Join(ro, "b")); err != nil {
		t.Fatal(err)
	}
	before := snapTree(t, root)
	err := c.Commit()
	if !errors.Is(err, syscall.EROFS) {
		t.Errorf("Commit on a read-only root = %v, want EROFS", err)
	}
	if d := before.diff(snapTree(t, root)); len(d) > 0 {
		t.Errorf("the failed Commit changed the root:\n%s", strings.Join(d, "\n"))
	}
	if cs := c.Changes(); len(cs) != 1 || cs[0].Path != "b" {
		t.Errorf("Changes after the failed Commit = %v, want [A b]", cs)
	}
}
