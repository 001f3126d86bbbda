//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x)

package overlayfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lstatBuf bounds the host paths lstatHost passes from the stack; longer
// ones go through os.Lstat.
const lstatBuf = 512

// atFDCWD is AT_FDCWD as a system call argument.
var atFDCWD = ^uintptr(-unix.AT_FDCWD - 1)

// lstatHost is os.Lstat of a host path with one allocation where os makes
// two: the NUL-terminated copy of the path os makes on the heap is made
// on the stack, and the result is a lowerInfo (what listings give) filled
// by the kernel in place. The info's Name, Mode, ModTime, Size and Sys are
// os's. os.SameFile does not know a lowerInfo: compare lower infos with
// sameLower.
func lstatHost(host string) (fs.FileInfo, error) {
	if len(host) >= lstatBuf || strings.IndexByte(host, 0) >= 0 {
		return os.Lstat(host)
	}
	var buf [lstatBuf]byte
	copy(buf[:], host)
	fi := &lowerInfo{name: filepath.Base(host)}
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
