package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// Import reads the overlay upper directory upper, written by the kernel,
// by [Materialize] or by an OCI extractor, and stacks it on f's current view
// the way the kernel stacks an upper on its lower: files, symlinks, FIFOs
// and sockets replace, a 0/0 character device (a whiteout; the kernel's are hard links
// to one inode, which does not matter) removes, a directory merges with the
// directory below unless it carries the opaque xattr of the namespace opts
// selects. Whiteouts of paths the view does not have are skipped. The
// kernel's bookkeeping xattrs (origin, impure, uuid, nlink, ...) are
// ignored. Files of 1 MiB or more are kept by reference (see
// [overlayfs.Fs.PutEntry]), not read: importing a sparse or large file
// costs memory for the data the layer later reads, not for its size, and
// the upper may be removed afterwards. The upper root's own mode and owner, where they differ from the
// view's root, become the layer's entry for the root (".").
//
// Import checks the whole upper before it changes f: an upper that uses
// redirect_dir or metacopy, which a layer cannot express, is refused with
// [ErrRedirect] or [ErrMetacopy] inside an *fs.PathError naming the upper
// path. A device node (other than a whiteout), which a layer cannot hold,
// is skipped: Import imports everything else, then returns an error
// wrapping [ErrUnsupportedType] that names each skipped path. An error
// while applying (a file unreadable halfway) leaves f with part of the
// upper applied; take an [overlayfs.Fs.Snapshot] first to roll back.
func Import(upper string, f *overlayfs.Fs, opts Options) error {
	return importAs(upper, upper, f, opts, nil)
}

// importAs is Import naming skipped paths under shown instead of upper
// (Run names them where the command made them, in the root), and taking
// the modes in modes (see makeReadable) over those it finds.
func importAs(upper, shown string, f *overlayfs.Fs, opts Options, modes map[string]fs.FileMode) error {
	root, err := os.OpenRoot(upper)
	if err != nil {
		return err
	}
	defer root.Close()
	entries, skips, err := scanUpper(upper, shown, opts, modes)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := applyUpperEntry(root, upper, f, e); err != nil {
			return err
		}
	}
	if err := importRoot(upper, f, modes); err != nil {
		return err
	}
	return skipped(skips)
}

// importRoot stacks the upper root's own metadata on the view's root where
// their mode or owner differ: the merged root shows the upper's. A mode
// in modes (for ".") is taken over the upper root's own.
func importRoot(upper string, f *overlayfs.Fs, modes map[string]fs.FileMode) error {
	var st unix.Stat_t
	if err := unix.Stat(upper, &st); err != nil {
		return &fs.PathError{Op: "stat", Path: upper, Err: err}
	}
	cur, err := f.Stat(f.Root())
	if err != nil {
		return err
	}
	cst, ok := cur.Sys().(*syscall.Stat_t)
	mode, fixed := modes["."]
	if !fixed {
		mode = permBits(st.Mode)
	}
	if ok && mode == specialPerm(cur.Mode()) && st.Uid == cst.Uid && st.Gid == cst.Gid {
		return nil
	}
	return f.PutEntry(overlayfs.LayerEntry{
		Path: ".", Type: overlayfs.EntryDir, Mode: mode,
		ModTime: time.Unix(st.Mtim.Unix()), Uid: int(st.Uid), Gid: int(st.Gid),
	}, nil)
}

// upperEntry is one path of an upper dir, checked and classified.
type upperEntry struct {
	rel      string // slash-separated
	typ      overlayfs.EntryType
	mode     fs.FileMode
	uid, gid int
	mtime    time.Time
	size     int64
	target   string
	opaque   bool
	linkTo   string // an earlier entry of the same inode (see importLinks)
}

// scanUpper walks upper parent-first, in bytewise order within each
// directory, checking every entry before anything is applied. Entries a
// layer cannot hold are left out, each with an error in skips.
func scanUpper(upper, shown string, opts Options, modes map[string]fs.FileMode) (out []upperEntry, skips []error, err error) {
	prefix := opts.xattrPrefix()
	xbuf := make([]byte, 1024)
	links := importLinks{}
	err = filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == upper {
			return nil
		}
		rel, err := filepath.Rel(upper, p)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return &fs.PathError{Op: "lstat", Path: p, Err: err}
		}
		e := upperEntry{
			rel:   filepath.ToSlash(rel),
			mode:  permBits(st.Mode),
			uid:   int(st.Uid),
			gid:   int(st.Gid),
			mtime: time.Unix(st.Mtim.Unix()),
			size:  st.Size,
		}
		if m, ok := modes[e.rel]; ok {
			e.mode = m
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if st.Rdev != 0 {
				skips = append(skips, skipError(filepath.Join(shown, rel), st.Mode, st.Rdev))
				return nil
			}
			e.typ = overlayfs.EntryWhiteout
			out = append(out, e)
			return nil
		case unix.S_IFDIR:
			e.typ = overlayfs.EntryDir
		case unix.S_IFREG:
			e.typ = overlayfs.EntryFile
		case unix.S_IFLNK:
			e.typ = overlayfs.EntrySymlink
			if e.target, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			t, ok := specialType(st.Mode)
			if !ok {
				skips = append(skips, skipError(filepath.Join(shown, rel), st.Mode, st.Rdev))
				return nil
			}
			e.typ = t
		}
		if e.typ != overlayfs.EntryDir {
			e.linkTo = links.linkTo(e.rel, st.Dev, st.Ino, uint64(st.Nlink))
		}
		names, err := listXattrs(p, &xbuf)
		if err != nil {
			return err
		}
		for _, name := range names {
			key, ok := strings.CutPrefix(name, prefix)
			if !ok {
				continue
			}
			switch key {
			case "redirect":
				return &fs.PathError{Op: "import", Path: p, Err: ErrRedirect}
			case "metacopy":
				return &fs.PathError{Op: "import", Path: p, Err: ErrMetacopy}
			case "opaque":
				v, err := getXattr(p, name)
				if err != nil {
					return err
				}
				// "x" marks a lower dir holding xattr whiteouts; only "y"
				// hides the lower.
				e.opaque = e.typ == overlayfs.EntryDir && bytes.Equal(v, []byte("y"))
			}
		}
		out = append(out, e)
		return nil
	})
	return out, skips, err
}

func permBits(mode uint32) fs.FileMode {
	m := fs.FileMode(mode & 0o777)
	if mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

func listXattrs(p string, buf *[]byte) ([]string, error) {
	for {
		n, err := unix.Llistxattr(p, *buf)
		if err == unix.ERANGE {
			*buf = make([]byte, 2*len(*buf))
			continue
		}
		if err == unix.ENOTSUP {
			return nil, nil
		}
		if err != nil {
			return nil, &fs.PathError{Op: "listxattr", Path: p, Err: err}
		}
		var names []string
		for _, b := range bytes.Split((*buf)[:n], []byte{0}) {
			if len(b) > 0 {
				names = append(names, string(b))
			}
		}
		return names, nil
	}
}

func getXattr(p, name string) ([]byte, error) {
	buf := make([]byte, 64)
	for {
		n, err := unix.Lgetxattr(p, name, buf)
		if err == unix.ERANGE {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "getxattr " + name, Path: p, Err: err}
		}
		return buf[:n], nil
	}
}

// applyUpperEntry stacks one upper entry on f's view, as the kernel would
// show it.
func applyUpperEntry(root *os.Root, upper string, f *overlayfs.Fs, e upperEntry) error {
	abs := filepath.Join(f.Root(), filepath.FromSlash(e.rel))
	cur, curErr := f.Lstat(abs)
	le := overlayfs.LayerEntry{
		Path: e.rel, Type: e.typ, Mode: e.mode, ModTime: e.mtime,
		Uid: e.uid, Gid: e.gid, Target: e.target, Size: e.size, LinkTo: e.linkTo,
	}
	if e.linkTo != "" {
		return f.PutEntry(le, nil)
	}
	switch e.typ {
	case overlayfs.EntryWhiteout:
		if curErr != nil {
			return nil
		}
		le.Mode, le.Size = 0, 0
		return f.PutEntry(le, nil)
	case overlayfs.EntryDir:
		// A dir over a non-dir (or over nothing) shows nothing from below.
		le.Opaque = e.opaque || curErr != nil || !cur.IsDir()
		return f.PutEntry(le, nil)
	case overlayfs.EntrySymlink, overlayfs.EntryFIFO, overlayfs.EntrySocket:
		return f.PutEntry(le, nil)
	case overlayfs.EntryFile:
		r, err := root.OpenFile(filepath.FromSlash(e.rel), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return &fs.PathError{Op: "open", Path: filepath.Join(upper, e.rel), Err: underlying(err)}
		}
		defer r.Close()
		if err := f.PutEntry(le, r); err != nil {
			return fmt.Errorf("import %s: %w", filepath.Join(upper, e.rel), err)
		}
		return nil
	}
	return errors.ErrUnsupported
}
