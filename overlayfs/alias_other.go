//go:build !linux

package overlayfs

import (
	"io/fs"
	"os"
)

// lstatID is the outside walk's lstat. Identities are Linux's only here:
// no alias of a root is told apart (see alias.go).
func lstatID(p string) (hostKind, dirID, error) {
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return hostOther, dirID{}, err
	case fi.IsDir():
		return hostDir, dirID{}, nil
	case fi.Mode()&fs.ModeSymlink != 0:
		return hostSymlink, dirID{}, nil
	}
	return hostOther, dirID{}, nil
}

func statID(string) (dirID, bool)                          { return dirID{}, false }
func mountTable() []byte                                   { return nil }
func mountOf([]byte, uint64) (root, point string, ok bool) { return "", "", false }
