package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Owner records. Every temporary directory of Run and every mount made by
// Mount carries a small file whose flock(2) lock its owner holds while it
// uses them. The kernel drops the lock when the owner dies, however it
// dies, so a lock that can be taken means the owner is gone and what the
// record guards may be reclaimed ([Cleanup]). The file also names the
// owner's pid and start time, for people.

// ownerRecordName is the record inside each of Run's temporary directories.
const ownerRecordName = ".cowfs-owner"

// mountRecordSuffix names a mount's record, beside its upper directory:
// UPPER.cowfs-owner.
const mountRecordSuffix = ".cowfs-owner"

// ownerLock is a held owner record.
type ownerLock struct {
	f    *os.File
	path string
}

// createOwner creates the owner record at path and takes its lock.
func createOwner(path, what string) (*ownerLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(path)
		return nil, &fs.PathError{Op: "flock", Path: path, Err: err}
	}
	fmt.Fprintf(f, "cowfs owner pid=%d start=%d\n%s\n", os.Getpid(), processStart(os.Getpid()), what)
	return &ownerLock{f: f, path: path}, nil
}

// release drops the lock, removing the record first when remove is set.
func (o *ownerLock) release(remove bool) {
	if o == nil {
		return
	}
	if remove {
		os.Remove(o.path)
	}
	o.f.Close()
}

// lockAbandoned takes the lock of the owner record at path when its owner
// is gone. It reports false, with no error, when the record does not exist
// or a live process holds it.
func lockAbandoned(path string) (*ownerLock, bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ELOOP) { // a symlink is no record
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, false, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, false, nil
		}
		return nil, false, &fs.PathError{Op: "flock", Path: path, Err: err}
	}
	return &ownerLock{f: f, path: path}, true, nil
}

// ownedTempDir makes a temporary directory under parent that carries an
// owner record; done removes the directory, then drops the lock.
func ownedTempDir(parent, pattern string) (dir string, done func(), err error) {
	dir, err = os.MkdirTemp(parent, pattern)
	if err != nil {
		return "", nil, err
	}
	own, err := createOwner(filepath.Join(dir, ownerRecordName), "run "+dir)
	if err != nil {
		os.Remove(dir)
		return "", nil, err
	}
	return dir, func() {
		removeTree(dir)
		own.release(false)
	}, nil
}

// processStart is a process's start time in clock ticks since boot (field
// 22 of /proc/PID/stat), which tells a reused pid from the original.
func processStart(pid int) uint64 {
	f := procStat(pid)
	// f[0] is field 3, so field 22 is f[19].
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}
