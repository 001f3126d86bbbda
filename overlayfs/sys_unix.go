//go:build unix

package overlayfs

import (
	"io/fs"
	"os"
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
	errFileTooBig  = syscall.EFBIG
	errNoDevice    = syscall.ENXIO

	oNoFollow  = syscall.O_NOFOLLOW
	oDirectory = syscall.O_DIRECTORY
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

// readFileSized reads a lower file whose size is known from its Lstat, in
// three system calls (os.ReadFile needs five: it stats, and reads to EOF).
// The lower must not change while in use, so the size is trusted; a file
// found shorter is returned as read. The buffer has room for spare more
// bytes, so that a write after the load does not copy it again.
func readFileSized(host string, size int64, spare int) ([]byte, error) {
	fd, err := syscall.Open(host, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: host, Err: err}
	}
	defer syscall.Close(fd)
	buf := make([]byte, size, size+int64(spare))
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, os.NewSyscallError("read", err)
		}
		if m == 0 {
			break
		}
		n += m
	}
	return buf[:n], nil
}

// swapUmask reads the umask by setting and restoring it.
func swapUmask() fs.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return fs.FileMode(m) & fs.ModePerm
}
