//go:build !unix

package helpers

import (
	"errors"
	"fmt"
)

// ownerOf returns the owner and group of the directory root: files have
// none here.
func ownerOf(root string) (uid, gid int, err error) {
	return 0, 0, fmt.Errorf("owner of %s: %w", root, errors.ErrUnsupported)
}
