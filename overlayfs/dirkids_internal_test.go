package overlayfs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/spf13/afero"
)

// TestDirKidsMatchTree: the entries a directory's slot holds by name (see
// dirStates) are the B-tree's, after every change the public operations
// make (creates, overwrites, removals, renames, chmods that give a
// directory or symlink new attributes, whiteouts, directories replaced by
// files), with Stat and Lstat in between so that the slots are learnt.
func TestDirKidsMatchTree(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a", "a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a/l1", "a/b/l2", "c/l3", "top"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	l := f.primary()
	dirs := []string{"", "a", "a/b", "c", "a/n"}
	names := []string{"x", "y", "l1", "l2", "l3", "top", "n"}
	pick := func(r *rand.Rand) string {
		return filepath.Join(root, dirs[r.IntN(len(dirs))], names[r.IntN(len(names))])
	}
	check := func(step string) {
		t.Helper()
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, dir := range dirs {
			d := l.paths.st.find(dir)
			if d == nil {
				continue
			}
			st := dirState(d.st.Load())
			names, es := l.childrenLocked(dir)
			want := map[string]entry{}
			for i, n := range names {
				want[n] = es[i]
			}
			switch kids := d.kids.Load(); {
			case st&dirKnown == 0:
			case st&dirBare != 0:
				if len(want) != 0 {
					t.Fatalf("after %s: %q is bare, the tree has %v", step, dir, names)
				}
			case kids != nil && !reflect.DeepEqual(*kids, want):
				t.Fatalf("after %s: %q holds %v, the tree %v", step, dir, *kids, want)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		a, b := pick(r), pick(r)
		var step string
		switch r.IntN(8) {
		case 0, 1:
			step = "write " + a
			afero.WriteFile(f, a, []byte(fmt.Sprint(i)), 0o644)
		case 2:
			step = "remove " + a
			f.Remove(a)
		case 3:
			step = "rename " + a + " " + b
			f.Rename(a, b)
		case 4:
			step = "mkdir " + a
			f.Mkdir(a, 0o755)
		case 5:
			step = "chmod " + a
			f.Chmod(a, os.FileMode(0o700+r.IntN(0o77)))
		case 6:
			step = "symlink " + a
			f.SymlinkIfPossible("x", a)
		case 7:
			step = "removeall " + a
			f.RemoveAll(a)
		}
		for range 3 {
			f.Stat(pick(r))
			f.Lstat(pick(r))
		}
		check(step)
		if i%500 == 499 {
			f.Reset()
		}
	}
}
