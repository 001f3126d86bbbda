//go:build unix

package helpers

import (
	"os"
	"syscall"
)

// ownerOf returns the owner and group of the directory root.
func ownerOf(root string) (uid, gid int, err error) {
	fi, err := os.Stat(root)
	if err != nil {
		return 0, 0, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid), nil
}
