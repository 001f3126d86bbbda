package overlayfs

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/cowfs/cowfs/internal/unixmode"
	"golang.org/x/sys/unix"
)

// Outside writes (AllowOutsideWrites) act on the host path the resolver
// produced: every symlink on the way expanded, so that a name reaching a
// root by any path was sent to the layer. Between that decision and the
// system call, a component could be swapped for a symlink into a root; so
// the host path is opened with openat2's RESOLVE_NO_SYMLINKS (and
// O_NOFOLLOW for its last component) and the operation acts through that
// descriptor: a symlink found there now (ELOOP) is never followed, the
// caller resolves the name again (relook) and the new resolution decides.

// maxRelook bounds how many times an outside write resolves its name
// again because a symlink appeared where the resolution saw none.
const maxRelook = 8

// openHost opens host without following any symlink on its way or at its
// end.
func openHost(host string, flag int, perm uint32) (int, error) {
	if flag&unix.O_CREAT == 0 && flag&unix.O_TMPFILE != unix.O_TMPFILE {
		// openat2 refuses a mode it would not use (open ignores it).
		// O_TMPFILE holds O_DIRECTORY's bit: O_DIRECTORY alone uses none.
		perm = 0
	}
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, host, &unix.OpenHow{
			Flags:   uint64(flag | unix.O_NOFOLLOW | unix.O_CLOEXEC),
			Mode:    uint64(perm),
			Resolve: unix.RESOLVE_NO_SYMLINKS,
		})
		switch err {
		case unix.EINTR, unix.EAGAIN:
			continue
		case unix.ENOSYS, unix.EPERM:
			// No openat2 (before Linux 5.6, or filtered): the last
			// component is still not followed.
			return unix.Open(host, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		}
		return fd, err
	}
}

// fdPath names the file open at fd through /proc: the kernel resolves it
// to that very file, whatever happened to its path since.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// openOutside opens host for an outside open with flag. relook reports a
// symlink where the resolution saw none: the caller resolves again,
// following it.
func openOutside(host string, flag int, perm os.FileMode) (f *os.File, relook bool, err error) {
	fd, err := openHost(host, flag, unixmode.Perm(perm))
	if err != nil {
		if err == unix.ELOOP && flag&unix.O_NOFOLLOW == 0 {
			return nil, true, &os.PathError{Op: "open", Path: host, Err: err}
		}
		return nil, false, &os.PathError{Op: "open", Path: host, Err: err}
	}
	return os.NewFile(uintptr(fd), host), false, nil
}

// metaOutside runs set (a chmod, chown or chtimes that follows symlinks)
// on the file at host through a descriptor of it; relook as openOutside.
func metaOutside(host string, set func(p string) error) (relook bool, err error) {
	fd, err := openHost(host, unix.O_PATH, 0)
	if err != nil {
		return err == unix.ELOOP, &os.PathError{Op: "open", Path: host, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, &os.PathError{Op: "stat", Path: host, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return true, &os.PathError{Op: "open", Path: host, Err: unix.ELOOP} // the last component, swapped
	}
	return false, set(fdPath(fd))
}

// entryOutside runs do on a name for host's last component in a
// descriptor of its parent, opened without following symlinks: the last
// component itself is do's to follow or not (mkdir, symlink, remove and
// rename never do). A symlink in the parent's path now fails with ELOOP.
func entryOutside(host string, do func(p string) error) error {
	dir, base := filepath.Split(host)
	if base == "" || base == "." || base == ".." || dir == "" {
		return do(host) // the kernel refuses to act on these anyway
	}
	fd, err := openHost(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	return do(filepath.Join(fdPath(fd), base))
}

// treeHoldsRoot reports whether the directory tree at host (not
// following symlinks) holds a root of the Fs or an alias of one or of one
// of its directories (a bind mount), compared by device, inode and mount
// ID: a RemoveAll or a Rename of it would act on the real root.
func (sh *shared) treeHoldsRoot(host string) bool {
	ids := sh.rootIDs()
	var walk func(p string, parentMnt uint64, depth int) bool
	walk = func(p string, parentMnt uint64, depth int) bool {
		kind, id, err := lstatID(p)
		if err != nil || kind != hostDir {
			return false
		}
		if in, _ := sh.rootAt(ids, p, id, parentMnt); in >= 0 {
			return true
		}
		if depth > 256 {
			return false
		}
		f, err := os.Open(p)
		if err != nil {
			return false
		}
		ents, _ := f.ReadDir(-1)
		f.Close()
		for _, e := range ents {
			if e.IsDir() && walk(filepath.Join(p, e.Name()), id.mnt, depth+1) {
				return true
			}
		}
		return false
	}
	var parentMnt uint64
	if _, pid, err := lstatID(filepath.Dir(host)); err == nil {
		parentMnt = pid.mnt
	}
	return walk(host, parentMnt, 0)
}
