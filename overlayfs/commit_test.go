package overlayfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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
