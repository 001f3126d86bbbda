//go:build linux && !(amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x)

package overlayfs

import "golang.org/x/sys/unix"

// lstatEntry lstats entry k of text (see lowerEntries) relative to the
// directory fd, as os's Readdir does.
func lstatEntry(fd int, text string, k keyed, st *unix.Stat_t) error {
	return unix.Fstatat(fd, text[k.idx:k.end], st, unix.AT_SYMLINK_NOFOLLOW)
}
