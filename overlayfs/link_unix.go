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
