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
