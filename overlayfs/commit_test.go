package overlayfs_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

func TestCommitRegressions(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "d/e"), 0o755)
	os.WriteFile(filepath.Join(root, "d/b"), []byte("b\n"), 0o644)
	os.WriteFile(filepath.Join(root, "d/e/x"), []byte("x\n"), 0o644)
	// 1: an edit on disk under a directory the layer deleted is a conflict, not a lost update
	c, _ := overlayfs.New(root)
	c.RemoveAll(filepath.Join(root, "d"))
	os.WriteFile(filepath.Join(root, "d/b"), []byte("edited on disk\n"), 0o644)
	err := c.Commit()
	var ce *overlayfs.CommitError
	if !errors.Is(err, overlayfs.ErrConflict) || !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0] != "d/b" {
		t.Errorf("1: Commit = %v", err)
	}
	// 2: CommitPaths of a path hidden only by an opaque ancestor deletes it on disk
	c2, _ := overlayfs.New(root)
	c2.RemoveAll(filepath.Join(root, "d"))
	c2.Mkdir(filepath.Join(root, "d"), 0o755)
	if err := c2.CommitPaths(filepath.Join(root, "d/e")); err != nil {
		t.Errorf("2: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "d/e/x")); !os.IsNotExist(err) {
		t.Errorf("2: d/e/x still on disk: %v", err)
	}
	if got := c2.Changes(); len(got) != 1 || got[0].Path != "d/b" || got[0].Kind != overlayfs.Deleted {
		t.Errorf("2: Changes after = %v, want only the deletion of d/b", got)
	}
	// 3: a handle opened before a Restore, never used, still writes (a private copy)
	c3, _ := overlayfs.New(root)
	s := c3.Snapshot()
	f, _ := c3.OpenFile(filepath.Join(root, "n"), os.O_RDWR|os.O_CREATE, 0o644)
	c3.Restore(s)
	if _, err := f.WriteAt([]byte("xy"), 0); err != nil {
		t.Errorf("3: WriteAt after Restore: %v", err)
	}
}

// TestRootModeIsAChange chmods the root directory itself through the
// overlay: Changes, ChangesBetween and Layer show it at ".", Commit writes
// it (the oracle: os.Stat of the root), and Changes is empty afterwards.
func TestRootModeIsAChange(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	before := c.Snapshot()
	want := fs.FileMode(0o750) | fs.ModeSetgid
	if err := c.Chmod(root, want); err != nil {
		t.Fatal(err)
	}
	wantChange := overlayfs.Change{Root: c.Root(), Path: ".", Kind: overlayfs.Modified, Mode: fs.ModeDir | want, OldMode: fs.ModeDir | 0o755}
	if got := c.Changes(); len(got) != 1 || got[0] != wantChange {
		t.Errorf("Changes() = %#v, want [%#v]", got, wantChange)
	}
	if got := c.ChangesBetween(before, c.Snapshot()); len(got) != 1 || got[0] != wantChange {
		t.Errorf("ChangesBetween = %#v, want [%#v]", got, wantChange)
	}
	if l := c.Layer(); len(l) != 1 || l[0].Path != "." || l[0].Type != overlayfs.EntryDir || l[0].Mode != want {
		t.Errorf("Layer() = %+v, want the root at \".\" with mode %v", l, want)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode(); got != fs.ModeDir|want {
		t.Errorf("the root's mode on disk after Commit = %v, want %v", got, fs.ModeDir|want)
	}
	if got := c.Changes(); len(got) != 0 {
		t.Errorf("Changes() after Commit = %v, want none", got)
	}
}

// TestCommitKeepsHoles commits a file written with a hole of 16 MiB in the
// middle and a renamed sparse lower file: read back with os, the bytes are
// exact, and the file system allocated far less than their size (the
// kernel's block count is the oracle).
func TestCommitKeepsHoles(t *testing.T) {
	const size = 16 << 20
	root := t.TempDir()
	lowerSparse := filepath.Join(root, "sparse")
	if err := os.WriteFile(lowerSparse, []byte("head"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(lowerSparse, size); err != nil {
		t.Fatal(err)
	}
	c, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := c.OpenFile(filepath.Join(root, "big"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("start"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("end"), size-3); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(lowerSparse, filepath.Join(root, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	wantBig := make([]byte, size)
	copy(wantBig, "start")
	copy(wantBig[size-3:], "end")
	wantMoved := make([]byte, size)
	copy(wantMoved, "head")
	for name, want := range map[string][]byte{"big": wantBig, "moved": wantMoved} {
		p := filepath.Join(root, name)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes on disk, not the %d bytes of the view", name, len(got), len(want))
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := sysAllocated(fi); ok && n > 1<<20 {
			t.Errorf("%s: %d bytes allocated for a file of %d bytes that is nearly all hole", name, n, size)
		}
	}
}

// TestCommitRefusesJournalName: the layer cannot commit the journal's own
// name; the error says so, nothing is written, the layer is kept.
func TestCommitRefusesJournalName(t *testing.T) {
	root := t.TempDir()
	c, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MkdirAll(filepath.Join(root, ".cowfs-commit", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); !errors.Is(err, fs.ErrInvalid) || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("Commit of .cowfs-commit = %v, want an error wrapping fs.ErrInvalid saying the name is reserved", err)
	}
	if des, _ := os.ReadDir(root); len(des) != 0 {
		t.Errorf("the refused Commit wrote %v", des)
	}
	if cs := c.Changes(); len(cs) != 2 {
		t.Errorf("Changes() after the refused Commit = %v, want the 2 added paths", cs)
	}
}
