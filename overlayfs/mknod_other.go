//go:build !linux

package overlayfs

import (
	"errors"
	"io/fs"
	"os"
)

// mknodIn fails: committing FIFOs and sockets is implemented on Linux only.
func mknodIn(_ *os.Root, name string, _ bool) error {
	return &fs.PathError{Op: "mknod", Path: name, Err: errors.ErrUnsupported}
}
