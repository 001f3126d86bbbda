package overlayfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

func TestDbgRemoved(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a/deep/nested/x"), 0o755)
	c, _ := overlayfs.New(root)
	h, err := c.Open(filepath.Join(root, "a/deep/nested"))
	t.Logf("open %T %v", h, err)
	t.Log(c.RemoveAll(filepath.Join(root, "a/deep")))
	_, err = h.Readdir(-1)
	t.Logf("readdir %v", err)
}
