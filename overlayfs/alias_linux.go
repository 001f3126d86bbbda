//go:build linux

package overlayfs

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lstatID is the outside walk's lstat: the component's kind and, for a
// directory, its identity. It is one statx, the system call os.Lstat's
// fstatat would be (which does not automount either), asking for the mount
// ID too.
func lstatID(p string) (hostKind, dirID, error) {
	var sx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_MNT_ID, &sx)
	if err != nil {
		return hostOther, dirID{}, &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	switch uint32(sx.Mode) & unix.S_IFMT {
	case unix.S_IFDIR:
		id := dirID{dev: unix.Mkdev(sx.Dev_major, sx.Dev_minor), ino: sx.Ino}
		if sx.Mask&unix.STATX_MNT_ID != 0 {
			id.mnt = sx.Mnt_id
		}
		return hostDir, id, nil
	case unix.S_IFLNK:
		return hostSymlink, dirID{}, nil
	}
	return hostOther, dirID{}, nil
}

// statID returns the identity of the directory at p, following symlinks;
// ok is false when it cannot be had.
func statID(p string) (dirID, bool) {
	var sx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, p, 0, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_MNT_ID, &sx) != nil {
		return dirID{}, false
	}
	id := dirID{dev: unix.Mkdev(sx.Dev_major, sx.Dev_minor), ino: sx.Ino}
	if sx.Mask&unix.STATX_MNT_ID != 0 {
		id.mnt = sx.Mnt_id
	}
	return id, true
}

// mountTable reads the process's mount table, for fsPath.
func mountTable() []byte {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return b
}

// mountOf returns the root (the directory of its file system that is
// mounted) and the mount point of the mount with ID id in a mount table
// in /proc/self/mountinfo's format.
func mountOf(table []byte, id uint64) (root, point string, ok bool) {
	want := strconv.FormatUint(id, 10) + " "
	for line := range strings.SplitSeq(string(table), "\n") {
		if !strings.HasPrefix(line, want) {
			continue
		}
		// mount ID, parent ID, major:minor, root, mount point, ...
		f := strings.Fields(line)
		if len(f) < 5 {
			return "", "", false
		}
		return unescapeMount(f[3]), unescapeMount(f[4]), true
	}
	return "", "", false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, \011,
// \012, \134).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
