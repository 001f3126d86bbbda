package overlayfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// io.Copy between handles does what it does between *os.File handles on
// Linux (os's File.ReadFrom and File.WriteTo, zero_copy_linux.go and
// internal/poll's CopyFileRange). Unless the destination appends, its
// ReadFrom tries copy_file_range when the reader is a handle (or a
// *io.LimitedReader of one, whose limit it honours: a limit of 0 copies
// nothing and reads nothing). That fails before a byte is read: with
// ErrClosed when either handle is closed, EISDIR when either is a
// directory, EBADF when the source cannot be read or the destination
// cannot be written; where either end is not a regular file (a FIFO, a
// device) it falls back to a plain copy. The plain copy, what every other
// case does, fails at the first read or write that fails.

// copyEnd is a handle as one end of a copy: what copy_file_range looks
// at.
type copyEnd interface {
	copyState() (closed bool, mode fs.FileMode, readable, writable, appends bool)
}

// copySource is a handle as the source of a copy: only its Read shows (as
// os's fileWithoutWriteTo), and what copy_file_range looks at.
type copySource struct {
	io.Reader
	end copyEnd
}

func (s copySource) copyState() (bool, fs.FileMode, bool, bool, bool) { return s.end.copyState() }

// copyRange returns what copy_file_range decides for a copy from r into
// dst: handled with the error it gives (nil for a limit of 0), or not
// handled, where the plain copy gives what copy_file_range would.
func copyRange(dst copyEnd, r io.Reader) (handled bool, err error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if lr.N <= 0 {
			return true, nil
		}
		r = lr.R
	}
	src, ok := r.(copyEnd)
	if !ok {
		return false, nil
	}
	sclosed, smode, sreadable, _, _ := src.copyState()
	dclosed, dmode, _, dwritable, _ := dst.copyState()
	switch {
	case dclosed || sclosed:
		return true, os.ErrClosed
	case smode.IsDir() || dmode.IsDir():
		return true, os.NewSyscallError("copy_file_range", errIsDir)
	case !smode.IsRegular() || !dmode.IsRegular():
		return false, nil
	case !sreadable || !dwritable:
		return true, os.NewSyscallError("copy_file_range", errBadFd)
	}
	return false, nil
}

// readFrom is ReadFrom of the handle dst (written through w, named name).
func readFrom(dst copyEnd, w io.Writer, name string, r io.Reader) (int64, error) {
	if _, _, _, _, appnd := dst.copyState(); !appnd {
		if handled, err := copyRange(dst, r); handled {
			if err != nil {
				return 0, pathErr("write", name, err)
			}
			return 0, nil
		}
	}
	return io.Copy(plainWriter{w}, r)
}

// writeTo is WriteTo of the handle src (read through r).
func writeTo(src copyEnd, r io.Reader, w io.Writer) (int64, error) {
	return io.Copy(w, copySource{Reader: plainReader{r}, end: src})
}

// plainWriter hides a handle's ReadFrom from io.Copy.
type plainWriter struct{ io.Writer }

// plainReader hides a handle's WriteTo from io.Copy.
type plainReader struct{ io.Reader }

func (h *file) copyState() (bool, fs.FileMode, bool, bool, bool) {
	return h.closed.Load(), 0, h.readable(), h.writable(), h.appends()
}

// ReadFrom implements io.ReaderFrom as *os.File does.
func (h *file) ReadFrom(r io.Reader) (int64, error) { return readFrom(h, h, h.name, r) }

// WriteTo implements io.WriterTo as *os.File does.
func (h *file) WriteTo(w io.Writer) (int64, error) { return writeTo(h, h, w) }

func (d *dir) copyState() (bool, fs.FileMode, bool, bool, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed, fs.ModeDir, true, false, d.appnd
}

// ReadFrom implements io.ReaderFrom as *os.File does on a directory.
func (d *dir) ReadFrom(r io.Reader) (int64, error) { return readFrom(d, d, d.name, r) }

// WriteTo implements io.WriterTo as *os.File does on a directory.
func (d *dir) WriteTo(w io.Writer) (int64, error) { return writeTo(d, d, w) }

func (o *osFile) copyState() (bool, fs.FileMode, bool, bool, bool) {
	fi, err := o.File.Stat()
	var mode fs.FileMode
	if err == nil {
		mode = fi.Mode().Type()
	}
	acc := o.flag & (os.O_WRONLY | os.O_RDWR)
	return errors.Is(err, os.ErrClosed), mode, acc == os.O_RDONLY || acc == os.O_RDWR, acc == os.O_WRONLY || acc == os.O_RDWR, o.flag&os.O_APPEND != 0
}

// ReadFrom implements io.ReaderFrom as *os.File does.
func (o *osFile) ReadFrom(r io.Reader) (int64, error) { return readFrom(o, o, o.name, r) }

// WriteTo implements io.WriterTo, reading through the handle's own Read
// (which follows a copy-up made elsewhere).
func (o *osFile) WriteTo(w io.Writer) (int64, error) { return writeTo(o, o, w) }
