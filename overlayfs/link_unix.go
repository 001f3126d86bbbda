//go:build unix

package overlayfs

import (
	"io/fs"
	"syscall"
)

// errPerm is link's error for a directory.
const errPerm = syscall.EPERM

// unlinkedInfo reports a lower file's FileInfo with a link count of 0: the
// view removed the last name of the file a handle has open.
func unlinkedInfo(fi fs.FileInfo) fs.FileInfo {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi
	}
	c := *st
	c.Nlink = 0
	return sysInfo{fi, &c}
}

// nlinkInfo reports a lower directory's FileInfo with the link count k.
func nlinkInfo(fi fs.FileInfo, k uint32) fs.FileInfo {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi
	}
	c := *st
	setNlink(&c.Nlink, k)
	return sysInfo{fi, &c}
}

// setNlink sets a Stat_t's Nlink, uint64, uint32 or uint16 by platform.
func setNlink[T ~uint16 | ~uint32 | ~uint64](p *T, k uint32) { *p = T(k) }

// lowerLinkID returns a lower file's device and inode, and its link count.
func lowerLinkID(fi fs.FileInfo) (devIno, uint64) {
	if fi == nil {
		return devIno{}, 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return devIno{}, 0
	}
	return devIno{dev: uint64(st.Dev), ino: uint64(st.Ino)}, uint64(st.Nlink)
}
