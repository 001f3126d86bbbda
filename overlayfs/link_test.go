//go:build linux

package overlayfs_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

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
// too (every fourth sequence; every one with COWFS_LONG=1). 200
// sequences; 1,000 with COWFS_LONG=1.
func TestLinkDifferential(t *testing.T) {
	seqs, long := 200, os.Getenv("COWFS_LONG") == "1"
	if long {
		seqs = 1000
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	divergences := 0
	for i := range seqs {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		ops := randomLinkOps(r, 4+r.IntN(16))
		if errs := runLinkSequence(t, ops, long || i%4 == 0); len(errs) > 0 {
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
