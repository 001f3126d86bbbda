//go:build unix

// Package unixmode converts between io/fs's FileMode and the mode bits of
// the Unix system calls (st_mode, chmod, open, mknod), as package os does.
package unixmode

import (
	"io/fs"
	"syscall"
)

// Perm returns the permission bits of m with its setuid, setgid and
// sticky bits, as chmod(2) and open(2) take them (os's syscallMode).
func Perm(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= syscall.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		u |= syscall.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		u |= syscall.S_ISVTX
	}
	return u
}

// Mode returns st_mode for m: Perm and the file type bits (a regular file
// for a mode without a type bit).
func Mode(m fs.FileMode) uint32 {
	u := Perm(m)
	switch {
	case m.IsDir():
		u |= syscall.S_IFDIR
	case m&fs.ModeSymlink != 0:
		u |= syscall.S_IFLNK
	case m&fs.ModeNamedPipe != 0:
		u |= syscall.S_IFIFO
	case m&fs.ModeSocket != 0:
		u |= syscall.S_IFSOCK
	case m&fs.ModeCharDevice != 0:
		u |= syscall.S_IFCHR
	case m&fs.ModeDevice != 0:
		u |= syscall.S_IFBLK
	default:
		u |= syscall.S_IFREG
	}
	return u
}

// FileMode converts st_mode as os's Stat does: type, permission, setuid,
// setgid and sticky bits.
func FileMode(mode uint32) fs.FileMode {
	m := fs.FileMode(mode & 0o777)
	switch mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
