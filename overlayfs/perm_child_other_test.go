//go:build !unix

package overlayfs_test

// permChild is the os side of the AsUser differential, which runs on
// unix only.
func permChild(string) int { return 2 }

// permChildEnv names the AsUser differential's child (see the unix file).
const permChildEnv = "COWFS_PERM_CHILD"
