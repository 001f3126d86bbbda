package kernel

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/cowfs/cowfs/internal/relpath"
	"github.com/cowfs/cowfs/internal/sparse"
	"github.com/cowfs/cowfs/internal/unixmode"
	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// Materialize writes f's layer into upper, an empty or missing directory, so
// that an overlay mounted with lowerdir=f.Root(), upperdir=upper (see
// [Mount]) shows exactly f's view.
//
// FIFOs and sockets become a FIFO (mkfifo) and a socket inode (mknod with
// S_IFSOCK) with the entry's mode, owner and time. Deletions become 0/0
// character-device whiteouts, and only where the lower
// has the path under a merged directory. A directory that replaces a lower
// directory gets the opaque xattr in the namespace opts selects. Directories
// the layer does not hold (parents of its entries) copy the lower's mode,
// owner and times; so does the upper root, unless the layer changed the
// root's own metadata (its entry "."), which the upper root then carries.
// A directory whose time the view moved by making, removing or renaming
// an entry in it (see [overlayfs.Fs.DirTimes]) gets that time, set after
// everything below it is written; a lower one is in the upper for that
// alone where the layer has nothing at or below it.
// A missing upper is created, with its missing parents (as os.MkdirAll).
// Blocks of zeros in files are left as holes, and holes of a lower or
// imported file are never read. Everything is created first; metadata
// follows children-first (owner before mode, so setuid bits survive; symlink
// times without following the link). All writes go through an [os.Root] at
// upper, so no layer path can write outside it.
//
// It needs no privilege unless the layer holds owners other than the
// caller's, or opts selects trusted.* xattrs and an opaque directory is
// needed. Errors are *fs.PathError naming the upper path.
func Materialize(f *overlayfs.Fs, upper string, opts Options) error {
	steps, rootEntry, rootTime, err := planLayerRoot(f)
	if err != nil {
		return err
	}
	if err := prepareUpper(upper); err != nil {
		return err
	}
	root, err := os.OpenRoot(upper)
	if err != nil {
		return err
	}
	defer root.Close()
	m := &materializer{
		upper: upper,
		lower: f.Root(),
		opts:  opts,
		dirs:  newDirStack(root),
		euid:  os.Geteuid(),
		egid:  os.Getegid(),
	}
	defer m.dirs.close()
	if err := m.checkRootSetgid(root); err != nil {
		return err
	}
	var dirs []step
	for _, s := range steps {
		if err := m.create(s); err != nil {
			return err
		}
		if s.Type == overlayfs.EntryDir {
			dirs = append(dirs, s)
		}
	}
	// Children-first: in reverse bytewise order every path precedes its
	// ancestors, since an ancestor is a proper prefix.
	for _, d := range slices.Backward(dirs) {
		if err := m.applyDirMeta(d); err != nil {
			return err
		}
	}
	return m.copyRootMeta(root, rootEntry, rootTime)
}

// prepareUpper creates upper (private until its metadata is copied) and
// its missing parents, or checks that it is an empty directory.
func prepareUpper(upper string) error {
	err := os.Mkdir(upper, 0o700)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(upper), 0o777); err == nil {
			err = os.Mkdir(upper, 0o700)
		}
	}
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	d, err := os.Open(upper)
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if len(names) > 0 {
		return &fs.PathError{Op: "materialize", Path: upper, Err: unix.ENOTEMPTY}
	}
	if err != nil && err != io.EOF {
		return err
	}
	return nil
}

type materializer struct {
	upper, lower string
	opts         Options
	dirs         *dirStack
	euid, egid   int
	alwaysChown  bool // upper root is setgid: new entries inherit its group
}

func (m *materializer) upperPath(rel string) string {
	return filepath.Join(m.upper, filepath.FromSlash(rel))
}

func (m *materializer) checkRootSetgid(root *os.Root) error {
	fi, err := root.Stat(".")
	if err != nil {
		return err
	}
	m.alwaysChown = fi.Mode()&fs.ModeSetgid != 0
	return nil
}

func (m *materializer) mkdir(rel string) error {
	dir, err := m.dirs.get(parentOf(rel))
	if err != nil {
		return err
	}
	if err := dir.root.Mkdir(path.Base(rel), 0o700); err != nil {
		return &fs.PathError{Op: "mkdir", Path: m.upperPath(rel), Err: underlying(err)}
	}
	return nil
}

// dirFd is a descriptor of the upper dir rel, for the *at system calls
// os.Root lacks; it stays valid until the next dirs.get.
func (m *materializer) dirFd(rel string) (int, error) {
	d, err := m.dirs.get(rel)
	if err != nil {
		return -1, err
	}
	fd, err := d.fd()
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: m.upperPath(rel), Err: underlying(err)}
	}
	return fd, nil
}

func (m *materializer) create(s step) error {
	e := s.LayerEntry
	parent, name := parentOf(e.Path), path.Base(e.Path)
	if e.LinkTo != "" {
		return m.link(e)
	}
	switch e.Type {
	case overlayfs.EntryWhiteout:
		dfd, err := m.dirFd(parent)
		if err != nil {
			return err
		}
		if err := unix.Mknodat(dfd, name, unix.S_IFCHR, 0); err != nil {
			return &fs.PathError{Op: "mknod", Path: m.upperPath(e.Path), Err: err}
		}
		return nil

	case overlayfs.EntryDir:
		if err := m.mkdir(e.Path); err != nil {
			return err
		}
		if s.markOpaque {
			dfd, err := m.dirFd(e.Path)
			if err != nil {
				return err
			}
			if err := unix.Fsetxattr(dfd, m.opts.xattrPrefix()+"opaque", []byte("y"), 0); err != nil {
				return &fs.PathError{Op: "setxattr", Path: m.upperPath(e.Path), Err: err}
			}
		}
		return nil

	case overlayfs.EntrySymlink:
		dir, err := m.dirs.get(parent)
		if err != nil {
			return err
		}
		if err := dir.root.Symlink(e.Target, name); err != nil {
			return &fs.PathError{Op: "symlink", Path: m.upperPath(e.Path), Err: underlying(err)}
		}
		dfd, err := m.dirFd(parent)
		if err != nil {
			return err
		}
		if e.Uid != m.euid || e.Gid != m.egid || m.alwaysChown {
			if err := unix.Fchownat(dfd, name, e.Uid, e.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return &fs.PathError{Op: "lchown", Path: m.upperPath(e.Path), Err: err}
			}
		}
		ts := timespecs(e.ModTime, e.ModTime)
		if err := unix.UtimesNanoAt(dfd, name, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &fs.PathError{Op: "utimensat", Path: m.upperPath(e.Path), Err: err}
		}
		return nil

	case overlayfs.EntryFile:
		dir, err := m.dirs.get(parent)
		if err != nil {
			return err
		}
		return m.writeFile(dir, name, e)

	case overlayfs.EntryFIFO, overlayfs.EntrySocket:
		// mkfifo, or mknod S_IFSOCK: a socket inode nobody listens on, as
		// the kernel's copy-up of a socket makes.
		dfd, err := m.dirFd(parent)
		if err != nil {
			return err
		}
		p := m.upperPath(e.Path)
		if err := unix.Mknodat(dfd, name, specialMode(e.Type)|0o600, 0); err != nil {
			return &fs.PathError{Op: "mknod", Path: p, Err: err}
		}
		if e.Uid != m.euid || e.Gid != m.egid || m.alwaysChown {
			if err := unix.Fchownat(dfd, name, e.Uid, e.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return &fs.PathError{Op: "lchown", Path: p, Err: err}
			}
		}
		if err := unix.Fchmodat(dfd, name, unixmode.Perm(e.Mode), 0); err != nil {
			return &fs.PathError{Op: "chmod", Path: p, Err: err}
		}
		ts := timespecs(e.ModTime, e.ModTime)
		if err := unix.UtimesNanoAt(dfd, name, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &fs.PathError{Op: "utimensat", Path: p, Err: err}
		}
		return nil
	}
	return &fs.PathError{Op: "materialize", Path: m.upperPath(e.Path), Err: fmt.Errorf("entry type %d: %w", e.Type, ErrUnsupportedType)}
}

// writeFile creates a file and applies its metadata through the open
// descriptor: nothing created later changes a file's times.
func (m *materializer) writeFile(dir *openDir, name string, e overlayfs.LayerEntry) (err error) {
	p := m.upperPath(e.Path)
	w, err := dir.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &fs.PathError{Op: "open", Path: p, Err: underlying(err)}
	}
	defer func() {
		if cerr := w.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	if e.Size > 0 {
		r, err := e.Open()
		if err != nil {
			return fmt.Errorf("materialize %s: layer content: %w", p, err)
		}
		_, err = sparse.Copy(w, r) // holes stay holes
		r.Close()
		if err != nil {
			return &fs.PathError{Op: "write", Path: p, Err: underlying(err)}
		}
	}
	if e.Uid != m.euid || e.Gid != m.egid || m.alwaysChown {
		if err := w.Chown(e.Uid, e.Gid); err != nil {
			return &fs.PathError{Op: "chown", Path: p, Err: underlying(err)}
		}
	}
	if e.Mode != 0o600 {
		if err := w.Chmod(e.Mode); err != nil {
			return &fs.PathError{Op: "chmod", Path: p, Err: underlying(err)}
		}
	}
	ts := timespecs(e.ModTime, e.ModTime)
	if err := futimens(w, &ts); err != nil {
		return &fs.PathError{Op: "futimens", Path: p, Err: err}
	}
	return nil
}

func (m *materializer) applyDirMeta(d step) error {
	dfd, err := m.dirFd(parentOf(d.Path))
	if err != nil {
		return err
	}
	name, p := path.Base(d.Path), m.upperPath(d.Path)
	if d.Uid != m.euid || d.Gid != m.egid || m.alwaysChown {
		if err := unix.Fchownat(dfd, name, d.Uid, d.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &fs.PathError{Op: "chown", Path: p, Err: err}
		}
	}
	if err := unix.Fchmodat(dfd, name, unixmode.Perm(d.Mode), 0); err != nil {
		return &fs.PathError{Op: "chmod", Path: p, Err: err}
	}
	ts := timespecs(d.atime, d.ModTime)
	if err := unix.UtimesNanoAt(dfd, name, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "utimensat", Path: p, Err: err}
	}
	return nil
}

// copyRootMeta gives the upper root the metadata of the view's root (the
// layer's entry "." when it has one, else the lower root's, and mtime when
// not zero: the view's time of the root, see addDirTimes): the merged
// root shows the upper's.
func (m *materializer) copyRootMeta(root *os.Root, e *overlayfs.LayerEntry, mtime time.Time) error {
	fi, err := os.Stat(m.lower)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	uid, gid, mode := int(st.Uid), int(st.Gid), specialPerm(fi.Mode())
	ts := [2]unix.Timespec{unix.Timespec(st.Atim), unix.Timespec(st.Mtim)}
	if e != nil {
		uid, gid, mode = e.Uid, e.Gid, e.Mode
		if !e.ModTime.IsZero() {
			ts[1] = unix.NsecToTimespec(e.ModTime.UnixNano())
		}
	}
	if !mtime.IsZero() { // entries made, removed or renamed in the root
		ts[1] = unix.NsecToTimespec(mtime.UnixNano())
	}
	d, err := root.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	if uid != m.euid || gid != m.egid || m.alwaysChown {
		if err := d.Chown(uid, gid); err != nil {
			return &fs.PathError{Op: "chown", Path: m.upper, Err: underlying(err)}
		}
	}
	if err := d.Chmod(mode); err != nil {
		return &fs.PathError{Op: "chmod", Path: m.upper, Err: underlying(err)}
	}
	if err := futimens(d, &ts); err != nil {
		return &fs.PathError{Op: "futimens", Path: m.upper, Err: err}
	}
	return nil
}

func timespecs(atime, mtime time.Time) [2]unix.Timespec {
	return [2]unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
}

// futimens sets both times of an open file (utimensat with a NULL path).
func futimens(f *os.File, ts *[2]unix.Timespec) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno unix.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall6(unix.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// underlying unwraps an os error to its errno so the caller's PathError
// names the full upper path instead of os.Root's relative one.
func underlying(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// openDir is one directory of a dirStack.
type openDir struct {
	rel  string
	root *os.Root
	file *os.File // opened lazily for the *at system calls
}

func (d *openDir) fd() (int, error) {
	if d.file == nil {
		f, err := d.root.Open(".")
		if err != nil {
			return -1, err
		}
		d.file = f
	}
	return int(d.file.Fd()), nil
}

func (d *openDir) close() {
	if d.file != nil {
		d.file.Close()
	}
	d.root.Close()
}

// dirStack keeps the chain of open directories from the upper root down to
// the last one used. Layer entries come in path order, so each step opens
// at most the new components, each a single name below an os.Root.
type dirStack struct {
	stack []*openDir
}

func newDirStack(root *os.Root) *dirStack {
	return &dirStack{stack: []*openDir{{rel: ".", root: root}}}
}

func (s *dirStack) get(rel string) (*openDir, error) {
	for len(s.stack) > 1 {
		top := s.stack[len(s.stack)-1].rel
		if relpath.Within(rel, top) {
			break
		}
		s.stack[len(s.stack)-1].close()
		s.stack = s.stack[:len(s.stack)-1]
	}
	for {
		top := s.stack[len(s.stack)-1]
		if top.rel == rel {
			return top, nil
		}
		rest := rel
		if top.rel != "." {
			rest = rel[len(top.rel)+1:]
		}
		name, _, _ := strings.Cut(rest, "/")
		r, err := top.root.OpenRoot(name)
		if err != nil {
			return nil, err
		}
		next := name
		if top.rel != "." {
			next = top.rel + "/" + name
		}
		s.stack = append(s.stack, &openDir{rel: next, root: r})
	}
}

func (s *dirStack) close() {
	for i := len(s.stack) - 1; i > 0; i-- {
		s.stack[i].close()
	}
	if f := s.stack[0].file; f != nil {
		f.Close()
	}
	s.stack = s.stack[:1]
}
