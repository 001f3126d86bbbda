package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cowfs/cowfs/internal/relpath"
	"github.com/cowfs/cowfs/internal/unixmode"
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
// ignored. Files of 1 MiB or more are not read into memory: Import keeps
// a private copy of each, an unlinked file (a reflink where the upper's
// filesystem can, else a sparse copy, beside the upper or in the temporary
// directory), by reference (see [overlayfs.Fs.PutEntry]). Importing a
// sparse or large file costs memory for the data the layer later reads,
// not for its size, and the upper may be changed or removed afterwards
// without changing the layer. (Run's own import keeps its upper's files
// themselves where they have one link: nothing else can reach them.) The
// upper root's own mode and owner, where they differ from the view's
// root, become the layer's entry for the root ("."). A directory of the
// upper, and the upper root, show their modification time in the view,
// where the kernel moved it by writing in them: the layer keeps it as a
// change of entries does (see [overlayfs.Fs.PutDirTime]). A directory
// merged with the view's, with its mode and owner, becomes no layer
// entry: the kernel copied it up only to write in it.
//
// Import checks the whole upper before it changes f: an upper that uses
// redirect_dir or metacopy, which a layer cannot express, is refused with
// [ErrRedirect] or [ErrMetacopy] inside an *fs.PathError naming the upper
// path. A device node (other than a whiteout), which a layer cannot hold,
// is skipped: Import imports everything else, then returns an error
// wrapping [ErrUnsupportedType] that names each skipped path; so is an
// entry at the root's ".cowfs-commit", the name Commit keeps for its
// journal ([ErrReservedName]).
//
// Import costs about the same per entry at any depth: the upper is walked,
// and its files opened, through directory descriptors (O_NOFOLLOW, one
// component at a time): 2,000 nested directories import in 2.4 to 8 times
// the time of 2,000 side by side on a loaded two-core machine (270 times
// before), allocating 57 MB instead of 6.2 GB (BenchmarkImportNested). An error
// while applying (a file unreadable halfway) leaves f with part of the
// upper applied; take an [overlayfs.Fs.Snapshot] first to roll back.
func Import(upper string, f *overlayfs.Fs, opts Options) error {
	return importAs(upper, upper, f, opts, nil, false)
}

// importAs is Import naming skipped paths under shown instead of upper
// (Run names them where the command made them, in the root), and taking
// the modes in modes (see makeReadable) over those it finds. run says the
// upper is Run's own (in its private temporary directory, its command
// gone): directory redirects (Run's redirect_dir=on mount) are followed as
// the kernel follows them (see redirect_linux.go), and a large file with
// one link is kept by reference, not copied (see privateContent).
func importAs(upper, shown string, f *overlayfs.Fs, opts Options, modes map[string]fs.FileMode, run bool) error {
	root, err := os.OpenRoot(upper)
	if err != nil {
		return err
	}
	defer root.Close()
	entries, skips, err := scanUpper(upper, shown, opts, modes, run)
	if err != nil {
		return err
	}
	staged, err := stageRedirects(upper, f, entries)
	if err != nil {
		return err
	}
	a := newUpperApplier(root, upper, f, run)
	defer a.close()
	for _, e := range entries {
		if e.redirect != "" {
			if err := staged.place(f, e); err != nil {
				return err
			}
		}
		if err := a.apply(e); err != nil {
			return err
		}
	}
	if err := staged.done(); err != nil {
		return err
	}
	if err := importDirTimes(f, entries); err != nil {
		return err
	}
	if err := importRoot(upper, f, modes); err != nil {
		return err
	}
	return skipped(skips)
}

// importDirTimes gives each directory of the upper its modification time
// in the view, where applying moved it: a whiteout put in it (as a
// removal in the view moves it), or a redirect moving a directory out of
// it. Those are kept as a change of entries keeps them (see
// [overlayfs.Fs.PutDirTime]); the others have the time of their entry.
func importDirTimes(f *overlayfs.Fs, entries []upperEntry) error {
	kept := map[string]time.Time{}
	for rel, t := range f.DirTimes() {
		kept[rel] = t
	}
	if len(kept) == 0 {
		return nil
	}
	for _, e := range entries {
		if e.typ != overlayfs.EntryDir {
			continue
		}
		if t, ok := kept[e.rel]; ok && !t.Equal(e.mtime) {
			if err := f.PutDirTime(e.rel, e.mtime); err != nil {
				return err
			}
		}
	}
	return nil
}

// importRoot stacks the upper root's own metadata on the view's root where
// their mode or owner differ: the merged root shows the upper's, and its
// modification time where that differs (kept as a change of entries
// keeps it, see [overlayfs.Fs.PutDirTime]). A mode in modes (for ".") is
// taken over the upper root's own.
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
		mode = specialPerm(unixmode.FileMode(st.Mode))
	}
	if mtime := time.Unix(st.Mtim.Unix()); !cur.ModTime().Equal(mtime) {
		if err := f.PutDirTime(".", mtime); err != nil {
			return err
		}
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
	redirect string // a directory's redirect xattr, where followed
}

// scanUpper walks upper parent-first, in bytewise order within each
// directory, checking every entry before anything is applied. Entries a
// layer cannot hold are left out, each with an error in skips: device
// nodes, and the root's .cowfs-commit (see reservedEntry). It works
// through directory descriptors, one per level, so that each entry costs
// the same at any depth.
func scanUpper(upper, shown string, opts Options, modes map[string]fs.FileMode, follow bool) (out []upperEntry, skips []error, err error) {
	fd, err := unix.Open(upper, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: upper, Err: err}
	}
	defer unix.Close(fd)
	s := &upperScan{upper: upper, shown: shown, prefix: opts.xattrPrefix(), modes: modes, follow: follow,
		xbuf: make([]byte, 1024), procFD: procFDWorks()}
	err = s.dir(fd, ".")
	return s.out, s.skips, err
}

// upperScan is one walk of scanUpper.
type upperScan struct {
	upper, shown, prefix string
	modes                map[string]fs.FileMode
	follow               bool
	xbuf                 []byte
	procFD               bool // /proc/self/fd names the walk's directories
	out                  []upperEntry
	skips                []error
	links                importLinks // the names of one inode (link_linux.go)
}

// procFDWorks reports whether /proc/self/fd/N/NAME reaches NAME in the
// directory open as N: then xattrs are read by that short name, not by a
// path as long as the tree is deep.
func procFDWorks() bool {
	_, err := os.Stat("/proc/self/fd")
	return err == nil
}

// dir scans the entries of directory fd, the upper's rel.
func (s *upperScan) dir(fd int, rel string) error {
	// A descriptor of its own for the *os.File, which closes it.
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "dup", Path: filepath.Join(s.upper, rel), Err: err}
	}
	d := os.NewFile(uintptr(dup), filepath.Join(s.upper, rel))
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		if err := s.entry(fd, joinRel(rel, name), name); err != nil {
			return err
		}
	}
	return nil
}

// entry scans one entry, name in directory fd, and below it.
func (s *upperScan) entry(fd int, rel, name string) error {
	// Names as long as the tree is deep are made only where needed.
	p := func() string { return under(s.upper, rel) }
	shown := func() string { return under(s.shown, rel) }
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "lstat", Path: p(), Err: err}
	}
	e := upperEntry{
		rel:   rel,
		mode:  specialPerm(unixmode.FileMode(st.Mode)),
		uid:   int(st.Uid),
		gid:   int(st.Gid),
		mtime: time.Unix(st.Mtim.Unix()),
		size:  st.Size,
	}
	if m, ok := s.modes[e.rel]; ok {
		e.mode = m
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			s.skips = append(s.skips, skipError(shown(), st.Mode, st.Rdev))
			return nil
		}
		e.typ = overlayfs.EntryWhiteout
		if rel != commitJournal { // the view never has it: nothing to remove
			s.out = append(s.out, e)
		}
		return nil
	case unix.S_IFDIR:
		e.typ = overlayfs.EntryDir
	case unix.S_IFREG:
		e.typ = overlayfs.EntryFile
	case unix.S_IFLNK:
		e.typ = overlayfs.EntrySymlink
		t, err := readlinkat(fd, name)
		if err != nil {
			return &fs.PathError{Op: "readlink", Path: p(), Err: err}
		}
		e.target = t
	default:
		t, ok := specialType(st.Mode)
		if !ok {
			s.skips = append(s.skips, skipError(shown(), st.Mode, st.Rdev))
			return nil
		}
		e.typ = t
	}
	if rel == commitJournal {
		s.skips = append(s.skips, reservedError(shown()))
		return nil
	}
	xp := "/proc/self/fd/" + strconv.Itoa(fd) + "/" + name
	if !s.procFD {
		xp = p()
	}
	if err := s.xattrs(&e, xp, p); err != nil {
		return err
	}
	if e.typ != overlayfs.EntryDir {
		if s.links == nil {
			s.links = importLinks{}
		}
		e.linkTo = s.links.linkTo(e.rel, st.Dev, st.Ino, uint64(st.Nlink))
	}
	s.out = append(s.out, e)
	if e.typ != overlayfs.EntryDir {
		return nil
	}
	cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: p(), Err: err}
	}
	defer unix.Close(cfd)
	return s.dir(cfd, rel)
}

// xattrs reads the overlay xattrs of e, by the name xp (p() in errors).
func (s *upperScan) xattrs(e *upperEntry, xp string, p func() string) error {
	names, err := listXattrs(xp, &s.xbuf)
	if err != nil {
		return &fs.PathError{Op: "listxattr", Path: p(), Err: errors.Unwrap(err)}
	}
	for _, name := range names {
		key, ok := strings.CutPrefix(name, s.prefix)
		if !ok {
			continue
		}
		switch key {
		case "redirect":
			if !s.follow || e.typ != overlayfs.EntryDir {
				return &fs.PathError{Op: "import", Path: p(), Err: ErrRedirect}
			}
			v, err := getXattr(xp, name)
			if err != nil {
				return &fs.PathError{Op: "getxattr " + name, Path: p(), Err: errors.Unwrap(err)}
			}
			if e.redirect = string(v); !validRedirect(e.redirect) {
				return &fs.PathError{Op: "import", Path: p(), Err: fmt.Errorf("%w: invalid redirect %q", ErrRedirect, v)}
			}
		case "metacopy":
			return &fs.PathError{Op: "import", Path: p(), Err: ErrMetacopy}
		case "opaque":
			v, err := getXattr(xp, name)
			if err != nil {
				return &fs.PathError{Op: "getxattr " + name, Path: p(), Err: errors.Unwrap(err)}
			}
			// "x" marks a lower dir holding xattr whiteouts; only "y"
			// hides the lower.
			e.opaque = e.typ == overlayfs.EntryDir && bytes.Equal(v, []byte("y"))
		}
	}
	if e.opaque {
		e.redirect = "" // the kernel stops at an opaque directory before it reads a redirect
	}
	return nil
}

// under is dir/rel for a clean slash-separated rel, without filepath.Join's
// Clean: a deep tree's names are long, and each entry needs one.
func under(dir, rel string) string {
	if strings.HasSuffix(dir, "/") {
		return dir + rel
	}
	return dir + "/" + rel
}

// readlinkat reads the target of symlink name in directory fd.
func readlinkat(fd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
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

// upperApplier stacks the entries of an upper (or of Run's copy), parent
// first, on f's view, as the kernel would show them.
type upperApplier struct {
	root   *os.Root
	rootFD int // root's directory; -1 where it cannot be had
	upper  string
	f      *overlayfs.Fs
	owned  bool            // the upper is Run's own (see privateContent)
	bare   map[string]bool // directories put opaque: nothing of the view below them
	dirs   []heldDir       // the directories of the last file opened, the root first
}

// heldDir is a directory of the upper held open: its rel ("." the root)
// and an O_PATH descriptor.
type heldDir struct {
	rel string
	fd  int
}

func newUpperApplier(root *os.Root, upper string, f *overlayfs.Fs, owned bool) *upperApplier {
	a := &upperApplier{root: root, rootFD: -1, upper: upper, f: f, owned: owned, bare: map[string]bool{}}
	if d, err := root.Open("."); err == nil {
		if fd, err := unix.Dup(int(d.Fd())); err == nil {
			a.rootFD = fd
		}
		d.Close()
	}
	return a
}

// close releases the directory descriptor.
func (a *upperApplier) close() {
	for len(a.dirs) > 1 {
		a.popDir()
	}
	if a.rootFD >= 0 {
		unix.Close(a.rootFD)
	}
}

func (a *upperApplier) popDir() {
	unix.Close(a.dirs[len(a.dirs)-1].fd)
	a.dirs = a.dirs[:len(a.dirs)-1]
}

// dirFD returns a descriptor of the upper's directory dir, opened one
// component at a time with O_NOFOLLOW from the deepest directory held
// open that is an ancestor of it: entries come parent first, so that
// each costs one open on average, at any depth.
func (a *upperApplier) dirFD(dir string) (int, error) {
	if a.rootFD < 0 {
		return -1, unix.EBADF
	}
	if len(a.dirs) == 0 {
		a.dirs = []heldDir{{".", a.rootFD}}
	}
	for len(a.dirs) > 1 {
		top := a.dirs[len(a.dirs)-1].rel
		if relpath.Within(dir, top) {
			break
		}
		a.popDir()
	}
	top := a.dirs[len(a.dirs)-1]
	for top.rel != dir {
		rest := dir
		if top.rel != "." {
			rest = dir[len(top.rel)+1:]
		}
		name, _, _ := strings.Cut(rest, "/")
		fd, err := unix.Openat(top.fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		top = heldDir{joinRel(top.rel, name), fd}
		a.dirs = append(a.dirs, top)
	}
	return top.fd, nil
}

// lstat is f.Lstat of rel, but known absent below a directory put opaque:
// the view's Lstat walks the whole path, so asking it of every entry of a
// deep tree costs O(depth) each.
func (a *upperApplier) lstat(rel string, placed bool) (fs.FileInfo, error) {
	if !placed && a.bare[path.Dir(rel)] {
		return nil, fs.ErrNotExist
	}
	return a.f.Lstat(filepath.Join(a.f.Root(), filepath.FromSlash(rel)))
}

// apply stacks e on the view. A redirected directory (e.redirect) has
// just been given its lower subtree (see redirectStage.place).
func (a *upperApplier) apply(e upperEntry) error {
	le := overlayfs.LayerEntry{
		Path: e.rel, Type: e.typ, Mode: e.mode, ModTime: e.mtime,
		Uid: e.uid, Gid: e.gid, Target: e.target, Size: e.size, LinkTo: e.linkTo,
	}
	if e.linkTo != "" {
		return a.f.PutEntry(le, nil)
	}
	switch e.typ {
	case overlayfs.EntryWhiteout:
		if _, err := a.lstat(e.rel, false); err != nil {
			return nil
		}
		le.Mode, le.Size = 0, 0
		return a.f.PutEntry(le, nil)
	case overlayfs.EntryDir:
		// A dir over a non-dir (or over nothing) shows nothing from below.
		cur, curErr := a.lstat(e.rel, e.redirect != "")
		le.Opaque = e.opaque || curErr != nil || !cur.IsDir()
		if le.Opaque {
			a.bare[e.rel] = true
		}
		if !le.Opaque && e.redirect == "" && sameDirMeta(cur, le) {
			// Copied up for what the kernel wrote in it: its time alone
			// moved, which the layer keeps without an entry.
			if cur.ModTime().Equal(le.ModTime) {
				return nil
			}
			return a.f.PutDirTime(e.rel, le.ModTime)
		}
		return a.f.PutEntry(le, nil)
	case overlayfs.EntrySymlink, overlayfs.EntryFIFO, overlayfs.EntrySocket:
		return a.f.PutEntry(le, nil)
	case overlayfs.EntryFile:
		return a.applyFile(e, le)
	}
	return errors.ErrUnsupported
}

// sameDirMeta reports whether the view's directory cur has the mode and
// owner of the upper's directory le.
func sameDirMeta(cur fs.FileInfo, le overlayfs.LayerEntry) bool {
	uid, gid, ok := ownerOf(cur)
	return ok && specialPerm(cur.Mode()) == le.Mode && uid == le.Uid && gid == le.Gid
}

func (a *upperApplier) applyFile(e upperEntry, le overlayfs.LayerEntry) error {
	name := under(a.upper, e.rel)
	r, err := a.open(e.rel)
	if err != nil {
		return &fs.PathError{Op: "open", Path: name, Err: underlying(err)}
	}
	defer r.Close()
	content, err := privateContent(r, e.size, a.owned, filepath.Dir(name))
	if err != nil {
		return fmt.Errorf("import %s: %w", name, err)
	}
	if content != r {
		defer content.Close()
	}
	if err := a.f.PutEntry(le, content); err != nil {
		return fmt.Errorf("import %s: %w", name, err)
	}
	return nil
}

// open opens the upper's file rel for reading, never through a symlink:
// beneath a descriptor of its directory (see dirFD), else with os.Root
// (which opens every component in turn: O(depth) system calls a file).
func (a *upperApplier) open(rel string) (*os.File, error) {
	if dfd, err := a.dirFD(path.Dir(rel)); err == nil {
		fd, err := unix.Openat(dfd, path.Base(rel), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			return os.NewFile(uintptr(fd), under(a.upper, rel)), nil
		}
	}
	return a.root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}
