//go:build unix

package overlayfs_test

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// TestAsUserIOFS runs the merged-view io/fs checks (fstest.TestFS and the
// comparison with os.DirFS of an os copy) on an overlay with AsUser as
// the tree's owner: the setup operations and every read of the io/fs
// view go through the checks, which allow what os allowed the owner.
func TestAsUserIOFS(t *testing.T) {
	orig := origTree(t, "project")
	fi, err := os.Stat(orig)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	c, copyDir := apply(t, orig, mergedOps, overlayfs.AsUser(int(st.Uid), int(st.Gid)))
	checkIOFS(t, c, copyDir, true)
}

// TestAsUserRemoveAllRoot checks that RemoveAll of the root is refused
// whole under AsUser, as without it: nothing of the view goes.
func TestAsUserRemoveAllRoot(t *testing.T) {
	orig := origTree(t, "project")
	fi, err := os.Stat(orig)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	c := newCow(t, orig, overlayfs.AsUser(int(st.Uid), int(st.Gid)))
	if err := c.RemoveAll(c.Root()); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("RemoveAll(root): %v, want EBUSY", err)
	}
	if ch := c.Changes(); len(ch) != 0 {
		t.Errorf("RemoveAll(root) changed the view: %v", ch)
	}
}
