package overlayfs_test

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// sysOwner: Windows FileInfo carries no owner.
func sysOwner(fs.FileInfo) (uid, gid uint32, ok bool) { return 0, 0, false }

// sysAllocated: Windows FileInfo does not say what is allocated.
func sysAllocated(fs.FileInfo) (int64, bool) { return 0, false }

// mkfifo and mksock: Windows has neither file type.
func mkfifo(string) error { return errors.ErrUnsupported }
func mksock(string) error { return errors.ErrUnsupported }

// lutimes sets the times of p; Windows follows a symlink here.
func lutimes(p string, tm time.Time) error { return os.Chtimes(p, tm, tm) }

// setUmask: Windows has no umask.
func setUmask(int) int { return 0 }

func sysNlinkOf(fs.FileInfo) (uint64, bool) { return 0, false }
