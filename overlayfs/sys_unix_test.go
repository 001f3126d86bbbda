//go:build unix

package overlayfs_test

import (
	"io/fs"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sysOwner returns the uid and gid a FileInfo carries in Sys().
func sysOwner(fi fs.FileInfo) (uid, gid uint32, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Uid, st.Gid, true
}

// sysNlinkOf returns the link count in fi's Sys().
func sysNlinkOf(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

// sysAllocated returns the bytes the file system allocated for a file.
func sysAllocated(fi fs.FileInfo) (int64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Blocks * 512, true
}

// mkfifo makes a FIFO at p, mksock a socket inode (no listener).
func mkfifo(p string) error { return unix.Mkfifo(p, 0o600) }
func mksock(p string) error { return unix.Mknod(p, unix.S_IFSOCK|0o600, 0) }

// lutimes sets both times of p without following a symlink.
func lutimes(p string, tm time.Time) error {
	ts := unix.NsecToTimespec(tm.UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

func setUmask(mask int) int { return syscall.Umask(mask) }
