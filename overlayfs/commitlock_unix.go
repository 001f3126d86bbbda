//go:build unix

package overlayfs

import (
	"errors"
	"syscall"
)

// rootLock is a held commit lock: an flock on an open descriptor of the
// root directory. The kernel drops it when the descriptor is closed,
// which a dying process does too: a journal whose root nobody holds
// locked has lost its owner.
type rootLock struct{ fd int }

// lockRoot takes root's commit lock: exclusive for Commit and Recover,
// shared for New waiting out a commit in progress. With wait unset it
// fails with errCommitBusy where another holder has it.
func lockRoot(root string, exclusive, wait bool) (*rootLock, error) {
	fd, err := ignoringEINTR(func() (int, error) {
		return syscall.Open(root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if !wait {
		how |= syscall.LOCK_NB
	}
	for {
		err = syscall.Flock(fd, how)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrCommitInProgress
		}
		return nil, err
	}
	return &rootLock{fd: fd}, nil
}

// unlock releases the lock.
func (l *rootLock) unlock() {
	if l != nil {
		syscall.Close(l.fd)
	}
}

func ignoringEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if err != syscall.EINTR {
			return n, err
		}
	}
}
