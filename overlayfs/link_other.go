//go:build !unix

package overlayfs

import (
	"io/fs"
	"syscall"
)

// errPerm is link's error for a directory.
const errPerm = syscall.EPERM

// unlinkedInfo is fi: no link count to report here.
func unlinkedInfo(fi fs.FileInfo) fs.FileInfo { return fi }

// nlinkInfo is fi: no link count to report here.
func nlinkInfo(fi fs.FileInfo, _ uint32) fs.FileInfo { return fi }

// lowerLinkID reports no links: the lower's FileInfo carries no link count
// here.
func lowerLinkID(fs.FileInfo) (devIno, uint64) { return devIno{}, 0 }
