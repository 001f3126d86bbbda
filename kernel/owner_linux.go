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

// createOwner creates the owner record at path and takes its lock. The
// record appears under its name already locked (it is made under a
// temporary name and linked into place), so that no Cleanup can take it
// for a dead owner's in between. Like O_EXCL, it fails with an error
// matching fs.ErrExist when path exists.
func createOwner(path, what string) (*ownerLock, error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".cowfs-owner-new-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "flock", Path: f.Name(), Err: err}
	}
	fmt.Fprintf(f, "cowfs owner pid=%d start=%d\n%s\n", os.Getpid(), processStart(os.Getpid()), what)
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		f.Close()
		return nil, err
	}
	if err := os.Link(f.Name(), path); err != nil {
		f.Close()
		return nil, err
	}
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
	// The owner may have removed the record, and what it guarded, before
	// letting go of the lock: then there is nothing left to reclaim.
	fi, err1 := f.Stat()
	now, err2 := os.Lstat(path)
	if err1 != nil || err2 != nil || !os.SameFile(fi, now) {
		f.Close()
		return nil, false, nil
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
