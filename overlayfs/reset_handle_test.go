package overlayfs_test

// Handles that outlive a Reset: closing them behaves as on os.

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
)

// closeNoPanic closes h, turning a panic into a test failure so that the
// rest of the package still runs.
func closeNoPanic(t *testing.T, h afero.File) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("Close panicked: %v", r)
			err = nil
		}
	}()
	return h.Close()
}

// TestResetWithOpenWriteHandle: a handle from the second open for
// writing of a layer file (the one that put it in the index of files, gone,
// "sticky") closed after Reset or ResetLayer. On os, closing a handle never
// fails because of what happened to the tree; release wrote the kept count
// into the map that Reset had set to nil.
func TestResetWithOpenWriteHandle(t *testing.T) {
	for _, reset := range []string{"Reset", "ResetLayer"} {
		t.Run(reset, func(t *testing.T) {
			root := t.TempDir()
			name := filepath.Join(root, "f")
			c := newCow(t, root)
			must(t, afero.WriteFile(c, name, []byte("one"), 0o644))
			h, err := c.OpenFile(name, os.O_WRONLY, 0)
			must(t, err)
			if reset == "Reset" {
				c.Reset()
			} else {
				c.ResetLayer()
			}
			if err := closeNoPanic(t, h); err != nil {
				t.Errorf("Close after %s = %v; os gives nil", reset, err)
			}
			if _, err := c.Stat(name); !os.IsNotExist(err) {
				t.Errorf("Stat after %s = %v; want not exist (the lower has no f)", reset, err)
			}
		})
	}
}
