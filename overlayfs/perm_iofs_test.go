//go:build unix

package overlayfs_test

import (
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
