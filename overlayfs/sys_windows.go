package overlayfs

import (
	"io/fs"
	"os"
	"syscall"
)

// Windows has no errno of its own for most of these; package syscall defines
// the POSIX names with values that errors.Is maps onto the fs sentinels, as
// os does on this platform.
const (
	errNotDir      = syscall.ENOTDIR
	errIsDir       = syscall.EISDIR
	errNotEmpty    = syscall.ENOTEMPTY
	errInval       = syscall.EINVAL
	errLoop        = syscall.ELOOP
	errBadFd       = syscall.EBADF
	errExist       = syscall.EEXIST
	errNoEnt       = syscall.ENOENT
	errXDev        = syscall.EXDEV
	errNameTooLong = syscall.ENAMETOOLONG
	errFileTooBig  = syscall.EFBIG
	errNoDevice    = syscall.ENXIO

	// Windows opens a symlink's target on open; the caller has already
	// resolved symlinks in the merged view, so nothing is lost.
	oNoFollow  = 0
	oDirectory = 0
)

// owner reports no owner: Windows FileInfo carries none.
func owner(fs.FileInfo) (uid, gid int) { return -1, -1 }

func getwd() (string, error) { return os.Getwd() }

// readFileSized reads a lower file; size is a hint on this platform.
func readFileSized(host string, _ int64, _ int) ([]byte, error) { return os.ReadFile(host) }

// swapUmask: Windows has no umask; os creates files with the mode asked for.
func swapUmask() fs.FileMode { return 0 }
