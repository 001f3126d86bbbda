package overlayfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
)

// TestDirStatesFollowChanges: Stat and Lstat beside layer files go by what
// the resolver's fast path learnt of the directory (no layer entry there,
// or the names of those there); each change then made in the directory
// (a new file, a new directory, a removal, a rename in and out, a whiteout
// over a lower name) must show in the next Stat of every name, compared
// with os on a copy that went through the same changes. With 0, 1, a few
// and more than a set holds (1,024) layer entries in the directory.
func TestDirStatesFollowChanges(t *testing.T) {
	for _, n := range []int{0, 1, 5, 1030} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			base := t.TempDir()
			orig, copy := filepath.Join(base, "orig"), filepath.Join(base, "copy")
			must(t, os.MkdirAll(filepath.Join(orig, "d", "sub"), 0o755))
			for _, f := range []string{"d/low1", "d/low2", "d/sub/s", "top"} {
				must(t, os.WriteFile(filepath.Join(orig, f), []byte(f), 0o644))
			}
			must(t, copyTree(orig, copy))
			c := newCow(t, orig)
			both := func(do func(fsys afero.Fs, root string) error) {
				t.Helper()
				got, want := do(c, orig), do(afero.NewOsFs(), copy)
				if errClass(got) != errClass(want) {
					t.Fatalf("change: %v, os %v", got, want)
				}
			}
			for i := range n {
				both(func(fsys afero.Fs, root string) error {
					return afero.WriteFile(fsys, filepath.Join(root, "d", fmt.Sprintf("w%04d", i)), []byte("w"), 0o644)
				})
			}
			names := []string{"d/low1", "d/low2", "d/new", "d/newdir", "d/newdir/f", "d/sub", "d/sub/s", "d/moved", "top", "d/w0000", "d/w1029"}
			check := func(step string) {
				t.Helper()
				for _, name := range names {
					for _, lst := range []bool{false, true} {
						stat, osStat := c.Stat, os.Stat
						if lst {
							stat, osStat = c.Lstat, os.Lstat
						}
						fi, err := stat(filepath.Join(orig, name))
						wfi, werr := osStat(filepath.Join(copy, name))
						if errClass(err) != errClass(werr) || err == nil && (fi.Mode() != wfi.Mode() || fi.Size() != wfi.Size() && !fi.IsDir()) {
							t.Fatalf("after %s: stat %s = %v, %v; os %v, %v", step, name, fi, err, wfi, werr)
						}
					}
				}
			}
			check("the layer files")
			steps := []struct {
				name string
				do   func(fsys afero.Fs, root string) error
			}{
				{"a new file", func(fsys afero.Fs, root string) error {
					return afero.WriteFile(fsys, filepath.Join(root, "d", "new"), []byte("new!"), 0o600)
				}},
				{"a new directory", func(fsys afero.Fs, root string) error {
					if err := fsys.Mkdir(filepath.Join(root, "d", "newdir"), 0o750); err != nil {
						return err
					}
					return afero.WriteFile(fsys, filepath.Join(root, "d", "newdir", "f"), []byte("f"), 0o644)
				}},
				{"a removed lower file", func(fsys afero.Fs, root string) error { return fsys.Remove(filepath.Join(root, "d", "low1")) }},
				{"a removed layer file", func(fsys afero.Fs, root string) error { return fsys.Remove(filepath.Join(root, "d", "new")) }},
				{"a rename in", func(fsys afero.Fs, root string) error {
					return fsys.Rename(filepath.Join(root, "top"), filepath.Join(root, "d", "moved"))
				}},
				{"a rename out", func(fsys afero.Fs, root string) error {
					return fsys.Rename(filepath.Join(root, "d", "low2"), filepath.Join(root, "top"))
				}},
				{"a directory replaced", func(fsys afero.Fs, root string) error {
					if err := fsys.RemoveAll(filepath.Join(root, "d", "sub")); err != nil {
						return err
					}
					return afero.WriteFile(fsys, filepath.Join(root, "d", "sub"), []byte("file now"), 0o644)
				}},
				{"a file made again", func(fsys afero.Fs, root string) error {
					return afero.WriteFile(fsys, filepath.Join(root, "d", "low1"), []byte("again"), 0o644)
				}},
			}
			for _, s := range steps {
				both(s.do)
				check(s.name)
			}
		})
	}
}
