//go:build unix

package overlayfs

import (
	"io/fs"
	"syscall"
)

// deviceOf returns the device a lower file lies on, or 0 where unknown.
func deviceOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev)
	}
	return 0
}
