//go:build linux

package overlayfs_test

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// The random differential with a lower changed between operations (issue
// 23): the docs say the lower must not change while an Fs uses it; when
// it does, every answer must be os's on the tree before the change or on
// the tree after it, and the view must not contradict itself: once a
// listing of a directory showed the tree after the change, a lookup of a
// name in that directory answers as after too (the bug: Open("X") listed
// sub, Open("X/sub") said ENOENT, because a miss in X had listed X's
// names before sub was made). Each sequence runs random operations on the
// overlay of a root and on two os copies, before (the tree as it was) and
// after (changed as the root is), changes the root at a random step, and
// compares each answer with both copies. Writes (creating new files) go to
// the layer and to both copies.
//
// COWFS_DIFF_SEQS sets the number of sequences (default 100: a second or
// two).

// lowerChanges change a tree under its root dir.
var lowerChanges = []func(dir string) error{
	func(d string) error { return os.Mkdir(filepath.Join(d, "X", "sub"), 0o755) },
	func(d string) error { return os.WriteFile(filepath.Join(d, "X", "newf"), []byte("new"), 0o644) },
	func(d string) error { return os.Remove(filepath.Join(d, "X", "f")) },
	func(d string) error {
		if err := os.RemoveAll(filepath.Join(d, "X", "a")); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(d, "X", "a"), []byte("file now"), 0o644)
	},
	func(d string) error { return os.Mkdir(filepath.Join(d, "Y", "sub"), 0o755) },
	func(d string) error { return os.Symlink("../Y", filepath.Join(d, "X", "sub")) },
}

// lowerNames are the names the operations use, root-relative.
var lowerNames = []string{"X", "Y", "X/sub", "X/newf", "X/f", "X/a", "X/a/q", "Y/sub", "Y/g", "X/none", "X/sub/g", "Y/none"}

// lowerAnswer is an operation's outcome, as compared.
func lowerAnswer(fi fs.FileInfo, err error) string {
	if err != nil {
		return "err " + errClass(err)
	}
	if fi.IsDir() {
		return fmt.Sprintf("%v", fi.Mode().Type())
	}
	return fmt.Sprintf("%v %d", fi.Mode().Type(), fi.Size())
}

func lowerList(fsys afero.Fs, name string) string {
	f, err := fsys.Open(name)
	if err != nil {
		return "err " + errClass(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return "err " + errClass(err)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

func TestRandomChangedLower(t *testing.T) {
	seqs := envInt("COWFS_DIFF_SEQS", 100)
	for seed := range seqs {
		randChangedLower(t, uint64(seed))
		if t.Failed() {
			return
		}
	}
}

func randChangedLower(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 23))
	dir := t.TempDir()
	root, before, after := filepath.Join(dir, "root"), filepath.Join(dir, "before"), filepath.Join(dir, "after")
	for _, p := range []string{"X/a", "Y"} {
		must(t, os.MkdirAll(filepath.Join(root, p), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(root, "X", "f"), []byte("f"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "Y", "g"), []byte("gg"), 0o644))
	must(t, copyTree(root, before))
	must(t, copyTree(root, after))
	c, err := overlayfs.New(root)
	must(t, err)
	ops := 20 + r.IntN(20)
	at := r.IntN(ops)
	change := lowerChanges[r.IntN(len(lowerChanges))]
	changed := false
	// sawAfter holds the directories whose listing showed the tree after
	// the change (and not before): lookups in them must answer as after.
	sawAfter := map[string]bool{}
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s\nsteps:\n%s", seed, fmt.Sprintf(format, args...), strings.Join(trace, "\n"))
	}
	for i := range ops {
		if i == at {
			must(t, change(root))
			must(t, change(after))
			changed = true
			trace = append(trace, "(the lower changes)")
		}
		name := lowerNames[r.IntN(len(lowerNames))]
		cn, bn, an := filepath.Join(root, name), filepath.Join(before, name), filepath.Join(after, name)
		var got, wantB, wantA string
		op := r.IntN(6)
		switch op {
		case 0:
			got, wantB, wantA = lowerAnswer(c.Stat(cn)), lowerAnswer(os.Stat(bn)), lowerAnswer(os.Stat(an))
		case 1:
			got, wantB, wantA = lowerAnswer(c.Lstat(cn)), lowerAnswer(os.Lstat(bn)), lowerAnswer(os.Lstat(an))
		case 2:
			os := afero.NewOsFs()
			got, wantB, wantA = lowerList(c, cn), lowerList(os, bn), lowerList(os, an)
		case 3:
			// A failed Remove of a missing name: a miss in its directory.
			miss := filepath.Join(filepath.Dir(name), fmt.Sprintf("missing%d", r.IntN(3)))
			name = miss
			got = "err " + errClass(c.Remove(filepath.Join(root, miss)))
			wantB = "err " + errClass(os.Remove(filepath.Join(before, miss)))
			wantA = "err " + errClass(os.Remove(filepath.Join(after, miss)))
		case 4:
			// A new file in the layer, in a directory both trees have.
			n := filepath.Join(filepath.Dir(name), fmt.Sprintf("w%d", i))
			name = n
			got = "err " + errClass(afero.WriteFile(c, filepath.Join(root, n), []byte("w"), 0o644))
			wantB = "err " + errClass(os.WriteFile(filepath.Join(before, n), []byte("w"), 0o644))
			wantA = "err " + errClass(os.WriteFile(filepath.Join(after, n), []byte("w"), 0o644))
		case 5:
			b, err := afero.ReadFile(c, cn)
			got = fmt.Sprintf("%q %s", b, errClass(err))
			b, err = os.ReadFile(bn)
			wantB = fmt.Sprintf("%q %s", b, errClass(err))
			b, err = os.ReadFile(an)
			wantA = fmt.Sprintf("%q %s", b, errClass(err))
		}
		trace = append(trace, fmt.Sprintf("  op %d %s: %s (before %s, after %s)", op, name, got, wantB, wantA))
		if op == 4 && wantA != wantB {
			// The trees differ on a write: the copies part; stop here.
			return
		}
		if !changed && got != wantB || got != wantB && got != wantA {
			fail("op %d on %s = %s; os before the change %s, after %s", op, name, got, wantB, wantA)
		}
		if sawAfter[filepath.Dir(name)] && got != wantA && op != 2 {
			fail("op %d on %s = %s, os after the change %s: a listing of its directory showed the tree after it", op, name, got, wantA)
		}
		if op == 2 && changed && got == wantA && got != wantB && !strings.HasPrefix(got, "err ") {
			sawAfter[name] = true
		}
	}
}

// TestChangedLowerListedThenOpened is issue 23's case: after New, failed
// Removes of missing names in X (which list X's names for later misses)
// and a directory X/sub made on disk, Open("X") lists sub, and
// Open("X/sub") opens it, as os does after the change, rather than say
// ENOENT, as before it.
func TestChangedLowerListedThenOpened(t *testing.T) {
	root := t.TempDir()
	must(t, os.Mkdir(filepath.Join(root, "X"), 0o755))
	c, err := overlayfs.New(root)
	must(t, err)
	for _, m := range []string{"m1", "m2", "m3"} {
		if err := c.Remove(filepath.Join(root, "X", m)); !os.IsNotExist(err) {
			t.Fatalf("Remove of a missing name: %v", err)
		}
	}
	must(t, os.Mkdir(filepath.Join(root, "X", "sub"), 0o755))
	if got, want := lowerList(c, filepath.Join(root, "X")), lowerList(afero.NewOsFs(), filepath.Join(root, "X")); got != want {
		t.Fatalf("listing of X = %q, os %q", got, want)
	}
	h, err := c.Open(filepath.Join(root, "X", "sub"))
	if err != nil {
		t.Fatalf("Open(X/sub) after a listing showed sub: %v (os: the directory)", err)
	}
	h.Close()
}
