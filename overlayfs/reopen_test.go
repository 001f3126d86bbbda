package overlayfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
)

// TestReopenAfterRestore: a file written again and again is changed after
// a Snapshot (Chmod, then rewritten: it keeps 0600 as on os, the same run
// beside it) while a handle on it stays open across the Restore, and is
// truncated by an open once restored. The open sees the restored file
// (mode 0644, as os keeps a file's mode through O_TRUNC: run the same on a
// real copy of the restored state), not the version the handle saw before
// the Restore, and reads what it wrote.
func TestReopenAfterRestore(t *testing.T) {
	root := t.TempDir()
	c := newCow(t, root)
	name := filepath.Join(root, "f")
	for range 3 {
		must(t, afero.WriteFile(c, name, []byte("restored"), 0o644))
	}
	s := c.Snapshot()
	osChanged := filepath.Join(t.TempDir(), "f")
	must(t, os.WriteFile(osChanged, []byte("restored"), 0o644))
	for _, side := range []struct {
		name string
		fsys afero.Fs
		path string
	}{{"cowfs", c, name}, {"os", afero.NewOsFs(), osChanged}} {
		must(t, side.fsys.Chmod(side.path, 0o600))
		must(t, afero.WriteFile(side.fsys, side.path, []byte("changed"), 0o644))
		fi, err := side.fsys.Stat(side.path)
		must(t, err)
		if fi.Mode() != 0o600 {
			t.Errorf("%s: rewritten after a Chmod: %v; want -rw-------", side.name, fi.Mode())
		}
	}
	held, err := c.OpenFile(name, os.O_RDWR, 0)
	must(t, err)
	defer held.Close()
	c.Restore(s)

	osName := filepath.Join(t.TempDir(), "f")
	must(t, os.WriteFile(osName, []byte("restored"), 0o644))
	osHeld, err := os.OpenFile(osName, os.O_RDWR, 0)
	must(t, err)
	defer osHeld.Close()

	for _, side := range []struct {
		name string
		fsys afero.Fs
		path string
	}{{"cowfs", c, name}, {"os", afero.NewOsFs(), osName}} {
		f, err := side.fsys.OpenFile(side.path, os.O_RDWR|os.O_TRUNC, 0)
		must(t, err)
		if _, err := f.Write([]byte("new")); err != nil {
			t.Fatal(err)
		}
		must(t, f.Close())
		fi, err := side.fsys.Stat(side.path)
		must(t, err)
		got, err := afero.ReadFile(side.fsys, side.path)
		must(t, err)
		if fi.Mode() != 0o644 || string(got) != "new" {
			t.Errorf("%s: after the O_TRUNC open and a write: mode %v, content %q; want -rw-r--r--, \"new\"", side.name, fi.Mode(), got)
		}
	}
}
