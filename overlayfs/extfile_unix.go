//go:build unix

package overlayfs

import (
	"os"
	"syscall"
)

// dupFile returns a new *os.File on the same open file description.
func dupFile(fh *os.File) (*os.File, error) {
	rc, err := fh.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var derr error
	if err := rc.Control(func(fd uintptr) {
		syscall.ForkLock.RLock()
		nfd, derr = syscall.Dup(int(fd))
		if derr == nil {
			syscall.CloseOnExec(nfd)
		}
		syscall.ForkLock.RUnlock()
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, os.NewSyscallError("dup", derr)
	}
	return os.NewFile(uintptr(nfd), fh.Name()), nil
}
