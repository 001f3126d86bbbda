//go:build !unix

package overlayfs_test

// permChild is the os side of the AsUser differential, which runs on
// unix only.
func permChild(string) int { return 2 }
