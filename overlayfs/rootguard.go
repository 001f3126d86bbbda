package overlayfs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// reachesRoot reports whether host, a host path outside every root that an
// outside write (see AllowOutsideWrites) would remove or move, names one of
// the roots (through an alias such as a bind mount), or, with ancestors,
// a directory that holds one: acting on it would change the real root.
// Like the kernel, it follows every component but the last, and acts on
// "x/.." itself; trailing slashes are dropped as os.RemoveAll drops them.
// The comparison is by device and inode, so aliases of the root's
// ancestors are caught as well as their canonical paths.
func (sh *shared) reachesRoot(host string, ancestors bool) bool {
	p := strings.TrimRight(host, "/")
	if p == "" {
		p = "/"
	}
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() {
		return false // a root is a directory: nothing else holds one
	}
	for _, r := range sh.roots {
		for d := r; ; d = filepath.Dir(d) {
			if di, err := os.Stat(d); err == nil && os.SameFile(fi, di) {
				return true
			}
			if !ancestors || d == "/" {
				break
			}
		}
	}
	return false
}

// errRootBusy is the error of an outside write that would remove or move
// a root or a directory holding one: EBUSY, as the kernel says for a mount
// point, and for the same reason: the root is in use.
var errRootBusy = syscall.EBUSY
