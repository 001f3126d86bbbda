package tape

import (
	"errors"
	"io"
	"io/fs"
	"syscall"

	"github.com/spf13/afero"
)

// Error classes recorded in Record.Err. They are decided with errors.Is on
// the sentinel os would wrap, never from message text (which holds absolute
// paths and varies by platform).
const (
	ClassNotExist    = "not-exist"     // fs.ErrNotExist (ENOENT)
	ClassExist       = "exist"         // fs.ErrExist (EEXIST)
	ClassNotEmpty    = "not-empty"     // ENOTEMPTY
	ClassPermission  = "permission"    // fs.ErrPermission (EACCES, EPERM)
	ClassNotDir      = "not-dir"       // ENOTDIR
	ClassIsDir       = "is-dir"        // EISDIR
	ClassInvalid     = "invalid"       // fs.ErrInvalid, EINVAL
	ClassClosed      = "closed"        // fs.ErrClosed, afero.ErrFileClosed, EBADF
	ClassLoop        = "loop"          // ELOOP
	ClassCrossDevice = "cross-device"  // EXDEV
	ClassNameTooLong = "name-too-long" // ENAMETOOLONG
	ClassNoSpace     = "no-space"      // ENOSPC
	ClassReadOnly    = "read-only"     // EROFS
	ClassUnsupported = "unsupported"   // errors.ErrUnsupported, afero.ErrNoSymlink, afero.ErrNoReadlink
	ClassEOF         = "eof"           // io.EOF, io.ErrUnexpectedEOF
	ClassOther       = "other"         // anything else
)

// ErrorClass returns the class of err, "" for nil.
func ErrorClass(err error) string {
	switch {
	case err == nil:
		return ""
	// ENOTEMPTY.Is(fs.ErrExist) is true, so it must come first.
	case errors.Is(err, syscall.ENOTEMPTY):
		return ClassNotEmpty
	case errors.Is(err, fs.ErrNotExist):
		return ClassNotExist
	case errors.Is(err, fs.ErrExist):
		return ClassExist
	case errors.Is(err, fs.ErrPermission):
		return ClassPermission
	case errors.Is(err, syscall.ENOTDIR):
		return ClassNotDir
	case errors.Is(err, syscall.EISDIR):
		return ClassIsDir
	case errors.Is(err, syscall.ELOOP):
		return ClassLoop
	case errors.Is(err, syscall.EXDEV):
		return ClassCrossDevice
	case errors.Is(err, syscall.ENAMETOOLONG):
		return ClassNameTooLong
	case errors.Is(err, syscall.ENOSPC):
		return ClassNoSpace
	case errors.Is(err, syscall.EROFS):
		return ClassReadOnly
	case errors.Is(err, fs.ErrClosed), errors.Is(err, afero.ErrFileClosed), errors.Is(err, syscall.EBADF):
		return ClassClosed
	case errors.Is(err, fs.ErrInvalid), errors.Is(err, syscall.EINVAL):
		return ClassInvalid
	case errors.Is(err, errors.ErrUnsupported), errors.Is(err, afero.ErrNoSymlink), errors.Is(err, afero.ErrNoReadlink):
		return ClassUnsupported
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ClassEOF
	}
	return ClassOther
}
