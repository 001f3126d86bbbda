package helpers

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cowfs/cowfs/overlayfs"
)

// The common failures, one line each. Each is an [overlayfs.Option], to
// pass to [OverlayOptions] (or to overlayfs.New); they combine, and
// combine with [overlayfs.WithFaults] (each injector is asked in turn).
// Names are matched cleaned ([filepath.Clean]) against the name the code
// under test passes: an absolute name matches that name, a relative one
// also any name ending in it after a separator ("config" matches
// "/tmp/root/config", "a/config" matches "/tmp/root/a/config"), so that a
// test can name a file before it knows its root; "" matches every name.

// FailWrite makes the nth write (counting from 1: Write, WriteAt,
// WriteString or a chunk of io.Copy) to name fail with EIO, as a disk
// error would: it writes nothing, and later writes succeed. Writes are
// counted over every handle on name.
func FailWrite(name string, n int) overlayfs.Option {
	var seen atomic.Int64
	return overlayfs.WithFaults(func(op, got string) error {
		if op == "write" && matches(name, got) && seen.Add(1) == int64(n) {
			return syscall.EIO
		}
		return nil
	})
}

// FailSync makes every Sync of a handle on name fail with EIO, the error
// fsync reports when the data could not be written back.
func FailSync(name string) overlayfs.Option {
	return overlayfs.WithFaults(func(op, got string) error {
		if op == "sync" && matches(name, got) {
			return syscall.EIO
		}
		return nil
	})
}

// FailRename makes every Rename onto newname fail with EIO, leaving both
// names as they were.
func FailRename(newname string) overlayfs.Option {
	return overlayfs.WithFaults(func(op, got string) error {
		if op == "rename" && matches(newname, got) {
			return syscall.EIO
		}
		return nil
	})
}

// DiskFullAfter fills the disk once the layer holds n bytes of file data:
// a write past it writes what fits and fails with ENOSPC, as on a full
// tmpfs. It is [overlayfs.WithQuota](n, 0): data is counted in 4 KiB
// pages (n is rounded up to a page), and inodes are not limited. With n
// zero (or less) every write fails with ENOSPC.
func DiskFullAfter(n int64) overlayfs.Option {
	if n <= 0 {
		return overlayfs.WithFaults(func(op, _ string) error {
			if op == "write" {
				return syscall.ENOSPC
			}
			return nil
		})
	}
	return overlayfs.WithQuota(n, 0)
}

func matches(want, got string) bool {
	if want == "" {
		return true
	}
	want, got = filepath.Clean(want), filepath.Clean(got)
	if want == got {
		return true
	}
	return !filepath.IsAbs(want) && strings.HasSuffix(got, string(filepath.Separator)+want)
}
