//go:build linux || darwin

package tape

import (
	"os"
	"syscall"
)

// keyOf returns fi's version key when fi comes from a real file system
// (a *syscall.Stat_t with an inode number) and describes a regular file.
func keyOf(fi os.FileInfo) (versionKey, bool) {
	if fi == nil || !fi.Mode().IsRegular() {
		return versionKey{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Ino == 0 {
		return versionKey{}, false
	}
	m, c := statTimes(st)
	return versionKey{dev: uint64(st.Dev), ino: uint64(st.Ino), size: st.Size, mtime: m, ctime: c}, true
}
