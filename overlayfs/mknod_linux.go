package overlayfs

import (
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// mknodIn creates a FIFO (or, with sock, a socket inode) at name beneath
// rt, through a descriptor of its parent opened in rt so that no symlink
// carries it outside. The mode is 0600 until a meta step sets the layer's.
func mknodIn(rt *os.Root, name string, sock bool) error {
	dir, err := rt.Open(filepath.Dir(name))
	if err != nil {
		return err
	}
	defer dir.Close()
	mode := uint32(unix.S_IFIFO | 0o600)
	if sock {
		mode = unix.S_IFSOCK | 0o600
	}
	if err := unix.Mknodat(int(dir.Fd()), filepath.Base(name), mode, 0); err != nil {
		return &fs.PathError{Op: "mknod", Path: name, Err: err}
	}
	return nil
}
