package tape

import (
	"errors"
	"io"
	"io/fs"
	"syscall"

	"github.com/spf13/afero"
	"github.com/spf13/afero/mem"
)

// Outcomes of failed operations, recorded in Record.Err (FORMAT.md calls
// them error classes; the Go names say Outcome so that Class means only
// the comparison verdict). They are decided with errors.Is on the sentinel
// os would wrap, never from message text (which holds absolute paths and
// varies by platform).
const (
	OutcomeNotExist    = "not-exist"     // fs.ErrNotExist (ENOENT)
	OutcomeExist       = "exist"         // fs.ErrExist (EEXIST)
	OutcomeNotEmpty    = "not-empty"     // ENOTEMPTY
	OutcomePermission  = "permission"    // fs.ErrPermission (EACCES, EPERM)
	OutcomeNotDir      = "not-dir"       // ENOTDIR
	OutcomeIsDir       = "is-dir"        // EISDIR
	OutcomeInvalid     = "invalid"       // fs.ErrInvalid, EINVAL, afero's ErrOutOfRange (mem's too)
	OutcomeClosed      = "closed"        // fs.ErrClosed, afero's ErrFileClosed (mem's too), EBADF
	OutcomeLoop        = "loop"          // ELOOP
	OutcomeCrossDevice = "cross-device"  // EXDEV
	OutcomeNameTooLong = "name-too-long" // ENAMETOOLONG
	OutcomeNoSpace     = "no-space"      // ENOSPC
	OutcomeReadOnly    = "read-only"     // EROFS
	OutcomeUnsupported = "unsupported"   // errors.ErrUnsupported, afero.ErrNoSymlink, afero.ErrNoReadlink
	OutcomeEOF         = "eof"           // io.EOF, io.ErrUnexpectedEOF
	OutcomeOther       = "other"         // anything else
)

// ErrorOutcome returns the outcome recorded for err, "" for nil.
func ErrorOutcome(err error) string {
	if err == nil { // inlined at every call: most calls succeed
		return ""
	}
	return errorOutcome(err)
}

func errorOutcome(err error) string {
	switch {
	// ENOTEMPTY.Is(fs.ErrExist) is true, so it must come first.
	case errors.Is(err, syscall.ENOTEMPTY):
		return OutcomeNotEmpty
	case errors.Is(err, fs.ErrNotExist):
		return OutcomeNotExist
	case errors.Is(err, fs.ErrExist):
		return OutcomeExist
	case errors.Is(err, fs.ErrPermission):
		return OutcomePermission
	case errors.Is(err, syscall.ENOTDIR):
		return OutcomeNotDir
	case errors.Is(err, syscall.EISDIR):
		return OutcomeIsDir
	case errors.Is(err, syscall.ELOOP):
		return OutcomeLoop
	case errors.Is(err, syscall.EXDEV):
		return OutcomeCrossDevice
	case errors.Is(err, syscall.ENAMETOOLONG):
		return OutcomeNameTooLong
	case errors.Is(err, syscall.ENOSPC):
		return OutcomeNoSpace
	case errors.Is(err, syscall.EROFS):
		return OutcomeReadOnly
	// afero's in-memory files return the sentinels of package mem, which
	// are not afero's own.
	case errors.Is(err, fs.ErrClosed), errors.Is(err, afero.ErrFileClosed), errors.Is(err, mem.ErrFileClosed),
		errors.Is(err, syscall.EBADF):
		return OutcomeClosed
	case errors.Is(err, fs.ErrInvalid), errors.Is(err, syscall.EINVAL),
		errors.Is(err, afero.ErrOutOfRange), errors.Is(err, mem.ErrOutOfRange):
		return OutcomeInvalid
	case errors.Is(err, errors.ErrUnsupported), errors.Is(err, afero.ErrNoSymlink), errors.Is(err, afero.ErrNoReadlink):
		return OutcomeUnsupported
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return OutcomeEOF
	}
	return OutcomeOther
}
