//go:build linux

package overlayfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cowfs/cowfs/overlayfs"
)

// guardLayout makes top/{outside,sibling,root} with files in each and a
// symlink root/out -> ../outside, and returns top.
func guardLayout(t *testing.T, base string) string {
	t.Helper()
	top := filepath.Join(base, "top")
	for _, d := range []string{"outside/sub", "sibling/sd", "root/d"} {
		if err := os.MkdirAll(filepath.Join(top, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"outside/a.txt", "outside/sub/b.txt", "sibling/s.txt", "sibling/sd/x.txt", "root/r.txt", "root/d/e.txt"} {
		if err := os.WriteFile(filepath.Join(top, f), []byte("content of "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../outside", filepath.Join(top, "root/out")); err != nil {
		t.Fatal(err)
	}
	return top
}

// TestOutsideWriteCannotReachRoot: with AllowOutsideWrites, a RemoveAll,
// Remove or Rename of a directory outside the root that holds the root (or
// of the root itself under another name) is refused with EBUSY before
// anything is touched; the whole real tree stays byte for byte as it was.
func TestOutsideWriteCannotReachRoot(t *testing.T) {
	base := t.TempDir()
	top := guardLayout(t, base)
	root := filepath.Join(top, "root")
	c := newCow(t, root, overlayfs.AllowOutsideWrites())
	before := hashTree(t, base)

	remove := func(name string) func() error { return func() error { return c.Remove(name) } }
	removeAll := func(name string) func() error { return func() error { return c.RemoveAll(name) } }
	rename := func(o, n string) func() error { return func() error { return c.Rename(o, n) } }
	cases := []struct {
		desc string
		op   func() error
		want error // EBUSY, or what os says without reaching the root
	}{
		{"RemoveAll via inside symlink's ..", removeAll(root + "/out/.."), syscall.EBUSY},
		{"RemoveAll via inside symlink's ../", removeAll(root + "/out/../"), syscall.EBUSY},
		{"RemoveAll parent", removeAll(top), syscall.EBUSY},
		{"RemoveAll parent/", removeAll(top + "/"), syscall.EBUSY},
		{"RemoveAll grandparent", removeAll(base), syscall.EBUSY},
		{"RemoveAll outside/..", removeAll(top + "/outside/.."), syscall.EBUSY},
		{"RemoveAll root/..", removeAll(root + "/.."), syscall.EBUSY},
		{"RemoveAll outside/../..", removeAll(top + "/outside/../.."), syscall.EBUSY},
		{"Rename parent away", rename(top, base+"/moved"), syscall.EBUSY},
		{"Rename grandparent away", rename(base, base+"-moved"), syscall.EBUSY},
		{"Rename outside/.. away", rename(top+"/outside/..", base+"/moved"), syscall.EBUSY},
		{"Rename via inside symlink's ..", rename(root+"/out/..", base+"/moved"), syscall.EBUSY},
		// os.Rename never replaces a directory: EEXIST, as os says.
		{"Rename dir onto parent", rename(top+"/sibling", top), fs.ErrExist},
		// Remove cannot delete a directory that holds anything: os's own
		// error, and nothing touched.
		{"Remove parent", remove(top), syscall.ENOTEMPTY},
		{"Remove outside/..", remove(top + "/outside/.."), syscall.ENOTEMPTY},
	}
	for _, tc := range cases {
		err := tc.op()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.desc, err, tc.want)
		}
		var pe *os.PathError
		var le *os.LinkError
		if err != nil && !errors.As(err, &pe) && !errors.As(err, &le) {
			t.Errorf("%s: err %T is neither *fs.PathError nor *os.LinkError", tc.desc, err)
		}
		checkUnchanged(t, base, before)
	}
	if len(c.Changes()) != 0 {
		t.Errorf("Changes = %v, want none", c.Changes())
	}
}

// TestOutsideWriteSiblingAsOS: the same kinds of outside writes on
// directories beside the root (not holding it) work as os does them.
func TestOutsideWriteSiblingAsOS(t *testing.T) {
	ops := func(r func(string) error, ra func(string) error, mv func(string, string) error, top string) []error {
		return []error{
			ra(top + "/outside/sub"),
			r(top + "/sibling/s.txt"),
			mv(top+"/sibling/sd", top+"/moved"),
			mv(top+"/sibling", top+"/outside/sib"),
			ra(top + "/outside/sib/.."), // outside's entries, then os fails on ".."
			r(top + "/root/r.txt"),      // inside: stays in the layer
		}
	}
	osBase, cowBase := t.TempDir(), t.TempDir()
	osTop, cowTop := guardLayout(t, osBase), guardLayout(t, cowBase)
	c := newCow(t, filepath.Join(cowTop, "root"), overlayfs.AllowOutsideWrites())
	want := ops(os.Remove, os.RemoveAll, os.Rename, osTop)
	got := ops(c.Remove, c.RemoveAll, c.Rename, cowTop)
	for i := range want {
		if errClass(want[i]) != errClass(got[i]) {
			t.Errorf("op %d: err = %v, os says %v", i, got[i], want[i])
		}
	}
	// The real trees agree except for the inside remove, which os did and
	// cowfs kept in its layer.
	if err := os.Remove(filepath.Join(cowTop, "root/r.txt")); err != nil {
		t.Fatal(err)
	}
	wt, err := walkTarget(osTarget{}, osTop)
	if err != nil {
		t.Fatal(err)
	}
	gt, err := walkTarget(osTarget{}, cowTop)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range diffTrees(wt, gt) {
		t.Error(e)
	}
}

// TestOutsideWriteCannotReachRootAlias: a directory holding the root,
// named through a bind mount (another path to the same directory), is
// refused as well; os.Rename's own check refuses one as the target. The
// root's own alias is the root (alias.go): Remove and Rename of it fail as
// they do under the canonical name, with what os says for a directory
// that holds entries, and EXDEV for moving the root out of itself.
func TestOutsideWriteCannotReachRootAlias(t *testing.T) {
	base := t.TempDir()
	top := guardLayout(t, base)
	root := filepath.Join(top, "root")
	aliases := filepath.Join(t.TempDir(), "aliases")
	rootAlias, topAlias, empty := aliases+"/root", aliases+"/top", aliases+"/empty"
	for _, d := range []string{rootAlias, topAlias, empty} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range [][2]string{{root, rootAlias}, {top, topAlias}} {
		if err := unix.Mount(m[0], m[1], "", unix.MS_BIND, ""); err != nil {
			t.Skipf("bind mount needs mount privileges: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(m[1], unix.MNT_DETACH) })
	}
	c := newCow(t, root, overlayfs.AllowOutsideWrites())
	before := hashTree(t, base)
	for _, tc := range []struct {
		desc string
		err  error
		want error
	}{
		{"RemoveAll root alias", c.RemoveAll(rootAlias), syscall.EBUSY},
		{"RemoveAll parent alias", c.RemoveAll(topAlias), syscall.EBUSY},
		{"Remove root alias", c.Remove(rootAlias), syscall.ENOTEMPTY},
		{"Rename root alias away", c.Rename(rootAlias, aliases+"/gone"), syscall.EXDEV},
		{"Rename onto root alias", c.Rename(empty, rootAlias), fs.ErrExist},
		{"Rename parent alias away", c.Rename(topAlias, aliases+"/gone"), syscall.EBUSY},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.desc, tc.err, tc.want)
		}
		checkUnchanged(t, base, before)
	}
}

// TestOutsideWriteCannotReachExtraRoot: an extra root (WithRoot) is guarded
// as the primary one is; a symlink to a directory holding a root is only a
// link, removed as os removes it.
func TestOutsideWriteCannotReachExtraRoot(t *testing.T) {
	base := t.TempDir()
	top := guardLayout(t, base)
	extra := filepath.Join(top, "outside/sub")
	link := filepath.Join(base, "link-to-outside")
	if err := os.Symlink(filepath.Join(top, "outside"), link); err != nil {
		t.Fatal(err)
	}
	c := newCow(t, filepath.Join(top, "root"), overlayfs.WithRoot(extra), overlayfs.AllowOutsideWrites())
	before := hashTree(t, top)
	for _, tc := range []struct {
		desc string
		err  error
	}{
		{"RemoveAll holding the extra root", c.RemoveAll(top + "/outside")},
		{"RemoveAll through a link", c.RemoveAll(link + "/sub/..")},
		{"Rename holding the extra root", c.Rename(top+"/outside", top+"/gone")},
	} {
		if !errors.Is(tc.err, syscall.EBUSY) {
			t.Errorf("%s: err = %v, want EBUSY", tc.desc, tc.err)
		}
		checkUnchanged(t, top, before)
	}
	if err := c.RemoveAll(link + "/"); err != nil {
		t.Errorf("RemoveAll of the link: %v", err)
	}
	if _, err := os.Lstat(link); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link is still there: %v", err)
	}
	checkUnchanged(t, top, before)
}
