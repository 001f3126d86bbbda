package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// node is what the differential compares of one path: name (the map key),
// type, mode, content or target, owner and mtime. Inode, nlink, atime and
// directory sizes are not compared.
type node struct {
	mode     fs.FileMode // type bits and permission/special bits
	data     string
	uid, gid int
	mtime    time.Time
}

func (n node) String() string {
	s := fmt.Sprintf("%v uid=%d gid=%d mtime=%s", n.mode, n.uid, n.gid, n.mtime.Format(time.RFC3339Nano))
	if n.mode.IsRegular() || n.mode&fs.ModeSymlink != 0 {
		s += fmt.Sprintf(" %q", n.data)
	}
	return s
}

type tree map[string]node

// viewTree reads the whole view of f below its root.
func viewTree(f *overlayfs.Fs) (tree, error) {
	t := tree{}
	var walk func(rel string) error
	walk = func(rel string) error {
		abs := filepath.Join(f.Root(), filepath.FromSlash(rel))
		fi, err := f.Lstat(abs)
		if err != nil {
			return err
		}
		n := node{mode: fi.Mode(), mtime: fi.ModTime()}
		if uid, gid, ok := ownerOf(fi); ok {
			n.uid, n.gid = uid, gid
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if n.data, err = f.ReadlinkIfPossible(abs); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			b, err := afero.ReadFile(f, abs)
			if err != nil {
				return err
			}
			n.data = string(b)
		}
		t[rel] = n
		if !fi.IsDir() {
			return nil
		}
		d, err := f.Open(abs)
		if err != nil {
			return err
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			return err
		}
		slices.Sort(names)
		for _, name := range names {
			if err := walk(joinRel(rel, name)); err != nil {
				return err
			}
		}
		return nil
	}
	return t, walk(".")
}

// dirTree reads a real directory tree with os.
func dirTree(dir string) (tree, error) {
	t := tree{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		n := node{mode: fi.Mode(), uid: int(st.Uid), gid: int(st.Gid), mtime: fi.ModTime()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if n.data, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n.data = string(b)
		}
		t[filepath.ToSlash(rel)] = n
		return nil
	})
	return t, err
}

type cmpOpts struct {
	times  bool // compare mtimes of files and symlinks
	dtimes bool // and of directories
	owners bool
}

// diffTrees lists every difference, like fstest.TestFS: one line per path.
func diffTrees(want, got tree, o cmpOpts) error {
	var errs []error
	keys := make([]string, 0, len(want)+len(got))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case !gok:
			errs = append(errs, fmt.Errorf("%s: missing, want %v", k, w))
			continue
		case !wok:
			errs = append(errs, fmt.Errorf("%s: unexpected %v", k, g))
			continue
		}
		wm, gm := w.mode, g.mode
		if wm&fs.ModeSymlink != 0 {
			wm, gm = wm.Type(), gm.Type() // symlink permission bits mean nothing
		}
		bad := wm != gm || w.data != g.data
		if o.owners && (w.uid != g.uid || w.gid != g.gid) {
			bad = true
		}
		if o.times && !w.mode.IsDir() && !w.mtime.Equal(g.mtime) {
			bad = true
		}
		if o.dtimes && w.mode.IsDir() && !w.mtime.Equal(g.mtime) {
			bad = true
		}
		if bad {
			errs = append(errs, fmt.Errorf("%s:\n\twant %v\n\tgot  %v", k, w, g))
		}
	}
	return errors.Join(errs...)
}
