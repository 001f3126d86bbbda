//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x)

package overlayfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lstatBuf bounds the host paths lstatHost passes from the stack; longer
// ones go through os.Lstat.
const lstatBuf = 512

// atFDCWD is AT_FDCWD as a system call argument.
const atFDCWD = ^uintptr(-unix.AT_FDCWD - 1)

// lstatHost is os.Lstat of a host path with one allocation where os makes
// two: the NUL-terminated copy of the path os makes on the heap is made
// on the stack, and the result is a lowerInfo (what listings give) filled
// by the kernel in place. The info's Name, Mode, ModTime, Size and Sys are
// os's. os.SameFile does not know a lowerInfo: compare lower infos with
// sameLower.
func lstatHost(host string) (fs.FileInfo, error) {
	if strings.IndexByte(host, 0) >= 0 {
		return os.Lstat(host)
	}
	return lstatNamed(host, filepath.Base(host))
}

// lstatNamed is lstatHost of a host path that holds no NUL (a path the
// layer made of a name resolveName checked), named name in its info
// (filepath.Base(host): the caller has it at hand).
func lstatNamed(host, name string) (fs.FileInfo, error) {
	if len(host) >= lstatBuf {
		return os.Lstat(host)
	}
	var buf [lstatBuf]byte
	copy(buf[:], host)
	fi := &lowerInfo{name: name}
	for {
		_, _, e := syscall.Syscall6(unix.SYS_NEWFSTATAT, atFDCWD, uintptr(unsafe.Pointer(&buf[0])),
			uintptr(unsafe.Pointer(&fi.st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
		switch e {
		case 0:
			return fi, nil
		case syscall.EINTR:
			continue
		}
		return nil, &fs.PathError{Op: "lstat", Path: host, Err: e}
	}
}

// openLower is os.OpenFile(host, flag, 0) for reading a lower file, in two
// system calls where os makes six: os.OpenFile puts a descriptor in the
// netpoller (fcntl to set O_NONBLOCK, epoll_ctl, which refuses a regular
// file or a directory, and fcntl twice to clear O_NONBLOCK again);
// os.NewFile of a blocking descriptor leaves it out (one fcntl to see that
// it is blocking), as os ends up leaving a regular file or a directory.
// A FIFO or a character device goes to the netpoller as os puts it there
// (see newLowerFile).
func openLower(host string, flag int) (*os.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND|syscall.O_NONBLOCK) != 0 {
		return os.OpenFile(host, flag, 0)
	}
	for {
		fd, err := syscall.Open(host, flag|syscall.O_CLOEXEC, 0)
		switch err {
		case nil:
			return newLowerFile(fd, host), nil
		case syscall.EINTR:
			continue
		}
		return nil, &fs.PathError{Op: "open", Path: host, Err: err}
	}
}

// newLowerFile wraps fd, which openLower opened blocking, as os.OpenFile
// would: a FIFO or a character device (a terminal) goes to the netpoller,
// so that read deadlines work and a Close ends a read blocked in another
// goroutine; one fstat tells them from regular files and directories,
// which stay blocking and out of the poller.
func newLowerFile(fd int, host string) *os.File {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO && st.Mode&syscall.S_IFMT != syscall.S_IFCHR {
		return os.NewFile(uintptr(fd), host)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		return os.NewFile(uintptr(fd), host)
	}
	f := os.NewFile(uintptr(fd), host) // non-blocking: os registers it with the poller
	if f.SetReadDeadline(time.Time{}) == os.ErrNoDeadline {
		syscall.SetNonblock(fd, false) // the poller refused it (as os: blocking again)
	}
	return f
}
