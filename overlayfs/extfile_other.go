//go:build !unix

package overlayfs

import (
	"errors"
	"os"
)

// dupFile is not available here: PutEntry reads the content instead.
func dupFile(*os.File) (*os.File, error) { return nil, errors.ErrUnsupported }
