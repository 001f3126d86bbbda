//go:build unix

package overlayfs

import (
	"io/fs"
	"syscall"
)

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

	oNoFollow = syscall.O_NOFOLLOW
)

// owner returns the uid and gid recorded in a lower FileInfo.
func owner(fi fs.FileInfo) (uid, gid int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}

// getwd returns the working directory with one system call (os.Getwd
// consults $PWD first, which costs two stats).
func getwd() (string, error) { return syscall.Getwd() }
