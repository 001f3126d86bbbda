//go:build linux

package overlayfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"

	"github.com/cowfs/cowfs/overlayfs"
)

// aliasLayout makes base/top/{root,extra,outside} with files in each, and
// returns top.
func aliasLayout(t *testing.T, base string) string {
	t.Helper()
	top := filepath.Join(base, "top")
	for _, d := range []string{"root/d", "root/sub/deep", "extra/x", "outside"} {
		if err := os.MkdirAll(filepath.Join(top, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"root/r.txt", "root/d/e.txt", "root/sub/s.txt", "root/sub/deep/z.txt", "extra/x/y.txt", "extra/e.txt", "outside/o.txt"} {
		if err := os.WriteFile(filepath.Join(top, f), []byte("content of "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return top
}

// bindAliases bind-mounts each source on a new directory under dir (named
// by the map's key) and returns the alias paths; it skips t when mounting
// is not allowed here.
func bindAliases(t *testing.T, dir string, sources map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, src := range sources {
		at := filepath.Join(dir, name)
		if err := os.MkdirAll(at, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(src, at, "", unix.MS_BIND, ""); err != nil {
			t.Skipf("bind mount needs mount privileges (CAP_SYS_ADMIN), which this process lacks: %v", err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(at, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", at, err)
			}
		})
		out[name] = at
	}
	return out
}

// aliasOp is one step, named twice: through an alias (for cowfs) and by
// the canonical path in a plain copy of the layout (for os).
type aliasOp struct {
	desc string
	do   func(fsys target, name func(via, rel string) string) error
}

// TestAliasWritesGoToLayer: with AllowOutsideWrites, writes through bind
// mounts of the root, of its parent, of a subdirectory of it and of an
// extra root go to the layer, as through the canonical names: the real
// tree is not changed, every step fails or succeeds as os does on a plain
// copy named canonically, and the overlay's view (through the canonical
// names) agrees with that copy; so does the real tree after Commit.
func TestAliasWritesGoToLayer(t *testing.T) {
	base, osBase := t.TempDir(), t.TempDir()
	top, osTop := aliasLayout(t, base), aliasLayout(t, osBase)
	// Spaces and backslashes are escaped in the mount table the resolver
	// reads for the subdirectory's alias.
	al := bindAliases(t, filepath.Join(t.TempDir(), `bind aliases\ here`), map[string]string{
		"root":  top + "/root",
		"top":   top,
		"sub":   top + "/root/sub",
		"extra": top + "/extra",
	})
	// via names the directory a step goes through: the alias for cowfs,
	// the same directory by its canonical path in the copy for os.
	cowName := func(via, rel string) string { return filepath.Join(al[via], rel) }
	osDirs := map[string]string{"root": osTop + "/root", "top": osTop, "sub": osTop + "/root/sub", "extra": osTop + "/extra"}
	osName := func(via, rel string) string { return filepath.Join(osDirs[via], rel) }
	stamp := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	ops := []aliasOp{
		{"create through root alias", func(f target, n func(string, string) string) error {
			return afero.WriteFile(f, n("root", "new.txt"), []byte("new\n"), 0o644)
		}},
		{"overwrite a lower file through parent alias", func(f target, n func(string, string) string) error {
			return afero.WriteFile(f, n("top", "root/r.txt"), []byte("rewritten\n"), 0o644)
		}},
		{"Create through sub alias", func(f target, n func(string, string) string) error {
			fh, err := f.Create(n("sub", "created"))
			if err != nil {
				return err
			}
			_, err = fh.Write([]byte("created\n"))
			return errors.Join(err, fh.Close())
		}},
		{"O_EXCL create of an existing file through sub alias", func(f target, n func(string, string) string) error {
			fh, err := f.OpenFile(n("sub", "s.txt"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if err == nil {
				fh.Close()
			}
			return err
		}},
		{"append through sub alias", func(f target, n func(string, string) string) error {
			fh, err := f.OpenFile(n("sub", "s.txt"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			_, err = fh.Write([]byte("appended\n"))
			return errors.Join(err, fh.Close())
		}},
		{"mkdir through root alias", func(f target, n func(string, string) string) error {
			return f.Mkdir(n("root", "made"), 0o750)
		}},
		{"mkdir of an existing directory through sub alias", func(f target, n func(string, string) string) error {
			return f.Mkdir(n("sub", "deep"), 0o750)
		}},
		{"mkdirall through parent alias", func(f target, n func(string, string) string) error {
			return f.MkdirAll(n("top", "root/made/a/b"), 0o755)
		}},
		{"chmod through sub alias", func(f target, n func(string, string) string) error {
			return f.Chmod(n("sub", "deep/z.txt"), 0o600)
		}},
		{"chmod of the root through its alias", func(f target, n func(string, string) string) error {
			return f.Chmod(n("root", ""), 0o711)
		}},
		{"chtimes through root alias", func(f target, n func(string, string) string) error {
			return f.Chtimes(n("root", "d/e.txt"), stamp, stamp)
		}},
		{"symlink through sub alias", func(f target, n func(string, string) string) error {
			return f.SymlinkIfPossible("../r.txt", n("sub", "link"))
		}},
		{"write through that symlink through parent alias", func(f target, n func(string, string) string) error {
			return afero.WriteFile(f, n("top", "root/sub/link"), []byte("via link\n"), 0o644)
		}},
		{"remove a lower file through root alias", func(f target, n func(string, string) string) error {
			return f.Remove(n("root", "d/e.txt"))
		}},
		{"remove a non-empty directory through sub alias", func(f target, n func(string, string) string) error {
			return f.Remove(n("sub", "deep"))
		}},
		{"remove a missing file through sub alias", func(f target, n func(string, string) string) error {
			return f.Remove(n("sub", "nothing"))
		}},
		{"rename between aliases", func(f target, n func(string, string) string) error {
			return f.Rename(n("sub", "s.txt"), n("root", "d/moved.txt"))
		}},
		{"rename a directory through parent alias", func(f target, n func(string, string) string) error {
			return f.Rename(n("top", "root/made"), n("root", "made2"))
		}},
		{"removeall through root alias", func(f target, n func(string, string) string) error {
			return f.RemoveAll(n("root", "made2/a"))
		}},
		{"write in the extra root through its alias", func(f target, n func(string, string) string) error {
			return afero.WriteFile(f, n("extra", "x/new.txt"), []byte("extra new\n"), 0o644)
		}},
		{"remove in the extra root through its alias", func(f target, n func(string, string) string) error {
			return f.Remove(n("extra", "e.txt"))
		}},
		{"mkdir and chmod in the extra root through its alias", func(f target, n func(string, string) string) error {
			return errors.Join(f.Mkdir(n("extra", "m"), 0o755), f.Chmod(n("extra", "m"), 0o700))
		}},
		{"rename from the root to the extra root through aliases", func(f target, n func(string, string) string) error {
			// Across roots: EXDEV, as across devices; os on the copy
			// would move it, so this step's oracle is the next one.
			return f.Rename(n("root", "new.txt"), n("extra", "new.txt"))
		}},
	}
	osBefore := hashTree(t, top)
	c := newCow(t, top+"/root", overlayfs.WithRoot(top+"/extra"), overlayfs.AllowOutsideWrites())
	for _, op := range ops {
		got := op.do(c, cowName)
		if op.desc == "rename from the root to the extra root through aliases" {
			if !errors.Is(got, unix.EXDEV) {
				t.Errorf("%s: err = %v, want EXDEV (the roots' layers are apart)", op.desc, got)
			}
			continue
		}
		want := op.do(osTarget{}, osName)
		if errClass(got) != errClass(want) {
			t.Errorf("%s: err = %v, os says %v", op.desc, got, want)
		}
		checkUnchanged(t, top, osBefore)
	}
	// The layer took every write: seen through the canonical names, it
	// agrees with the copy, and so does a read through an alias.
	for _, d := range []string{"root", "extra"} {
		compareTrees(t, c, filepath.Join(top, d), filepath.Join(osTop, d))
	}
	// (Through the sub alias, "link" -> "../r.txt" leaves the alias, as
	// TestAliasDotDotLeavesAsKernel checks; through the root's it does not.)
	for _, p := range [][2]string{{"root", "sub/link"}, {"sub", "deep"}, {"root", "d/moved.txt"}, {"extra", "x/new.txt"}, {"sub", "s.txt"}} {
		got, gerr := afero.ReadFile(c, cowName(p[0], p[1]))
		want, werr := os.ReadFile(osName(p[0], p[1]))
		if string(got) != string(want) || errClass(gerr) != errClass(werr) {
			t.Errorf("ReadFile through %s alias %s = %q, %v; os on the copy: %q, %v", p[0], p[1], got, gerr, want, werr)
		}
	}
	for _, p := range []string{"root/d", "root/r.txt"} {
		gi, gerr := c.Stat(filepath.Join(top, p))
		wi, werr := os.Stat(filepath.Join(osTop, p))
		if gerr != nil || werr != nil || gi.Mode() != wi.Mode() {
			t.Errorf("Stat %s: %v %v; os on the copy: %v %v", p, gi, gerr, wi, werr)
		}
	}
	if gi, err := c.Stat(al["root"] + "/d"); err != nil || !gi.ModTime().Equal(mustStat(t, filepath.Join(top, "root/d"), c).ModTime()) {
		t.Errorf("Stat through the alias and by the canonical name disagree: %v, %v", gi, err)
	}
	if err := c.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	for _, d := range []string{"root", "extra"} {
		compareTrees(t, osTarget{}, filepath.Join(top, d), filepath.Join(osTop, d))
	}
	if gi, wi := mustStat(t, top+"/root/d", osTarget{}), mustStat(t, osTop+"/root/d", osTarget{}); gi.Mode() != wi.Mode() {
		t.Errorf("committed root/d mode %v, os on the copy %v", gi.Mode(), wi.Mode())
	}
}

// compareTrees fails t where the tree at got (seen through fsys) and the
// tree at want (seen through os) differ.
func compareTrees(t *testing.T, fsys target, got, want string) {
	t.Helper()
	w, err := walkTarget(osTarget{}, want)
	if err != nil {
		t.Fatal(err)
	}
	g, err := walkTarget(fsys, got)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range diffTrees(w, g) {
		t.Errorf("%s: %v", got, e)
	}
}

func mustStat(t *testing.T, name string, fsys target) os.FileInfo {
	t.Helper()
	fi, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// TestAliasDotDotLeavesAsKernel: ".." from the top of an alias leaves for
// the alias's parent, as the kernel does, not for the canonical parent;
// what it reaches outside the root is read and written as os does on the
// same names (the oracle is os on the real layout, aliases included).
func TestAliasDotDotLeavesAsKernel(t *testing.T) {
	base := t.TempDir()
	top := aliasLayout(t, base)
	aliasDir := t.TempDir()
	al := bindAliases(t, aliasDir, map[string]string{"root": top + "/root", "sub": top + "/root/sub"})
	if err := os.WriteFile(aliasDir+"/marker", []byte("beside the aliases\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../marker", top+"/root/sub/up"); err != nil {
		t.Fatal(err)
	}
	c := newCow(t, top+"/root", overlayfs.AllowOutsideWrites())
	before := hashTree(t, top)
	for _, name := range []string{
		al["sub"] + "/../marker",  // aliasDir/marker
		al["sub"] + "/../r.txt",   // not the root's r.txt: ENOENT
		al["root"] + "/../marker", // aliasDir/marker
		al["sub"] + "/deep/../../marker",
		al["sub"] + "/up", // a lower symlink "../marker" read through the alias
		al["root"] + "/sub/up",
	} {
		got, gerr := afero.ReadFile(c, name)
		want, werr := os.ReadFile(name)
		if string(got) != string(want) || errClass(gerr) != errClass(werr) {
			t.Errorf("ReadFile(%s) = %q, %v; os: %q, %v", name, got, gerr, want, werr)
		}
	}
	// An outside write through ".." lands beside the aliases, as in os.
	name := al["sub"] + "/../written"
	if err := afero.WriteFile(c, name, []byte("out\n"), 0o644); err != nil {
		t.Fatalf("WriteFile(%s): %v", name, err)
	}
	if data, err := os.ReadFile(aliasDir + "/written"); err != nil || string(data) != "out\n" {
		t.Errorf("the outside write did not land beside the aliases: %q, %v", data, err)
	}
	checkUnchanged(t, top, before)
}

// TestAliasIntoOtherRootRefused: a symlink in the primary root into an
// extra root (by its canonical name or through an alias) reads that root's
// lower and refuses writes even with AllowOutsideWrites, as WithRoot says:
// the extra root's real tree is unchanged.
func TestAliasIntoOtherRootRefused(t *testing.T) {
	base := t.TempDir()
	top := aliasLayout(t, base)
	al := bindAliases(t, t.TempDir(), map[string]string{"extra": top + "/extra"})
	for _, l := range [][2]string{{top + "/extra", "canon"}, {al["extra"], "alias"}} {
		if err := os.Symlink(l[0], top+"/root/"+l[1]); err != nil {
			t.Fatal(err)
		}
	}
	c := newCow(t, top+"/root", overlayfs.WithRoot(top+"/extra"), overlayfs.AllowOutsideWrites())
	before := hashTree(t, top)
	for _, via := range []string{"canon", "alias"} {
		dir := top + "/root/" + via
		if data, err := afero.ReadFile(c, dir+"/e.txt"); err != nil || string(data) != "content of extra/e.txt\n" {
			t.Errorf("ReadFile through %s = %q, %v; want the extra root's lower", via, data, err)
		}
		for desc, err := range map[string]error{
			"write":  afero.WriteFile(c, dir+"/w.txt", []byte("w\n"), 0o644),
			"mkdir":  c.Mkdir(dir+"/m", 0o755),
			"chmod":  c.Chmod(dir+"/e.txt", 0o600),
			"remove": c.Remove(dir + "/e.txt"),
			"rename": c.Rename(dir+"/e.txt", dir+"/f.txt"),
		} {
			if !errors.Is(err, overlayfs.ErrOutsideRoot) || !errors.Is(err, os.ErrPermission) {
				t.Errorf("%s through %s: err = %v, want one matching ErrOutsideRoot and ErrPermission", desc, via, err)
			}
		}
		checkUnchanged(t, top, before)
	}
}
