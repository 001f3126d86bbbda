//go:build unix

package helpers

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lchtimes sets both times of p, of the symlink itself when link is true.
func lchtimes(p string, link bool, tm time.Time) error {
	if !link {
		return os.Chtimes(p, tm, tm)
	}
	ts := unix.NsecToTimespec(tm.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lchtimes", Path: p, Err: err}
	}
	return nil
}
