package overlayfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// twoRoots materializes two fixture trees side by side: the originals that
// cowfs overlays (and, for the commit tests, writes) and os copies.
func twoRoots(t *testing.T) (a, b, osA, osB string) {
	t.Helper()
	a, b = osCopy(t, origTree(t, "project")), osCopy(t, origTree(t, "small"))
	return a, b, osCopy(t, a), osCopy(t, b)
}

// multiOps runs the same changes in both roots through fsys, rooted at a and b.
func multiOps(t *testing.T, fsys target, a, b string) {
	t.Helper()
	steps := []func() error{
		func() error { return afero.WriteFile(fsys, filepath.Join(a, "new.txt"), []byte("in a\n"), 0o644) },
		func() error { return afero.WriteFile(fsys, filepath.Join(b, "new.txt"), []byte("in b\n"), 0o755) },
		func() error { return fsys.MkdirAll(filepath.Join(b, "nd/y"), 0o755) },
		func() error { return fsys.RemoveAll(filepath.Join(a, "internal")) },
		func() error { return fsys.Rename(filepath.Join(b, "new.txt"), filepath.Join(b, "nd/y/moved.txt")) },
		func() error { return fsys.SymlinkIfPossible("moved.txt", filepath.Join(b, "nd/y/link")) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("%s: step %d: %v", fsys.Name(), i, err)
		}
	}
}

func TestRootsDifferential(t *testing.T) {
	a, b, osA, osB := twoRoots(t)
	sumA, sumB := hashTree(t, a), hashTree(t, b)
	c := newCow(t, a, overlayfs.WithRoot(b))
	if got := c.Roots(); len(got) != 2 || got[0] != c.Root() {
		t.Fatalf("Roots() = %v", got)
	}
	multiOps(t, c, a, b)
	multiOps(t, osTarget{}, osA, osB)
	for _, pair := range [][2]string{{osA, a}, {osB, b}} {
		want, err := walkTarget(osTarget{}, pair[0])
		if err != nil {
			t.Fatal(err)
		}
		got, err := walkTarget(c, pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if errs := diffTrees(want, got); len(errs) > 0 {
			t.Errorf("view of %s differs from os:\n%v", pair[1], errors.Join(errs...))
		}
	}
	checkUnchanged(t, a, sumA)
	checkUnchanged(t, b, sumB)

	// Changes name their root, each root's in path order.
	roots := map[string]int{}
	last := ""
	for _, ch := range c.Changes() {
		roots[ch.Root]++
		if ch.Root == last || last == "" {
			last = ch.Root
		}
	}
	canonB, _ := filepath.EvalSymlinks(b)
	if roots[c.Root()] == 0 || roots[canonB] == 0 || len(roots) != 2 {
		t.Errorf("Changes roots = %v, want both %s and %s", roots, c.Root(), canonB)
	}

	// Renames across roots fail as across devices.
	err := c.Rename(filepath.Join(a, "README.md"), filepath.Join(b, "README.md"))
	var le *os.LinkError
	if !errors.As(err, &le) || !errors.Is(err, syscall.EXDEV) {
		t.Errorf("cross-root Rename = %v, want *os.LinkError EXDEV", err)
	}
}

func TestRootsSnapshotForkCommit(t *testing.T) {
	a, b, osA, osB := twoRoots(t)
	c := newCow(t, a, overlayfs.WithRoot(b))
	s := c.Snapshot()
	fork := c.Fork()
	multiOps(t, c, a, b)
	if n := len(fork.Changes()); n != 0 {
		t.Errorf("fork sees %d changes made after it was taken", n)
	}
	c.Restore(s)
	if n := len(c.Changes()); n != 0 {
		t.Errorf("after Restore: %d changes, want 0", n)
	}
	multiOps(t, c, a, b)

	// A conflict in one root stops the commit of all roots.
	sumA := hashTree(t, a)
	if err := c.Chmod(filepath.Join(b, "a"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, "a"), []byte("changed behind its back\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sumB := hashTree(t, b)
	err := c.Commit()
	var ce *overlayfs.CommitError
	if !errors.Is(err, overlayfs.ErrConflict) || !errors.As(err, &ce) || len(ce.Conflicts) != 1 {
		t.Fatalf("Commit = %v, want one conflict", err)
	}
	checkUnchanged(t, a, sumA)
	checkUnchanged(t, b, sumB)

	// Without the conflicting change, the commit writes both roots as os did.
	if err := c.Chmod(filepath.Join(b, "a"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := newCow(t, a, overlayfs.WithRoot(b))
	multiOps(t, fresh, a, b)
	multiOps(t, osTarget{}, osA, osB)
	if err := os.WriteFile(filepath.Join(osB, "a"), []byte("changed behind its back\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Commit(); err != nil {
		t.Fatalf("Commit = %v", err)
	}
	if n := len(fresh.Changes()); n != 0 {
		t.Errorf("after Commit: %d changes, want 0", n)
	}
	for _, pair := range [][2]string{{osA, a}, {osB, b}} {
		want, err := walkTarget(osTarget{}, pair[0])
		if err != nil {
			t.Fatal(err)
		}
		got, err := walkTarget(osTarget{}, pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if errs := diffTrees(want, got); len(errs) > 0 {
			t.Errorf("committed %s differs from os:\n%v", pair[1], errors.Join(errs...))
		}
	}
}

// TestRootsNameForms reaches an extra root by the name forms that pick has
// to sort out before the layer's resolver runs: relative to the working
// directory, through "..", through a symlinked alias outside every root,
// and through a symlink in the primary root. The oracle is the same steps
// on os in a plain copy with the same layout.
func TestRootsNameForms(t *testing.T) {
	cowP, osP := t.TempDir(), t.TempDir()
	for _, p := range []string{cowP, osP} {
		for _, d := range []string{"a", "b"} {
			if err := os.Mkdir(filepath.Join(p, d), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(p, d, "f"), []byte(d+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink("b", filepath.Join(p, "alias")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../b/f", filepath.Join(p, "a", "tob")); err != nil {
			t.Fatal(err)
		}
	}
	sum := hashTree(t, cowP)
	c := newCow(t, filepath.Join(cowP, "a"), overlayfs.WithRoot(filepath.Join(cowP, "b")))
	steps := []struct {
		name string
		do   func(fsys target) error
	}{
		{"write b/new", func(fsys target) error { return afero.WriteFile(fsys, "b/new", []byte("new\n"), 0o644) }},
		{"write a/../b/up", func(fsys target) error { return afero.WriteFile(fsys, "a/../b/up", []byte("up\n"), 0o644) }},
		{"mkdir alias/dir", func(fsys target) error { return fsys.Mkdir("alias/dir", 0o755) }},
		{"rename b/new alias/dir/moved", func(fsys target) error { return fsys.Rename("b/new", "alias/dir/moved") }},
		{"remove alias/f", func(fsys target) error { return fsys.Remove("alias/f") }},
		{"mkdir a/d", func(fsys target) error { return fsys.Mkdir("a/d", 0o755) }},
		{"chmod ./a/d", func(fsys target) error { return fsys.Chmod("./a/d", 0o700) }},
		{"stat alias/dir/moved", func(fsys target) error { _, err := fsys.Stat("alias/dir/moved"); return err }},
		{"stat b/f", func(fsys target) error { _, err := fsys.Stat("b/f"); return err }},
	}
	for _, run := range []struct {
		dir  string
		fsys target
	}{{cowP, c}, {osP, osTarget{}}} {
		t.Chdir(run.dir)
		for _, s := range steps {
			err := s.do(run.fsys)
			if s.name == "stat b/f" {
				if !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: %s = %v, want not-exist (removed through alias)", run.fsys.Name(), s.name, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %s: %v", run.fsys.Name(), s.name, err)
			}
		}
	}
	for _, d := range []string{"a", "b"} {
		want, err := walkTarget(osTarget{}, filepath.Join(osP, d))
		if err != nil {
			t.Fatal(err)
		}
		got, err := walkTarget(c, filepath.Join(cowP, d))
		if err != nil {
			t.Fatal(err)
		}
		if errs := diffTrees(want, got); len(errs) > 0 {
			t.Errorf("view of %s differs from os:\n%v", d, errors.Join(errs...))
		}
	}

	// A symlink in the primary root into the extra one reads that root's
	// lower (the layer of b removed f, the real b has it) and refuses writes.
	t.Chdir(cowP)
	if data, err := afero.ReadFile(c, "a/tob"); err != nil || string(data) != "b\n" {
		t.Errorf("ReadFile a/tob = %q, %v; want the lower's %q", data, err, "b\n")
	}
	if err := afero.WriteFile(c, "a/tob", []byte("x"), 0o644); !errors.Is(err, overlayfs.ErrOutsideRoot) {
		t.Errorf("write through a/tob = %v, want ErrOutsideRoot", err)
	}
	// Across roots, whatever the name form, rename is EXDEV.
	if err := c.Rename("a/f", "alias/g"); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("Rename a/f alias/g = %v, want EXDEV", err)
	}
	checkUnchanged(t, cowP, sum)
}

// TestRootsResetLayer: ResetLayer discards the primary root's layer only.
// Oracle: os on plain copies, the primary as it was on disk, the extra
// root with the same steps applied.
func TestRootsResetLayer(t *testing.T) {
	a, b, osA, osB := twoRoots(t)
	c := newCow(t, a, overlayfs.WithRoot(b))
	multiOps(t, c, a, b)
	multiOps(t, osTarget{}, t.TempDir(), osB) // osA stays as a is on disk
	c.ResetLayer()
	for _, pair := range [][2]string{{osA, a}, {osB, b}} {
		want, err := walkTarget(osTarget{}, pair[0])
		if err != nil {
			t.Fatal(err)
		}
		got, err := walkTarget(c, pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if errs := diffTrees(want, got); len(errs) > 0 {
			t.Errorf("view of %s after ResetLayer differs from os:\n%v", pair[1], errors.Join(errs...))
		}
	}
	for _, ch := range c.Changes() {
		if ch.Root != b {
			t.Errorf("change %v of the primary root after ResetLayer", ch)
		}
	}
}
