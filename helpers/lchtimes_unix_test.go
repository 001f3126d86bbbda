//go:build unix

package helpers_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// lchtimes sets the times of name itself, a symlink.
func lchtimes(t *testing.T, name string, tm time.Time) {
	t.Helper()
	ts := unix.NsecToTimespec(tm.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
}
