//go:build !unix

package overlayfs

import (
	"io/fs"
	"syscall"
)

// errPerm is link's error for a directory.
const errPerm = syscall.EPERM

// lowerLinkID reports no links: the lower's FileInfo carries no link count
// here.
func lowerLinkID(fs.FileInfo) (devIno, uint64) { return devIno{}, 0 }
