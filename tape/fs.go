package tape

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cowfs/cowfs/internal/relpath"
	"github.com/spf13/afero"
)

// Fs is the recording afero.Fs that Recorder.Wrap returns. Wrap's result
// type is afero.Fs, as for every wrapper in this module (DESIGN.md fixes
// it), so that code under test sees only afero; Fs is exported for the
// callers that need more: a type assertion on Wrap's result gives Inner,
// and tells that the afero.Lstater, afero.Linker and afero.LinkReader
// methods are recorded too.
type Fs struct {
	rec   *Recorder
	inner afero.Fs
	roots []string // cleaned absolute spellings of the root
	// prefixes are the roots with a trailing separator: a name under
	// roots[i] starts with prefixes[i].
	prefixes []string
	// prefix is prefixes[0], held here so that mapping the common name
	// reads one string, not a slice of them.
	prefix string
}

var (
	_ afero.Fs         = (*Fs)(nil)
	_ afero.Lstater    = (*Fs)(nil)
	_ afero.Linker     = (*Fs)(nil)
	_ afero.LinkReader = (*Fs)(nil)
	_ afero.File       = (*file)(nil)
)

func newFs(r *Recorder, inner afero.Fs, root string) *Fs {
	f := &Fs{rec: r, inner: inner}
	abs, err := filepath.Abs(root)
	if err != nil {
		abs = filepath.Clean(root)
	}
	f.roots = append(f.roots, abs)
	if ev, err := filepath.EvalSymlinks(abs); err == nil && ev != abs {
		f.roots = append(f.roots, ev)
	}
	for _, root := range f.roots {
		if !strings.HasSuffix(root, string(filepath.Separator)) {
			root += string(filepath.Separator)
		}
		f.prefixes = append(f.prefixes, root)
	}
	f.prefix = f.prefixes[0]
	return f
}

// Inner returns the wrapped file system.
func (f *Fs) Inner() afero.Fs { return f.inner }

// rel maps a name as the caller gave it to the recorded path.
func (f *Fs) rel(name string) string {
	p, _ := f.relClean(name)
	return p
}

// relClean is rel, and reports whether name is known to be clean
// (filepath.Clean would return it unchanged), so that a handle can keep it
// without cleaning it again.
func (f *Fs) relClean(name string) (p string, clean bool) {
	// The common case without filepath.Clean's copy: an absolute name
	// that is a root spelling (clean: filepath.Abs cleans) followed by a
	// clean relative name, which is then the answer as it stands.
	if strings.HasPrefix(name, f.prefix) {
		if p := name[len(f.prefix):]; relpath.Below(p) {
			return filepath.ToSlash(p), true
		}
	}
	for i, root := range f.roots {
		if name == root {
			return ".", true
		}
		if prefix := f.prefixes[i]; strings.HasPrefix(name, prefix) && relpath.Below(name[len(prefix):]) {
			return filepath.ToSlash(name[len(prefix):]), true
		}
	}
	return f.relSlow(name), false
}

// relSlow is rel for a name that is relative, not clean or not under the
// root.
func (f *Fs) relSlow(name string) string {
	abs := name
	if !filepath.IsAbs(abs) {
		var err error
		if abs, err = filepath.Abs(name); err != nil {
			return OutsidePath
		}
	}
	abs = filepath.Clean(abs)
	for i, root := range f.roots {
		if abs == root {
			return "."
		}
		if prefix := f.prefixes[i]; strings.HasPrefix(abs, prefix) {
			return filepath.ToSlash(abs[len(prefix):])
		}
	}
	return OutsidePath
}

// target maps link text: an absolute name inside the root becomes
// RootPrefix + "/" + its relative path; anything else is kept.
func (f *Fs) target(t string) string {
	if !filepath.IsAbs(t) {
		return filepath.ToSlash(t)
	}
	switch p := f.rel(t); p {
	case OutsidePath:
		return filepath.ToSlash(t)
	case ".":
		return RootPrefix
	default:
		return RootPrefix + "/" + p
	}
}

// statFields returns the mode and size a stat record holds for fi: the
// size of a regular file only.
func statFields(fi os.FileInfo) (mode os.FileMode, size int64) {
	m := fi.Mode()
	if m.IsRegular() {
		size = fi.Size()
	}
	return m, size
}

// modeString is m.String() without an allocation for the modes most files
// and directories have.
func modeString(m os.FileMode) string {
	switch m {
	case 0o644:
		return "-rw-r--r--"
	case 0o755:
		return "-rwxr-xr-x"
	case 0o600:
		return "-rw-------"
	case 0o666:
		return "-rw-rw-rw-"
	case os.ModeDir | 0o755:
		return "drwxr-xr-x"
	case os.ModeDir | 0o700:
		return "drwx------"
	case os.ModeDir | 0o777:
		return "drwxrwxrwx"
	}
	return m.String()
}

// Name returns "TapeFs".
func (f *Fs) Name() string { return "TapeFs" }

// Create calls the inner Create and records it as OpenFile(name,
// O_RDWR|O_CREATE|O_TRUNC, 0666). It calls Create, not OpenFile, because
// not every afero.Fs makes them agree (afero.MemMapFs's Create leaves the
// mode 0).
func (f *Fs) Create(name string) (afero.File, error) {
	return f.open(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666, func() (afero.File, error) {
		return f.inner.Create(name)
	})
}

// Open calls the inner Open and records it as OpenFile(name, O_RDONLY, 0).
func (f *Fs) Open(name string) (afero.File, error) {
	return f.open(name, os.O_RDONLY, 0, func() (afero.File, error) {
		return f.inner.Open(name)
	})
}

// OpenFile opens name on the inner fs. A failure is recorded at once; a
// handle is recorded when it is closed (see the package doc). It calls
// the inner OpenFile even for O_RDONLY: afero.CopyOnWriteFs's Open of a
// directory in both layers lists both, its OpenFile the top layer's alone.
func (f *Fs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	return f.open(name, flag, perm, func() (afero.File, error) {
		return f.inner.OpenFile(name, flag, perm)
	})
}

// open makes the call of Create, Open or OpenFile on the inner fs (call)
// and records it as OpenFile(name, flag, perm).
func (f *Fs) open(name string, flag int, perm os.FileMode, call func() (afero.File, error)) (afero.File, error) {
	path, clean := f.relClean(name)
	args := openArgs{path: path, flag: flagString(flag)}
	if flag&os.O_CREATE != 0 {
		args.mode = perm.String()
	}
	var inner afero.File
	var err error
	if flag == os.O_RDONLY {
		inner, err = call()
	} else {
		done := f.rec.writing() // O_TRUNC changes the bytes
		inner, err = call()
		done()
	}
	if err != nil {
		rec := Record{Op: OpOpen, Path: args.path, Flag: args.flag, Mode: args.mode, Err: ErrorOutcome(err)}
		f.rec.emit(&rec)
		return nil, err
	}
	if !clean {
		name = filepath.Clean(name)
	}
	h := newFile(f, inner, name, flag, args)
	f.rec.track(h)
	return h.outer(), nil
}

func flagString(flag int) string {
	if flag == os.O_RDONLY {
		return "r"
	}
	var s string
	switch flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		s = "r"
	case os.O_WRONLY:
		s = "w"
	default:
		s = "rw"
	}
	for _, b := range []struct {
		bit  int
		name string
	}{{os.O_APPEND, "append"}, {os.O_CREATE, "create"}, {os.O_EXCL, "excl"}, {os.O_SYNC, "sync"}, {os.O_TRUNC, "trunc"}} {
		if flag&b.bit != 0 {
			s += "|" + b.name
		}
	}
	return s
}

func (f *Fs) simple(op, name string, err error, fill func(*Record)) error {
	rec := Record{Op: op, Path: f.rel(name), Err: ErrorOutcome(err)}
	if fill != nil {
		fill(&rec)
	}
	f.rec.emit(&rec)
	return err
}

// Mkdir forwards and records the call with the permission asked for.
func (f *Fs) Mkdir(name string, perm os.FileMode) error {
	return f.simple(OpMkdir, name, f.inner.Mkdir(name, perm), func(r *Record) { r.Mode = perm.String() })
}

// MkdirAll forwards and records the call with the permission asked for.
func (f *Fs) MkdirAll(name string, perm os.FileMode) error {
	return f.simple(OpMkdirAll, name, f.inner.MkdirAll(name, perm), func(r *Record) { r.Mode = perm.String() })
}

// Remove forwards and records the call.
func (f *Fs) Remove(name string) error {
	err := f.inner.Remove(name)
	if err == nil {
		f.rec.removed(f, filepath.Clean(name))
	}
	return f.simple(OpRemove, name, err, nil)
}

// RemoveAll forwards and records the call.
func (f *Fs) RemoveAll(name string) error {
	err := f.inner.RemoveAll(name)
	if err == nil {
		f.rec.removed(f, filepath.Clean(name))
	}
	return f.simple(OpRemoveAll, name, err, nil)
}

// Rename forwards and records the call; open handles of the old name
// follow the rename for their read-backs, and those of the new name lose
// it (their record's to is OutsidePath).
func (f *Fs) Rename(oldname, newname string) error {
	err := f.inner.Rename(oldname, newname)
	if err == nil {
		f.rec.renamed(f, filepath.Clean(oldname), filepath.Clean(newname))
	}
	return f.simple(OpRename, oldname, err, func(r *Record) { r.To = f.rel(newname) })
}

// Stat forwards and records the call with the mode (and size of a
// regular file) it returned.
func (f *Fs) Stat(name string) (os.FileInfo, error) {
	fi, err := f.inner.Stat(name)
	// Not through simple, nor through a Record (see emitStat): Stat is the
	// most frequent call.
	f.rec.emitStat(OpStat, f.rel(name), fi, err, nil)
	return fi, err
}

// LstatIfPossible calls the inner Lstater, or Stat (reporting false) when
// the inner file system has none.
func (f *Fs) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	var fi os.FileInfo
	var ok bool
	var err error
	if l, isL := f.inner.(afero.Lstater); isL {
		fi, ok, err = l.LstatIfPossible(name)
	} else {
		fi, err = f.inner.Stat(name)
	}
	f.rec.emitStat(OpLstat, f.rel(name), fi, err, nil)
	return fi, ok, err
}

// SymlinkIfPossible calls the inner Linker, or fails with an *os.LinkError
// wrapping afero.ErrNoSymlink when the inner file system has none.
func (f *Fs) SymlinkIfPossible(oldname, newname string) error {
	var err error
	if l, ok := f.inner.(afero.Linker); ok {
		err = l.SymlinkIfPossible(oldname, newname)
	} else {
		err = &os.LinkError{Op: "symlink", Old: oldname, New: newname, Err: afero.ErrNoSymlink}
	}
	return f.simple(OpSymlink, newname, err, func(r *Record) { r.Target = f.target(oldname) })
}

// Link calls the inner file system's Link(oldname, newname string) error
// (as cowfs's overlayfs.Fs has: afero has no interface for hard links), or fails
// with an *os.LinkError wrapping [errors.ErrUnsupported] when it has none;
// it records the call as a link record from the old name to the new.
func (f *Fs) Link(oldname, newname string) error {
	var err error
	if l, ok := f.inner.(interface {
		Link(oldname, newname string) error
	}); ok {
		err = l.Link(oldname, newname)
	} else {
		err = &os.LinkError{Op: "link", Old: oldname, New: newname, Err: errors.ErrUnsupported}
	}
	return f.simple(OpLink, oldname, err, func(r *Record) { r.To = f.rel(newname) })
}

// ReadlinkIfPossible calls the inner LinkReader, or fails with an
// *os.PathError wrapping afero.ErrNoReadlink when the inner file system has
// none.
func (f *Fs) ReadlinkIfPossible(name string) (string, error) {
	var t string
	var err error
	if l, ok := f.inner.(afero.LinkReader); ok {
		t, err = l.ReadlinkIfPossible(name)
	} else {
		err = &os.PathError{Op: "readlink", Path: name, Err: afero.ErrNoReadlink}
	}
	f.simple(OpReadlink, name, err, func(r *Record) {
		if err == nil {
			r.Target = f.target(t)
		}
	})
	return t, err
}

// Chmod forwards and records the call with the mode asked for.
func (f *Fs) Chmod(name string, mode os.FileMode) error {
	return f.simple(OpChmod, name, f.inner.Chmod(name, mode), func(r *Record) { r.Mode = mode.String() })
}

// Chown forwards and records the call with uid and gid.
func (f *Fs) Chown(name string, uid, gid int) error {
	return f.simple(OpChown, name, f.inner.Chown(name, uid, gid), func(r *Record) { r.UID, r.GID = &uid, &gid })
}

// Chtimes forwards and records the call with both times in UTC.
func (f *Fs) Chtimes(name string, atime, mtime time.Time) error {
	return f.simple(OpChtimes, name, f.inner.Chtimes(name, atime, mtime), func(r *Record) {
		r.Atime = atime.UTC().Format(time.RFC3339Nano)
		r.Mtime = mtime.UTC().Format(time.RFC3339Nano)
	})
}
