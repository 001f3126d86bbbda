package kernel

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// What the quota tmpfs holds that is not the layer's (calibrated against
// a plain run in a tmpfs of the quota's size, TestRunQuota): inodes for
// its root, the upper and work directories, the kernel's work/work and
// the one more the overlay mount takes, and the owner file beside the
// upper (see writeOwner), which also takes a page.
const (
	quotaSlackInodes = 6
	quotaSlackBytes  = 4096
)

// quotaDir returns the directory to hold a run's upper and work
// directories: tmp, or for an Fs with [overlayfs.WithQuota] a tmpfs
// mounted at tmp/quota with the quota's size= and nr_inodes= (plus the
// inodes of those directories), so that a command filling it sees
// ENOSPC and short writes and the layer imports what it managed to write.
// The upper holds the whole layer (Materialize writes it there), as the
// quota counts it. release unmounts it. Mounting needs CAP_SYS_ADMIN in
// the caller's mount namespace: without it, Run with a quota fails rather
// than run the command unbounded.
func quotaDir(f *overlayfs.Fs, tmp string) (dir string, release func(), err error) {
	bytes, inodes, ok := f.Quota()
	if !ok || bytes == 0 && inodes == 0 {
		return tmp, func() {}, nil
	}
	dir = filepath.Join(tmp, "quota")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", nil, err
	}
	nr := int64(0) // tmpfs: no limit
	if inodes > 0 {
		nr = inodes + quotaSlackInodes
	}
	size := int64(0) // tmpfs: no limit
	if bytes > 0 {
		size = bytes + quotaSlackBytes
	}
	data := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", size, nr)
	if err := unix.Mount("cowfs-quota", dir, "tmpfs", unix.MS_NODEV|unix.MS_NOSUID, data); err != nil {
		return "", nil, fmt.Errorf("kernel: Run: the quota's tmpfs (%s): %w", data, err)
	}
	return dir, func() { _ = unix.Unmount(dir, unix.MNT_DETACH) }, nil
}
