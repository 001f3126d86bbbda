package overlayfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/afero"
)

// WithFaults makes the Fs call inject before each operation, with the
// operation's name as os spells it in *fs.PathError.Op and the name the
// caller passed. A nil result lets the operation run; any other error is
// the operation's error, and the operation has no effect.
//
// The operations and their names: Open, Create and OpenFile "open"; Stat
// "stat"; Lstat "lstat"; Mkdir "mkdir" (MkdirAll calls Stat and Mkdir on
// each missing directory, as os.MkdirAll does, and each call is injected);
// Remove and RemoveAll "remove"; Rename "rename", SymlinkIfPossible
// "symlink" and Link "link", which are given the new name (the path they
// create); ReadlinkIfPossible "readlink"; Chmod "chmod"; Chown "chown";
// Chtimes "chtimes". On a handle, with the name it was opened with: Read
// and ReadAt "read"; Write, WriteAt and WriteString "write"; Seek "seek";
// Stat "stat"; Readdir, Readdirnames and ReadDir "readdirent"; Sync
// "sync"; Truncate "truncate"; Close "close" (an injected Close error
// still closes the handle, as close(2) does).
//
// The error comes back as os gives it: an *fs.PathError with that Op and
// the caller's name, or an *os.LinkError with both names for rename,
// symlink and link, wrapping what inject returned (so errors.Is(err,
// syscall.EIO) holds for an injected syscall.EIO). An inject that returns
// an *fs.PathError or *os.LinkError itself has it returned as it is.
//
// A short read or write is a [ShortIO] returned for "read" or "write": the
// first N bytes are transferred (as the operation would), then the call
// returns N and its Err. For other operations a ShortIO is its Err.
//
// WithFaults given more than once calls each injector in the order given;
// the first error wins. A nil inject is ignored.
//
// inject is called from the goroutine doing the operation, without any
// lock of the Fs held, so it may use the Fs (and must be safe for
// concurrent use if the Fs is). Handles wrap the overlay's own when
// faults are on (io.Copy into one goes through its Write); without
// WithFaults nothing is called and handles are not wrapped. The tape
// records an injected failure like any other outcome, since it sees the
// error the Fs returns.
func WithFaults(inject func(op, name string) error) Option {
	return func(o *options) {
		prev := o.faults
		switch {
		case inject == nil:
		case prev == nil:
			o.faults = inject
		default:
			o.faults = func(op, name string) error {
				if err := prev(op, name); err != nil {
					return err
				}
				return inject(op, name)
			}
		}
	}
}

// ShortIO, returned by a [WithFaults] injector for a "read" or "write",
// makes the operation transfer its first N bytes, then fail with Err
// (N larger than the buffer transfers the whole buffer and still fails).
// Err nil means io.ErrUnexpectedEOF for a read and io.ErrShortWrite for a
// write, as a Reader or Writer reports a short transfer.
type ShortIO struct {
	N   int
	Err error
}

func (s ShortIO) Error() string {
	return fmt.Sprintf("short transfer of %d bytes: %v", s.N, s.Err)
}

// Unwrap returns Err.
func (s ShortIO) Unwrap() error { return s.Err }

// fault calls the injector for op on name; a non-nil result is the
// operation's error, shaped as os gives it.
func (s *shared) fault(op, name string) error {
	if s.opts.faults == nil {
		return nil // inlined: without WithFaults an operation pays this check
	}
	return s.inject(op, name)
}

func (s *shared) inject(op, name string) error {
	return faultErr(op, name, s.opts.faults(op, name))
}

// faultLink is fault for an operation on two names, given the new one.
func (s *shared) faultLink(op, oldname, newname string) error {
	if s.opts.faults == nil {
		return nil
	}
	return s.injectLink(op, oldname, newname)
}

func (s *shared) injectLink(op, oldname, newname string) error {
	err := s.opts.faults(op, newname)
	if err == nil || isShaped(err) {
		return err
	}
	return &os.LinkError{Op: op, Old: oldname, New: newname, Err: bare(err)}
}

// faultErr shapes an injected error as os's error for op on name.
func faultErr(op, name string, err error) error {
	if err == nil || isShaped(err) {
		return err
	}
	return &fs.PathError{Op: op, Path: name, Err: bare(err)}
}

// bare is the error a ShortIO stands for where no bytes move.
func bare(err error) error {
	var s ShortIO
	if errors.As(err, &s) && s.Err != nil {
		return s.Err
	}
	return err
}

func isShaped(err error) bool {
	var pe *fs.PathError
	var le *os.LinkError
	return errors.As(err, &pe) || errors.As(err, &le)
}

// faulty wraps a handle when faults are on.
func (s *shared) faulty(h afero.File, name string, err error) (afero.File, error) {
	if err != nil || s.opts.faults == nil {
		return h, err
	}
	return &faultFile{f: h, name: name, inject: s.opts.faults}, nil
}

var (
	_ afero.File      = (*faultFile)(nil)
	_ fs.ReadDirFile  = (*faultFile)(nil)
	_ io.StringWriter = (*faultFile)(nil)
	_ io.ReaderFrom   = (*faultFile)(nil)
	_ io.WriterTo     = (*faultFile)(nil)
)

// faultFile is a handle of an Fs with WithFaults: each method asks the
// injector first. It forwards every method by hand (no embedded
// interface), and a test checks that it has every method of the
// overlay's handles, so that none bypasses the injector.
type faultFile struct {
	f      afero.File
	name   string
	inject func(op, name string) error
}

// short returns how many of n bytes a "read" or "write" may move and the
// error it ends with (nil: all of them, no error).
func (h *faultFile) short(op string, n int, dflt error) (int, error) {
	err := h.inject(op, h.name)
	if err == nil {
		return n, nil
	}
	var s ShortIO
	if errors.As(err, &s) && !isShaped(err) {
		e := s.Err
		if e == nil {
			return min(max(s.N, 0), n), dflt
		}
		return min(max(s.N, 0), n), &fs.PathError{Op: op, Path: h.name, Err: e}
	}
	return 0, faultErr(op, h.name, err)
}

func (h *faultFile) Name() string { return h.f.Name() }

func (h *faultFile) Read(p []byte) (int, error) {
	n, ierr := h.short("read", len(p), io.ErrUnexpectedEOF)
	if ierr == nil {
		return h.f.Read(p)
	}
	if n == 0 {
		return 0, ierr
	}
	m, err := h.f.Read(p[:n])
	if err != nil {
		return m, err
	}
	return m, ierr
}

func (h *faultFile) ReadAt(p []byte, off int64) (int, error) {
	n, ierr := h.short("read", len(p), io.ErrUnexpectedEOF)
	if ierr == nil {
		return h.f.ReadAt(p, off)
	}
	if n == 0 {
		return 0, ierr
	}
	m, err := h.f.ReadAt(p[:n], off)
	if err != nil {
		return m, err
	}
	return m, ierr
}

func (h *faultFile) Write(p []byte) (int, error) {
	n, ierr := h.short("write", len(p), io.ErrShortWrite)
	if ierr == nil {
		return h.f.Write(p)
	}
	if n == 0 {
		return 0, ierr
	}
	m, err := h.f.Write(p[:n])
	if err != nil {
		return m, err
	}
	return m, ierr
}

func (h *faultFile) WriteAt(p []byte, off int64) (int, error) {
	n, ierr := h.short("write", len(p), io.ErrShortWrite)
	if ierr == nil {
		return h.f.WriteAt(p, off)
	}
	if n == 0 {
		return 0, ierr
	}
	m, err := h.f.WriteAt(p[:n], off)
	if err != nil {
		return m, err
	}
	return m, ierr
}

func (h *faultFile) WriteString(s string) (int, error) { return h.Write([]byte(s)) }

// ReadFrom copies through Write, so that each chunk is injected.
func (h *faultFile) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(struct{ io.Writer }{h}, r)
}

// WriteTo copies through Read, so that each chunk is injected.
func (h *faultFile) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, struct{ io.Reader }{h})
}

func (h *faultFile) Seek(offset int64, whence int) (int64, error) {
	if err := faultErr("seek", h.name, h.inject("seek", h.name)); err != nil {
		return 0, err
	}
	return h.f.Seek(offset, whence)
}

func (h *faultFile) Stat() (fs.FileInfo, error) {
	if err := faultErr("stat", h.name, h.inject("stat", h.name)); err != nil {
		return nil, err
	}
	return h.f.Stat()
}

func (h *faultFile) Readdir(n int) ([]fs.FileInfo, error) {
	if err := faultErr("readdirent", h.name, h.inject("readdirent", h.name)); err != nil {
		return []fs.FileInfo{}, err
	}
	return h.f.Readdir(n)
}

func (h *faultFile) Readdirnames(n int) ([]string, error) {
	if err := faultErr("readdirent", h.name, h.inject("readdirent", h.name)); err != nil {
		return []string{}, err
	}
	return h.f.Readdirnames(n)
}

func (h *faultFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if err := faultErr("readdirent", h.name, h.inject("readdirent", h.name)); err != nil {
		return nil, err
	}
	return h.f.(fs.ReadDirFile).ReadDir(n)
}

func (h *faultFile) Sync() error {
	if err := faultErr("sync", h.name, h.inject("sync", h.name)); err != nil {
		return err
	}
	return h.f.Sync()
}

func (h *faultFile) Truncate(size int64) error {
	if err := faultErr("truncate", h.name, h.inject("truncate", h.name)); err != nil {
		return err
	}
	return h.f.Truncate(size)
}

// Close closes the handle even when the injector fails it, as close(2)
// releases the descriptor whatever it reports.
func (h *faultFile) Close() error {
	ierr := faultErr("close", h.name, h.inject("close", h.name))
	err := h.f.Close()
	if ierr != nil {
		return ierr
	}
	return err
}
