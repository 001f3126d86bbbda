//go:build !unix

package helpers

import (
	"os"
	"time"
)

// lchtimes sets both times of p; the times of a symlink itself are left as
// they are where the platform offers no lutimes.
func lchtimes(p string, link bool, tm time.Time) error {
	if link {
		return nil
	}
	return os.Chtimes(p, tm, tm)
}
