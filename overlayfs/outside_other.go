//go:build !linux

package overlayfs

import "os"

// Without openat2 and /proc, outside writes act on the host path as the
// resolver left it (see outside_linux.go for what Linux guarantees more).

const maxRelook = 0

func openOutside(host string, flag int, perm os.FileMode) (*os.File, bool, error) {
	f, err := os.OpenFile(host, flag, perm)
	return f, false, err
}

func metaOutside(host string, set func(p string) error) (bool, error) { return false, set(host) }

func entryOutside(host string, do func(p string) error) error { return do(host) }

func (sh *shared) treeHoldsRoot(string) bool { return false }
