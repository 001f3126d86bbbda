package overlayfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/cowfs/cowfs/overlayfs"
)

// iofsView lists every entry of fsys through io/fs alone: fs.WalkDir,
// fs.ReadFile, fs.Lstat and fs.ReadLink.
func iofsView(fsys fs.FS) (map[string]entry, error) {
	out := map[string]entry{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		fi, err := fs.Lstat(fsys, p)
		if err != nil {
			return err
		}
		if fi.Mode().Type() != d.Type() {
			return fmt.Errorf("%s: DirEntry type %v, Lstat type %v", p, d.Type(), fi.Mode().Type())
		}
		e := entry{mode: fi.Mode() & (fs.ModeType | fs.ModePerm)}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.content, err = fs.ReadLink(fsys, p)
		case fi.Mode().IsRegular():
			var data []byte
			data, err = fs.ReadFile(fsys, p)
			e.content = string(data)
		}
		out[p] = e
		return err
	})
	return out, err
}

// regularFiles lists the regular files of a view, for fstest.TestFS.
func regularFiles(view map[string]entry) []string {
	var out []string
	for _, k := range sortedKeys(view) {
		if view[k].mode.IsRegular() {
			out = append(out, k)
		}
	}
	return out
}

// checkIOFS runs fstest.TestFS on the os copy (to prove the oracle passes)
// and on cowfs's IOFS(), and compares the two io/fs views. fstest.TestFS
// opens every entry, so it only runs when the tree has no dangling symlink.
func checkIOFS(t *testing.T, c *overlayfs.Fs, copyDir string, testFS bool) {
	t.Helper()
	want, err := iofsView(os.DirFS(copyDir))
	if err != nil {
		t.Fatalf("os.DirFS view: %v", err)
	}
	fsys := c.IOFS()
	if testFS {
		files := regularFiles(want)
		if err := fstest.TestFS(os.DirFS(copyDir), files...); err != nil {
			t.Fatalf("the oracle os.DirFS fails fstest.TestFS: %v", err)
		}
		if err := fstest.TestFS(fsys, files...); err != nil {
			t.Errorf("fstest.TestFS(IOFS()): %v", err)
		}
	}
	got, err := iofsView(fsys)
	if err != nil {
		t.Errorf("walking IOFS(): %v", err)
	}
	if err := errors.Join(diffTrees(want, got)...); err != nil {
		t.Errorf("IOFS() view differs from os.DirFS of the os copy:\n%v", err)
	}
}

// apply runs ops on both sides and fails t on any difference.
func apply(t *testing.T, orig string, ops []op, opts ...overlayfs.Option) (*overlayfs.Fs, string) {
	t.Helper()
	copyDir := osCopy(t, orig)
	c := newCow(t, orig, opts...)
	want := newEnv(osTarget{}, copyDir, false)
	got := newEnv(c, c.Root(), true)
	errs := runOps(ops, want, got)
	want.closeAll()
	got.closeAll()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("setup ops differ from os:\n%v", err)
	}
	return c, copyDir
}

// mergedOps leave whiteouts, an opaque directory, a renamed lower directory,
// copied-up files, new symlinks and metadata-only copy-ups, and no dangling
// symlink.
var mergedOps = []op{
	remove("main.go"),
	remove("internal/util/util_test.go"),
	removeAll("internal/util/deep"),
	writeFile("internal/util/new.go", "package util\n", 0o644),
	removeAll("a"),
	mkdir("a", 0o750),
	writeFile("a/only-new.txt", "new\n", 0o600),
	rename("cmd", "commands"),
	writeFile("go.mod", "module changed\n", 0o644),
	chmod("main.go", 0o755),
	chmod("docs", 0o700),
	symlink("../go.mod", "docs/gomod-link"),
	mkdirAll("new/deep/dir", 0o755),
	writeFile("new/deep/dir/f", "", 0o644),
	remove("dangling"),
	remove("internal/util/up"),
}

// danglingOps leave dangling symlinks behind, in the layer and in the lower.
var danglingOps = []op{
	remove("README.md"),
	symlink("nowhere", "docs/dangling2"),
	symlink("../../../outside-root", "docs/escaping"),
}

func TestIOFSBaseOnly(t *testing.T) {
	for _, fx := range []string{"project", "small", "links"} {
		t.Run(fx, func(t *testing.T) {
			orig := origTree(t, fx)
			c, copyDir := apply(t, orig, nil)
			checkIOFS(t, c, copyDir, false)
		})
	}
	t.Run("testfs", func(t *testing.T) {
		// A lower without dangling symlinks, so fstest.TestFS can open all.
		orig := origTree(t, "project")
		clean := osCopy(t, orig)
		for _, l := range []string{"dangling", "internal/util/up"} {
			if err := os.Remove(filepath.Join(clean, l)); err != nil {
				t.Fatal(err)
			}
		}
		c, copyDir := apply(t, clean, nil)
		checkIOFS(t, c, copyDir, true)
	})
}

func TestIOFSLayerOnly(t *testing.T) {
	orig := filepath.Join(t.TempDir(), "empty-root")
	if err := os.Mkdir(orig, 0o755); err != nil {
		t.Fatal(err)
	}
	c, copyDir := apply(t, orig, []op{
		writeFile("a.txt", "a\n", 0o644),
		mkdirAll("x/y/z", 0o755),
		writeFile("x/y/z/deep.txt", "deep", 0o600),
		writeFile("x/b.bin", "\x00\x01\x02", 0o644),
		mkdir("emptydir", 0o700),
		symlink("a.txt", "link"),
		symlink("x/y", "dirlink"),
		writeFile("tmp", "t", 0o644),
		rename("tmp", "x/renamed"),
	})
	checkIOFS(t, c, copyDir, true)
	c2, copyDir2 := apply(t, orig, []op{symlink("gone", "dangling"), writeFile("f", "f", 0o644)})
	checkIOFS(t, c2, copyDir2, false)
}

func TestIOFSMerged(t *testing.T) {
	orig := origTree(t, "project")
	c, copyDir := apply(t, orig, mergedOps)
	checkIOFS(t, c, copyDir, true)
	c2, copyDir2 := apply(t, orig, append(slices.Clone(mergedOps), danglingOps...))
	checkIOFS(t, c2, copyDir2, false)
}

func TestIOFSSub(t *testing.T) {
	orig := origTree(t, "project")
	c, copyDir := apply(t, orig, mergedOps)
	for _, dir := range []string{"internal", "internal/util", "a", "new/deep", "commands"} {
		t.Run(dir, func(t *testing.T) {
			sub, err := fs.Sub(c.IOFS(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := sub.(fs.ReadLinkFS); !ok {
				t.Errorf("fs.Sub(IOFS(), %q) = %T, does not implement fs.ReadLinkFS: the FS's own Sub should", dir, sub)
			}
			wantFS := os.DirFS(filepath.Join(copyDir, dir))
			want, err := iofsView(wantFS)
			if err != nil {
				t.Fatal(err)
			}
			if err := fstest.TestFS(sub, regularFiles(want)...); err != nil {
				t.Errorf("fstest.TestFS(Sub(%q)): %v", dir, err)
			}
			got, err := iofsView(sub)
			if err != nil {
				t.Errorf("walking Sub(%q): %v", dir, err)
			}
			if err := errors.Join(diffTrees(want, got)...); err != nil {
				t.Errorf("Sub(%q) differs from os.DirFS:\n%v", dir, err)
			}
		})
	}
	if _, err := fs.Sub(c.IOFS(), "../x"); err == nil {
		t.Errorf("fs.Sub(IOFS(), ../x) = nil error, want invalid")
	}
}

func TestIOFSLinksAndNames(t *testing.T) {
	orig := origTree(t, "links")
	c, copyDir := apply(t, orig, []op{symlink("target.txt", "new-link"), remove("chain2")})
	fsys := c.IOFS()
	for _, iface := range []struct {
		name string
		ok   bool
	}{
		{"fs.ReadDirFS", is[fs.ReadDirFS](fsys)},
		{"fs.ReadFileFS", is[fs.ReadFileFS](fsys)},
		{"fs.StatFS", is[fs.StatFS](fsys)},
		{"fs.SubFS", is[fs.SubFS](fsys)},
		{"fs.ReadLinkFS", is[fs.ReadLinkFS](fsys)},
	} {
		if !iface.ok {
			t.Errorf("IOFS() = %T does not implement %s", fsys, iface.name)
		}
	}
	wantFS := os.DirFS(copyDir)
	for _, name := range []string{
		"new-link", "chain1", "chain2", "loop1", "self", "dirlink", "dir/parent", "dir/sibling",
		"dir/sub/deep-up", "dangling", "abs-missing", "target.txt", "dir", "missing",
		"dirlink/inner.txt", "dir/parent/target.txt", "loopdir/into",
	} {
		wl, werr := fs.ReadLink(wantFS, name)
		gl, gerr := fs.ReadLink(fsys, name)
		if wl != gl || errClass(werr) != errClass(gerr) {
			t.Errorf("fs.ReadLink(%q) = %q, %v; want %q, %v", name, gl, gerr, wl, werr)
		}
		wi, werr := fs.Lstat(wantFS, name)
		gi, gerr := fs.Lstat(fsys, name)
		if info(wi) != info(gi) || errClass(werr) != errClass(gerr) {
			t.Errorf("fs.Lstat(%q) = %s, %v; want %s, %v", name, info(gi), gerr, info(wi), werr)
		}
		wi, werr = fs.Stat(wantFS, name)
		gi, gerr = fs.Stat(fsys, name)
		if info(wi) != info(gi) || errClass(werr) != errClass(gerr) {
			t.Errorf("fs.Stat(%q) = %s, %v; want %s, %v", name, info(gi), gerr, info(wi), werr)
		}
		wd, werr := fs.ReadFile(wantFS, name)
		gd, gerr := fs.ReadFile(fsys, name)
		if string(wd) != string(gd) || errClass(werr) != errClass(gerr) {
			t.Errorf("fs.ReadFile(%q) = %q, %v; want %q, %v", name, gd, gerr, wd, werr)
		}
	}
	// io/fs names are unrooted, slash-separated and clean: anything else is
	// fs.ErrInvalid in a *fs.PathError, whatever exists on disk.
	for _, name := range []string{"/target.txt", "../x", "dir/", "dir/../target.txt", "./target.txt", "", "dir//inner.txt", orig + "/target.txt"} {
		for call, fn := range map[string]func() error{
			"Open":     func() error { f, err := fsys.Open(name); closeIf(f); return err },
			"Stat":     func() error { _, err := fs.Stat(fsys, name); return err },
			"ReadFile": func() error { _, err := fs.ReadFile(fsys, name); return err },
			"ReadDir":  func() error { _, err := fs.ReadDir(fsys, name); return err },
			"ReadLink": func() error { _, err := fs.ReadLink(fsys, name); return err },
			"Lstat":    func() error { _, err := fs.Lstat(fsys, name); return err },
		} {
			err := fn()
			var pe *fs.PathError
			if !errors.Is(err, fs.ErrInvalid) || !errors.As(err, &pe) {
				t.Errorf("%s(%q) = %v, want *fs.PathError with fs.ErrInvalid", call, name, err)
			}
		}
	}
}

func is[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

func closeIf(f fs.File) {
	if f != nil {
		f.Close()
	}
}

// TestIOFSSortedReadDir: fs.ReadDir of merged directories is sorted and
// agrees with the afero listing.
func TestIOFSSortedReadDir(t *testing.T) {
	orig := origTree(t, "project")
	c, _ := apply(t, orig, mergedOps)
	for _, dir := range []string{".", "internal/util", "a", "docs"} {
		des, err := fs.ReadDir(c.IOFS(), dir)
		if err != nil {
			t.Errorf("ReadDir(%q): %v", dir, err)
			continue
		}
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		if !slices.IsSorted(names) {
			t.Errorf("ReadDir(%q) not sorted: %q", dir, names)
		}
		f, err := c.Open(filepath.Join(c.Root(), dir))
		if err != nil {
			t.Fatal(err)
		}
		aferoNames, err := f.Readdirnames(-1)
		f.Close()
		if err != nil || !slices.Equal(aferoNames, names) {
			t.Errorf("Readdirnames(%q) = %q, %v; io/fs says %q", dir, aferoNames, err, names)
		}
	}
}
