package overlayfs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// TestStatAsksTheLowerAfterListing: Stat and Lstat of a lower name lstat
// it, as os does, even where the overlay listed the directory's names
// after lookups missed there (a listing that saves creations their
// lstats). A file made on disk after the listing is found with os's
// info, not ENOENT, and so is a symlink by Lstat. (Stat through the
// symlink walks, and the walk's lookups go by the listing: the lower must
// not change under an overlay, see the package doc; this pins only that a
// Stat's own last lookup costs os's lstat and finds what os finds.)
func TestStatAsksTheLowerAfterListing(t *testing.T) {
	root := t.TempDir()
	must(t, os.Mkdir(filepath.Join(root, "X"), 0o755))
	c, err := overlayfs.New(root)
	must(t, err)
	for _, m := range []string{"m1", "m2", "m3"} {
		// Misses in a small directory: the second lists it.
		if _, err := c.Stat(filepath.Join(root, "X", m)); !os.IsNotExist(err) {
			t.Fatalf("Stat of a missing name: %v", err)
		}
	}
	must(t, os.WriteFile(filepath.Join(root, "X", "late"), []byte("made after the listing"), 0o640))
	must(t, os.Symlink("late", filepath.Join(root, "X", "link")))
	type statFn = func(string) (fs.FileInfo, error)
	for _, s := range []struct {
		op, name string
		cow, osf statFn
	}{{"Stat", "late", c.Stat, os.Stat}, {"Lstat", "late", c.Lstat, os.Lstat}, {"Lstat", "link", c.Lstat, os.Lstat}} {
		p := filepath.Join(root, "X", s.name)
		want, werr := s.osf(p)
		got, err := s.cow(p)
		if werr != nil || err != nil {
			t.Fatalf("%s(X/%s) = %v; os: %v", s.op, s.name, err, werr)
		}
		if got.Name() != want.Name() || got.Size() != want.Size() || got.Mode() != want.Mode() || !got.ModTime().Equal(want.ModTime()) {
			t.Fatalf("%s(X/%s) = %s %d %v %v; os %s %d %v %v", s.op, s.name, got.Name(), got.Size(), got.Mode(), got.ModTime(),
				want.Name(), want.Size(), want.Mode(), want.ModTime())
		}
	}
}
