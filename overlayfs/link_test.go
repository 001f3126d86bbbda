//go:build linux

package overlayfs_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/internal/longtest"
	"github.com/cowfs/cowfs/overlayfs"
)

// linkFixture writes the lower tree of the hard-link differential into
// dir: files with one, two and three names across directories, a
// symlink with two names, an empty directory.
func linkFixture(t testing.TB, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"d", "d2", "d2/deep", "empty"} {
		must(os.Mkdir(filepath.Join(dir, d), 0o755))
	}
	files := map[string]string{"a": "alpha\n", "d/e": "echo\n", "f": "foxtrot\n", "y": "yankee\n", "d2/deep/z": "zulu\n", "lone": "lone\n"}
	for name, data := range files {
		must(os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	for _, l := range [][2]string{{"a", "b"}, {"a", "d/c"}, {"f", "d/g"}, {"y", "d2/x"}, {"d2/deep/z", "z2"}} {
		must(os.Link(filepath.Join(dir, l[0]), filepath.Join(dir, l[1])))
	}
	must(os.Symlink("a", filepath.Join(dir, "s")))
	must(os.Link(filepath.Join(dir, "s"), filepath.Join(dir, "d/s")))
}

// linkNames are the names the random sequences use: the fixture's, new
// ones, and some through a symlink or with a trailing slash.
var linkNames = []string{
	"a", "b", "d/c", "d/e", "f", "d/g", "y", "d2/x", "d2/deep/z", "z2", "lone", "s", "d/s",
	"n1", "n2", "d/n3", "d2/n4", "empty/n5", "d", "d2", "d2/deep", "empty", "nd", "nd/n6",
	"s/x", "a/", "d/", "missing/n7",
}

// linkOp is one operation of the differential, applied to a name space.
type linkOp struct {
	desc string
	do   func(fsys linkFS, root string) error
}

// linkFS is what the differential needs of os and of the overlay.
type linkFS interface {
	Link(oldname, newname string) error
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldname, newname string) error
	Mkdir(name string, perm fs.FileMode) error
	OpenFile(name string, flag int, perm fs.FileMode) (io.ReadWriteCloser, error)
	Truncate(name string, size int64) error
	Chmod(name string, mode fs.FileMode) error
	Chtimes(name string, atime, mtime time.Time) error
	Symlink(oldname, newname string) error
	Lstat(name string) (fs.FileInfo, error)
	ReadDirNames(name string) ([]string, error)
	Readdir(name string) ([]fs.FileInfo, error)
	Readlink(name string) (string, error)
	ReadFile(name string) ([]byte, error)
}

type osLinkFS struct{}

func (osLinkFS) Link(o, n string) error                 { return os.Link(o, n) }
func (osLinkFS) Remove(n string) error                  { return os.Remove(n) }
func (osLinkFS) RemoveAll(n string) error               { return os.RemoveAll(n) }
func (osLinkFS) Rename(o, n string) error               { return os.Rename(o, n) }
func (osLinkFS) Mkdir(n string, p fs.FileMode) error    { return os.Mkdir(n, p) }
func (osLinkFS) Truncate(n string, s int64) error       { return os.Truncate(n, s) }
func (osLinkFS) Chmod(n string, m fs.FileMode) error    { return os.Chmod(n, m) }
func (osLinkFS) Chtimes(n string, a, m time.Time) error { return os.Chtimes(n, a, m) }
func (osLinkFS) Symlink(o, n string) error              { return os.Symlink(o, n) }
func (osLinkFS) Lstat(n string) (fs.FileInfo, error)    { return os.Lstat(n) }
func (osLinkFS) Readlink(n string) (string, error)      { return os.Readlink(n) }
func (osLinkFS) ReadFile(n string) ([]byte, error)      { return os.ReadFile(n) }
func (osLinkFS) OpenFile(n string, fl int, p fs.FileMode) (io.ReadWriteCloser, error) {
	f, err := os.OpenFile(n, fl, p)
	if err != nil {
		return nil, err
	}
	return f, nil
}
func (osLinkFS) Readdir(n string) ([]fs.FileInfo, error) {
	f, err := os.Open(n)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdir(-1)
}
func (osLinkFS) ReadDirNames(n string) ([]string, error) {
	f, err := os.Open(n)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

type cowLinkFS struct{ *overlayfs.Fs }

func (c cowLinkFS) Symlink(o, n string) error         { return c.SymlinkIfPossible(o, n) }
func (c cowLinkFS) Readlink(n string) (string, error) { return c.ReadlinkIfPossible(n) }
func (c cowLinkFS) Truncate(n string, s int64) error {
	f, err := c.Fs.OpenFile(n, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(s); err != nil {
		return &fs.PathError{Op: "truncate", Path: n, Err: errors.Unwrap(err)}
	}
	return nil
}
func (c cowLinkFS) OpenFile(n string, fl int, p fs.FileMode) (io.ReadWriteCloser, error) {
	f, err := c.Fs.OpenFile(n, fl, p)
	if err != nil {
		return nil, err
	}
	return f, nil
}
func (c cowLinkFS) Readdir(n string) ([]fs.FileInfo, error) {
	f, err := c.Open(n)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdir(-1)
}
func (c cowLinkFS) ReadDirNames(n string) ([]string, error) {
	f, err := c.Open(n)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
func (c cowLinkFS) ReadFile(n string) ([]byte, error) {
	f, err := c.Open(n)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// randomLinkOps returns n random operations over linkNames.
func randomLinkOps(r *rand.Rand, n int) []linkOp {
	name := func() string { return linkNames[r.IntN(len(linkNames))] }
	var ops []linkOp
	for range n {
		p, q := name(), name()
		data := fmt.Sprintf("data%d\n", r.IntN(1000))
		var o linkOp
		switch r.IntN(13) {
		case 0, 1, 2:
			o = linkOp{"link " + p + " " + q, func(f linkFS, root string) error { return f.Link(filepath.Join(root, p), filepath.Join(root, q)) }}
		case 3:
			o = linkOp{"remove " + p, func(f linkFS, root string) error { return f.Remove(filepath.Join(root, p)) }}
		case 4:
			o = linkOp{"removeall " + p, func(f linkFS, root string) error { return f.RemoveAll(filepath.Join(root, p)) }}
		case 5:
			o = linkOp{"rename " + p + " " + q, func(f linkFS, root string) error { return f.Rename(filepath.Join(root, p), filepath.Join(root, q)) }}
		case 6:
			o = linkOp{"writefile " + p, func(f linkFS, root string) error {
				return linkWrite(f, filepath.Join(root, p), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, data)
			}}
		case 7:
			o = linkOp{"append " + p, func(f linkFS, root string) error {
				return linkWrite(f, filepath.Join(root, p), os.O_WRONLY|os.O_APPEND, data)
			}}
		case 8:
			size := int64(r.IntN(4))
			o = linkOp{fmt.Sprintf("truncate %s %d", p, size), func(f linkFS, root string) error { return f.Truncate(filepath.Join(root, p), size) }}
		case 9:
			mode := fs.FileMode(0o600 + r.IntN(2)*0o055 + r.IntN(2)*0o100)
			o = linkOp{fmt.Sprintf("chmod %s %o", p, mode), func(f linkFS, root string) error { return f.Chmod(filepath.Join(root, p), mode) }}
		case 10:
			mt := time.Unix(1_600_000_000+int64(r.IntN(1000)), 0)
			o = linkOp{"chtimes " + p, func(f linkFS, root string) error { return f.Chtimes(filepath.Join(root, p), mt, mt) }}
		case 11:
			o = linkOp{"symlink " + q + " " + p, func(f linkFS, root string) error { return f.Symlink(q, filepath.Join(root, p)) }}
		case 12:
			o = linkOp{"mkdir " + p, func(f linkFS, root string) error { return f.Mkdir(filepath.Join(root, p), 0o755) }}
		}
		ops = append(ops, o)
	}
	// A listing now and then: the merged listing must show links too.
	return append(ops, linkOp{"readdir d", func(f linkFS, root string) error {
		_, err := f.ReadDirNames(filepath.Join(root, "d"))
		return err
	}})
}

func linkWrite(f linkFS, name string, flag int, data string) error {
	h, err := f.OpenFile(name, flag, 0o644)
	if err != nil {
		return err
	}
	_, err = io.WriteString(h, data)
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	return err
}

// linkErrClass is the errno an error wraps ("ok" for none).
func linkErrClass(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	if errors.Is(err, fs.ErrNotExist) {
		return syscall.ENOENT.Error()
	}
	return "other: " + err.Error()
}

// linkTree is what the differential compares of a tree: each path's
// description (type, mode, size, content or target, link count) and the
// names that share an inode, as equivalence classes.
type linkTree struct {
	paths   map[string]string
	classes []string // each class's sorted names joined by " ", sorted
}

func walkLinkTree(t testing.TB, f linkFS, root string) linkTree {
	t.Helper()
	st := linkTree{paths: map[string]string{}}
	groups := map[[2]uint64][]string{}
	var walk func(rel string)
	walk = func(rel string) {
		names, err := f.ReadDirNames(filepath.Join(root, rel))
		if err != nil {
			t.Fatalf("list %s: %v", rel, err)
		}
		// What Readdir says of each entry: its type and, for a
		// non-directory, its link count, as Lstat does.
		infos, err := f.Readdir(filepath.Join(root, rel))
		if err != nil {
			t.Fatalf("readdir %s: %v", rel, err)
		}
		for _, fi := range infos {
			d := fmt.Sprintf("%v", fi.Mode().Type())
			if !fi.IsDir() {
				d += fmt.Sprintf(" nlink=%d", fi.Sys().(*syscall.Stat_t).Nlink)
			}
			st.paths["readdir:"+linkPath(rel, fi.Name())] = d
		}
		for _, n := range names {
			p := linkPath(rel, n)
			host := filepath.Join(root, p)
			fi, err := f.Lstat(host)
			if err != nil {
				t.Fatalf("lstat %s: %v", p, err)
			}
			sys := fi.Sys().(*syscall.Stat_t)
			desc := fmt.Sprintf("%v", fi.Mode())
			switch {
			case fi.IsDir():
				walk(p)
				continue
			case fi.Mode()&fs.ModeSymlink != 0:
				target, err := f.Readlink(host)
				if err != nil {
					t.Fatalf("readlink %s: %v", p, err)
				}
				desc += " -> " + target
			default:
				data, err := f.ReadFile(host)
				if err != nil {
					t.Fatalf("read %s: %v", p, err)
				}
				desc += fmt.Sprintf(" %d %q mtime-set=%v", fi.Size(), data, fi.ModTime().Unix() < 1_700_000_000)
			}
			desc += fmt.Sprintf(" nlink=%d", sys.Nlink)
			st.paths[p] = desc
			k := [2]uint64{sys.Dev, sys.Ino}
			groups[k] = append(groups[k], p)
		}
	}
	walk("")
	for _, g := range groups {
		slices.Sort(g)
		st.classes = append(st.classes, strings.Join(g, " "))
	}
	slices.Sort(st.classes)
	return st
}

func linkPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func diffLinkTrees(want, got linkTree) []string {
	var out []string
	for p, w := range want.paths {
		if g, ok := got.paths[p]; !ok {
			out = append(out, fmt.Sprintf("%s: missing (want %s)", p, w))
		} else if g != w {
			out = append(out, fmt.Sprintf("%s: got %s, want %s", p, g, w))
		}
	}
	for p, g := range got.paths {
		if _, ok := want.paths[p]; !ok {
			out = append(out, fmt.Sprintf("%s: extra %s", p, g))
		}
	}
	if !slices.Equal(want.classes, got.classes) {
		out = append(out, fmt.Sprintf("inode classes: got %q, want %q", got.classes, want.classes))
	}
	slices.Sort(out)
	return out
}

// TestLinkDifferential runs random sequences of Link mixed with Remove,
// RemoveAll, Rename, WriteFile, Append, Truncate, Chmod, Chtimes, Symlink,
// Mkdir and Readdir on os (a real copy of the fixture) and on the overlay
// of the fixture: every operation's error class, then the final tree
// (content, mode, link counts, which names share an inode) must agree;
// then the overlay is committed and the lower on disk must be that tree
// too (every eighth sequence; every one with COWFS_LONG=1). 200
// sequences; 1,000 with COWFS_LONG=1.
func TestLinkDifferential(t *testing.T) {
	t.Parallel() // mostly waiting on the file system: it overlaps with others
	seqs, long := longtest.N(200, 1000), longtest.On()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	divergences := 0
	for i := range seqs {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		ops := randomLinkOps(r, 4+r.IntN(16))
		if errs := runLinkSequence(t, ops, long || i%8 == 0); len(errs) > 0 {
			divergences++
			if divergences <= 3 {
				var descs []string
				for j, o := range ops {
					descs = append(descs, fmt.Sprintf("%d %s", j, o.desc))
				}
				t.Errorf("sequence %d:\n\t%s\n%s", i, strings.Join(descs, "\n\t"), strings.Join(errs, "\n"))
			}
		}
	}
	t.Logf("%d sequences, %d divergences", seqs, divergences)
}

// runLinkSequence runs ops on a fresh os copy and a fresh overlay, and
// returns the divergences; with commit, it commits the overlay and
// compares the lower on disk as well.
func runLinkSequence(t *testing.T, ops []linkOp, commit bool) []string {
	osRoot, lower := t.TempDir(), t.TempDir()
	linkFixture(t, osRoot)
	linkFixture(t, lower)
	ofs, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	cow := cowLinkFS{ofs}
	var errs []string
	for j, o := range ops {
		want, got := linkErrClass(o.do(osLinkFS{}, osRoot)), linkErrClass(o.do(cow, lower))
		if want != got {
			errs = append(errs, fmt.Sprintf("op %d %s: got %s, want %s", j, o.desc, got, want))
		}
	}
	want := walkLinkTree(t, osLinkFS{}, osRoot)
	errs = append(errs, diffLinkTrees(want, walkLinkTree(t, cow, lower))...)
	if commit && len(errs) == 0 {
		if err := ofs.Commit(); err != nil {
			return append(errs, fmt.Sprintf("commit: %v", err))
		}
		for _, d := range diffLinkTrees(want, walkLinkTree(t, osLinkFS{}, lower)) {
			errs = append(errs, "after commit: "+d)
		}
	}
	return errs
}

// linkPair returns an os copy of the link fixture and an overlay of
// another copy.
func linkPair(t *testing.T, opts ...overlayfs.Option) (osRoot string, c *overlayfs.Fs) {
	t.Helper()
	osRoot, lower := t.TempDir(), t.TempDir()
	linkFixture(t, osRoot)
	linkFixture(t, lower)
	c, err := overlayfs.New(lower, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return osRoot, c
}

// TestLinkErrors: Link's errors are os.Link's on Linux: the same errno in
// an *os.LinkError naming the names passed.
func TestLinkErrors(t *testing.T) {
	osRoot, c := linkPair(t)
	for _, l := range []string{"loop1:loop2", "loop2:loop1", "sd:d"} {
		n := strings.Split(l, ":")
		for _, root := range []string{osRoot, c.Root()} {
			if err := os.Symlink(n[1], filepath.Join(root, n[0])); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := [][2]string{
		{"a", "b"}, {"a", "new"}, {"missing", "new"}, {"a", "missing/new"}, {"a/x", "new"},
		{"a/", "new"}, {"d", "new"}, {"d/", "new"}, {"sd", "new"}, {"sd/", "new"}, {"s", "new"},
		{"loop1", "new"}, {"loop1/x", "new"}, {"a", "loop1/x"}, {"a", "new/"}, {"a", "d/"},
		{"a", "."}, {"a", "d/.."}, {".", "new"}, {"d/..", "new"}, {"a", "d/e"}, {"a", "s"},
		{"a", "a"}, {"empty", "empty/x"}, {"a", "a/x"}, {"sd/e", "sd/new"},
	}
	for _, tc := range cases {
		old, new := tc[0], tc[1]
		want := os.Link(filepath.Join(osRoot, old), filepath.Join(osRoot, new))
		got := c.Link(filepath.Join(c.Root(), old), filepath.Join(c.Root(), new))
		if linkErrClass(want) != linkErrClass(got) {
			t.Errorf("Link(%q, %q): got %v, want %v", old, new, got, want)
			continue
		}
		if got == nil {
			continue
		}
		var le *os.LinkError
		if !errors.As(got, &le) || le.Op != "link" || le.Old != filepath.Join(c.Root(), old) || le.New != filepath.Join(c.Root(), new) {
			t.Errorf("Link(%q, %q): error %#v, want an *os.LinkError naming both", old, new, got)
		}
	}
	if diffs := diffLinkTrees(walkLinkTree(t, osLinkFS{}, osRoot), walkLinkTree(t, cowLinkFS{c}, c.Root())); len(diffs) > 0 {
		t.Errorf("trees differ:\n%s", strings.Join(diffs, "\n"))
	}
}

// TestLinkAcrossRoots: a link between two roots of one Fs is EXDEV, as
// between two mounts; a new name outside the root is refused as any write
// outside, and a link from outside into the root is EXDEV.
func TestLinkAcrossRoots(t *testing.T) {
	lower, other, outside := t.TempDir(), t.TempDir(), t.TempDir()
	linkFixture(t, lower)
	linkFixture(t, other)
	if err := os.WriteFile(filepath.Join(outside, "o"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := overlayfs.New(lower, overlayfs.WithRoot(other))
	if err != nil {
		t.Fatal(err)
	}
	var le *os.LinkError
	err = c.Link(filepath.Join(lower, "a"), filepath.Join(other, "new"))
	if !errors.Is(err, syscall.EXDEV) || !errors.As(err, &le) {
		t.Errorf("link across roots: %v, want an *os.LinkError wrapping EXDEV", err)
	}
	if err := c.Link(filepath.Join(lower, "missing"), filepath.Join(other, "new")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("link of a missing name across roots: %v, want ENOENT first", err)
	}
	if err := c.Link(filepath.Join(lower, "a"), filepath.Join(outside, "new")); !errors.Is(err, overlayfs.ErrOutsideRoot) || !errors.As(err, &le) {
		t.Errorf("link to outside: %v, want ErrOutsideRoot", err)
	}
	if err := c.Link(filepath.Join(outside, "o"), filepath.Join(lower, "new")); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("link from outside: %v, want EXDEV", err)
	}
	if _, err := os.Lstat(filepath.Join(outside, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a link was made outside: %v", err)
	}
	// Within the second root it works as in the first.
	if err := c.Link(filepath.Join(other, "f"), filepath.Join(other, "n")); err != nil {
		t.Fatal(err)
	}
	if fi, err := c.Stat(filepath.Join(other, "d/g")); err != nil || fi.Sys().(*syscall.Stat_t).Nlink != 3 {
		t.Errorf("Stat(other/d/g) after a link in the second root: %v, nlink %v, want 3", err, fi)
	}
}

// TestLinkOpenHandleNlink: a handle's Stat counts the names its file has
// left, 0 after the last is removed, as os's File.Stat (fstat) does.
func TestLinkOpenHandleNlink(t *testing.T) {
	nlinks := func(f interface{ Stat() (fs.FileInfo, error) }) uint64 {
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return uint64(fi.Sys().(*syscall.Stat_t).Nlink)
	}
	for _, tc := range []string{"a", "lone", "fresh", "a:ro", "lone:ro", "d/e:ro", "d/e:ro:nolink", "a:ro:nolink"} {
		name, nolink := strings.CutSuffix(tc, ":nolink")
		name, ro := strings.CutSuffix(name, ":ro")
		osRoot, c := linkPair(t)
		var want, got []uint64
		for _, side := range []struct {
			root string
			fs   linkFS
			out  *[]uint64
		}{{osRoot, osLinkFS{}, &want}, {c.Root(), cowLinkFS{c}, &got}} {
			p := func(n string) string { return filepath.Join(side.root, n) }
			flag := os.O_RDWR
			if ro {
				flag = os.O_RDONLY
			}
			if name == "fresh" {
				flag |= os.O_CREATE
			}
			var h interface {
				Stat() (fs.FileInfo, error)
				Close() error
			}
			if side.fs == (osLinkFS{}) {
				f, err := os.OpenFile(p(name), flag, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				h = f
			} else {
				f, err := c.OpenFile(p(name), flag, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				h = f
			}
			*side.out = append(*side.out, nlinks(h))
			if !nolink {
				if err := side.fs.Link(p(name), p(name+".2")); err != nil {
					t.Fatal(err)
				}
			}
			*side.out = append(*side.out, nlinks(h))
			for _, n := range []string{name, "b", "d/c", name + ".2"} {
				side.fs.Remove(p(n))
				*side.out = append(*side.out, nlinks(h))
			}
			h.Close()
		}
		if !slices.Equal(want, got) {
			t.Errorf("%s: handle nlink along link, removes: got %v, want %v", tc, got, want)
		}
	}
}

// TestLinkInodes: every name of the view has an inode (device and number)
// of its own but for the names of one file: directories, symlinks and
// files, new, copied up and lower, checked against the classes os gives.
func TestLinkInodes(t *testing.T) {
	osRoot, c := linkPair(t)
	for _, side := range []struct {
		root string
		fs   linkFS
	}{{osRoot, osLinkFS{}}, {c.Root(), cowLinkFS{c}}} {
		p := func(n string) string { return filepath.Join(side.root, n) }
		side.fs.Mkdir(p("n1"), 0o755)
		side.fs.Mkdir(p("n2"), 0o755)
		side.fs.Symlink("a", p("n1/s1"))
		side.fs.Symlink("a", p("n1/s2"))
		linkWrite(side.fs, p("n2/f"), os.O_CREATE|os.O_WRONLY, "x")
		linkWrite(side.fs, p("n2/g"), os.O_CREATE|os.O_WRONLY, "x")
		side.fs.Chmod(p("d"), 0o700)
		side.fs.Chmod(p("lone"), 0o600)
		side.fs.Link(p("n2/f"), p("n2/f2"))
	}
	class := func(root string) []string {
		byIno := map[[2]uint64][]string{}
		filepath.WalkDir(root, func(string, fs.DirEntry, error) error { return nil })
		var walk func(rel string)
		walk = func(rel string) {
			names, _ := cowLinkFS{c}.ReadDirNames(filepath.Join(root, rel))
			if root == osRoot {
				names, _ = osLinkFS{}.ReadDirNames(filepath.Join(root, rel))
			}
			for _, n := range names {
				q := linkPath(rel, n)
				var fi fs.FileInfo
				if root == osRoot {
					fi, _ = os.Lstat(filepath.Join(root, q))
				} else {
					fi, _ = c.Lstat(filepath.Join(root, q))
				}
				st := fi.Sys().(*syscall.Stat_t)
				byIno[[2]uint64{st.Dev, st.Ino}] = append(byIno[[2]uint64{st.Dev, st.Ino}], q)
				if fi.IsDir() {
					walk(q)
				}
			}
		}
		walk("")
		var out []string
		for _, g := range byIno {
			slices.Sort(g)
			out = append(out, strings.Join(g, " "))
		}
		slices.Sort(out)
		return out
	}
	if want, got := class(osRoot), class(c.Root()); !slices.Equal(want, got) {
		t.Errorf("names by inode:\ngot  %q\nwant %q", got, want)
	}
}

// TestLinkSnapshotFork: links made in a fork stay there; Restore brings
// back the link counts of its snapshot; Reset the lower's.
func TestLinkSnapshotFork(t *testing.T) {
	_, c := linkPair(t)
	p := func(n string) string { return filepath.Join(c.Root(), n) }
	nlink := func(f *overlayfs.Fs, n string) uint64 {
		fi, err := f.Lstat(p(n))
		if err != nil {
			return 0
		}
		return uint64(fi.Sys().(*syscall.Stat_t).Nlink)
	}
	snap := c.Snapshot()
	fork := c.Fork()
	if err := fork.Link(p("a"), p("n")); err != nil {
		t.Fatal(err)
	}
	if err := afero.WriteFile(fork, p("n"), []byte("forked"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := [2]uint64{nlink(fork, "b"), nlink(c, "b")}; got != [2]uint64{4, 3} {
		t.Errorf("nlink of b in fork, parent: %v, want [4 3]", got)
	}
	if data, _ := afero.ReadFile(c, p("a")); string(data) != "alpha\n" {
		t.Errorf("parent sees the fork's write through a link: %q", data)
	}
	c.Restore(fork.Snapshot())
	if data, _ := afero.ReadFile(c, p("d/c")); nlink(c, "d/c") != 4 || string(data) != "forked" {
		t.Errorf("after Restore of the fork's snapshot: d/c nlink %d, %q", nlink(c, "d/c"), data)
	}
	if err := c.Remove(p("a")); err != nil {
		t.Fatal(err)
	}
	if nlink(c, "b") != 3 || nlink(fork, "b") != 4 {
		t.Errorf("remove in the parent: nlink %d (fork %d), want 3 (4)", nlink(c, "b"), nlink(fork, "b"))
	}
	c.Restore(snap)
	if nlink(c, "b") != 3 || nlink(c, "n") != 0 {
		t.Errorf("after Restore: b nlink %d, n %d, want 3, 0", nlink(c, "b"), nlink(c, "n"))
	}
}

// TestLinkFIFO: a linked FIFO's names share its metadata, as on os.
func TestLinkFIFO(t *testing.T) {
	osRoot, c := linkPair(t)
	var want, got []string
	for _, side := range []struct {
		root string
		fs   linkFS
		out  *[]string
	}{{osRoot, osLinkFS{}, &want}, {c.Root(), cowLinkFS{c}, &got}} {
		p := func(n string) string { return filepath.Join(side.root, n) }
		if err := syscall.Mkfifo(p("lowfifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, step := range []func() error{
			func() error { return side.fs.Link(p("lowfifo"), p("p2")) },
			func() error { return side.fs.Chmod(p("p2"), 0o600) },
			func() error { return side.fs.Link(p("p2"), p("d/p3")) },
			func() error { return side.fs.Chmod(p("lowfifo"), 0o640) },
			func() error { return side.fs.Remove(p("p2")) },
		} {
			err := step()
			line := linkErrClass(err)
			for _, n := range []string{"lowfifo", "p2", "d/p3"} {
				if fi, err := side.fs.Lstat(p(n)); err == nil {
					line += fmt.Sprintf(" %s=%v/%d", n, fi.Mode(), fi.Sys().(*syscall.Stat_t).Nlink)
				}
			}
			*side.out = append(*side.out, line)
		}
	}
	if !slices.Equal(want, got) {
		t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// TestLinkChangesAndDiff: a new name is an addition whose LinkTo names
// another name of its file, as os's copy says (same inode); git apply of
// the patch, which has no hard links, writes every name's bytes; the io/fs
// view passes fstest.TestFS.
func TestLinkChangesAndDiff(t *testing.T) {
	osRoot, c := linkPair(t)
	for _, side := range []struct {
		root string
		fs   linkFS
	}{{osRoot, osLinkFS{}}, {c.Root(), cowLinkFS{c}}} {
		p := func(n string) string { return filepath.Join(side.root, n) }
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(side.fs.Link(p("a"), p("d2/n")))
		must(linkWrite(side.fs, p("new"), os.O_CREATE|os.O_WRONLY, "fresh\n"))
		must(side.fs.Link(p("new"), p("d/new2")))
		must(linkWrite(side.fs, p("d2/x"), os.O_WRONLY|os.O_APPEND, "more\n"))
		must(side.fs.Remove(p("lone")))
	}
	links := 0
	for _, ch := range c.Changes() {
		if ch.LinkTo == "" {
			continue
		}
		links++
		a, errA := os.Stat(filepath.Join(osRoot, ch.Path))
		b, errB := os.Stat(filepath.Join(osRoot, ch.LinkTo))
		if errA != nil || errB != nil || !os.SameFile(a, b) {
			t.Errorf("%v: LinkTo %q, which os does not link to it", ch, ch.LinkTo)
		}
	}
	// d2/n, new, d/new2, and y and d2/x (one file, modified).
	if links != 5 {
		t.Errorf("%d changes with LinkTo, want 5: %v", links, c.Changes())
	}
	var patch strings.Builder
	if err := c.WriteDiff(&patch); err != nil {
		t.Fatal(err)
	}
	if git, err := exec.LookPath("git"); err != nil {
		t.Log("git is not installed: the patch is not applied")
	} else {
		applied := t.TempDir()
		linkFixture(t, applied)
		cmd := exec.Command(git, "apply", "--whitespace=nowarn", "-")
		cmd.Dir, cmd.Stdin = applied, strings.NewReader(patch.String())
		cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(applied), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git apply: %v\n%s\n%s", err, out, patch.String())
		}
		for _, n := range []string{"a", "b", "d2/n", "new", "d/new2", "y", "d2/x"} {
			want, _ := os.ReadFile(filepath.Join(osRoot, n))
			got, err := os.ReadFile(filepath.Join(applied, n))
			if err != nil || string(got) != string(want) {
				t.Errorf("after git apply, %s: %q, %v; want %q", n, got, err, want)
			}
		}
	}
	// fstest.TestFS opens every entry: the fixture's dangling d/s goes.
	for _, f := range []linkFS{osLinkFS{}, cowLinkFS{c}} {
		if err := f.Remove(filepath.Join(map[bool]string{true: osRoot, false: c.Root()}[f == osLinkFS{}], "d/s")); err != nil {
			t.Fatal(err)
		}
	}
	var files []string
	for p, d := range walkLinkTree(t, osLinkFS{}, osRoot).paths {
		if strings.HasPrefix(d, "-") && !strings.HasPrefix(p, "readdir:") {
			files = append(files, p)
		}
	}
	if err := fstest.TestFS(c.IOFS(), files...); err != nil {
		t.Errorf("fstest.TestFS(IOFS()): %v", err)
	}
}

// TestLinkConcurrent: links, removals, renames, writes and stats from
// several goroutines at once (run it with -race); at the end each file's
// link count is the number of names that share its inode.
func TestLinkConcurrent(t *testing.T) {
	_, c := linkPair(t)
	names := []string{"a", "b", "d/c", "lone", "n1", "n2", "d/n3", "d2/x", "y"}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for range 300 {
				p := filepath.Join(c.Root(), names[r.IntN(len(names))])
				q := filepath.Join(c.Root(), names[r.IntN(len(names))])
				switch r.IntN(5) {
				case 0:
					c.Link(p, q)
				case 1:
					c.Remove(p)
				case 2:
					c.Rename(p, q)
				case 3:
					afero.WriteFile(c, p, []byte("w"), 0o644)
				case 4:
					c.Stat(p)
				}
			}
		}()
	}
	wg.Wait()
	tree := walkLinkTree(t, cowLinkFS{c}, c.Root())
	for _, class := range tree.classes {
		members := strings.Split(class, " ")
		for _, m := range members {
			if want := fmt.Sprintf("nlink=%d", len(members)); !strings.HasSuffix(tree.paths[m], want) {
				t.Errorf("%s: %s, in a class of %d names", m, tree.paths[m], len(members))
			}
		}
	}
}

// TestLinkAcrossRootsResolvesNewFirst: a link between two roots
// (WithRoot) resolves the new name before it says EXDEV, as linkat does
// between two mounts: EEXIST for a name that exists, ENOENT or ENOTDIR
// for one it cannot reach. The oracle is os.Link between two tmpfs
// mounts holding the same trees (it fails in each case, changing
// nothing).
func TestLinkAcrossRootsResolvesNewFirst(t *testing.T) {
	lower, other := t.TempDir(), t.TempDir()
	for _, d := range []string{lower, other} {
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "size=4m"); err != nil {
			t.Skipf("two mounts for the oracle: mounting a tmpfs needs CAP_SYS_ADMIN: %v", err)
		}
		t.Cleanup(func() { syscall.Unmount(d, syscall.MNT_DETACH) })
		linkFixture(t, d)
	}
	c, err := overlayfs.New(lower, overlayfs.WithRoot(other))
	if err != nil {
		t.Fatal(err)
	}
	for _, newRel := range []string{"new", "a", "a/", "d/e/.", "d/e/x", "nope/x", "new/", "s/x", "d", "d/", "d/.", "empty/"} {
		old, nw := filepath.Join(lower, "a"), filepath.Join(other, newRel)
		want := os.Link(old, nw)
		got := c.Link(old, nw)
		if linkErrClass(got) != linkErrClass(want) {
			t.Errorf("Link(lower/a, other/%s) = %v, want %v", newRel, got, want)
		}
	}
}
