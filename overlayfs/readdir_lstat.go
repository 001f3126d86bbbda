//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x)

package overlayfs

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lstatEntry lstats entry k of text (see lowerEntries) relative to the
// directory fd, as os's Readdir does, passing the name where it is: text
// has a zero byte after it, so no copy of it is made, unlike
// unix.Fstatat, which makes one per call.
func lstatEntry(fd int, text string, k keyed, st *unix.Stat_t) error {
	_, _, e := syscall.Syscall6(unix.SYS_NEWFSTATAT, uintptr(fd), uintptr(unsafe.Pointer(unsafe.StringData(text[k.idx:]))),
		uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
