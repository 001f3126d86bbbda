package kernel

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// mountSource is the source every overlay mounted by [Mount] carries, so
// that its mounts can be told from everyone else's in /proc/self/mountinfo.
const mountSource = "cowfs"

// Run names its temporary directories cowfs-run-* (overlay) and
// cowfs-copy-* (copy fallback).
const runDirPrefix, copyDirPrefix = "cowfs-run-", "cowfs-copy-"

// Cleanup reclaims what cowfs processes that died left under dir (the
// default, for "", is os.TempDir()) and returns what it removed or
// unmounted, in order: mount points and upper and work directories as
// /proc/self/mountinfo names them, temporary directories joined to dir as
// given.
//
// It unmounts the overlays mounted by [Mount] (their source is "cowfs")
// whose upper directory lies under dir and whose owner is gone, lazily
// (MNT_DETACH) where the mount is still in use, and removes their upper
// and work directories; and it removes the temporary directories of [Run]
// (cowfs-run-*, cowfs-copy-*) directly in dir whose owner is gone. An
// owner is gone when nobody holds the lock on the owner record that
// Mount and Run keep beside what they made: the kernel drops that lock
// when the process dies, however it dies.
//
// It never touches a live owner's directories or mounts, a mount that is
// not cowfs's, a mount with another mount stacked on it, a directory
// without an owner record (one being created, or made by an older
// version), or a temporary directory with a mount inside. It sees the
// mounts of its own mount namespace only; mounts in a namespace of their
// own (those of Run) die with the namespace. Unmounting needs the
// privilege to mount.
//
// It never follows a symlink and never changes a mode by path: it
// removes through directory descriptors opened with O_NOFOLLOW (see
// removeTree), so a directory swapped for a symlink meanwhile redirects
// nothing. Run's own cleanup, as it starts, removes only directories of
// its user's uid.
//
// Errors name the path involved and are joined; Cleanup goes on with the
// rest after one.
func Cleanup(dir string) (removed []string, err error) {
	return cleanup(dir, true)
}

// cleanup is Cleanup, of Run's temporary directories only unless mounts is
// set. Run reclaims its own kind of leftovers as it starts; unmounting is
// left to an explicit Cleanup.
func cleanup(dir string, mounts bool) (removed []string, err error) {
	if dir == "" {
		dir = os.TempDir()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &fs.PathError{Op: "cleanup", Path: dir, Err: err}
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	} else {
		return nil, &fs.PathError{Op: "cleanup", Path: dir, Err: errors.Unwrap(err)}
	}
	var errs []error
	infos, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		errs = append(errs, err)
	}
	if mounts {
		removed, err = cleanupMounts(abs, infos)
		errs = append(errs, err)
		if len(removed) > 0 {
			// What was just unmounted is no reason to keep a directory.
			if now, err := readMountinfo("/proc/self/mountinfo"); err == nil {
				infos = now
			}
		}
	}
	dirs, err := cleanupTempDirs(dir, abs, infos, !mounts)
	removed = append(removed, dirs...)
	errs = append(errs, err)
	return removed, errors.Join(errs...)
}

// cleanupMounts unmounts abandoned cowfs overlays whose upper is under dir.
func cleanupMounts(dir string, mounts []mountInfo) ([]string, error) {
	var removed []string
	var errs []error
	done := map[string]bool{}
	for _, m := range mounts {
		if m.fsType != "overlay" || m.source != mountSource {
			continue
		}
		upper, work := m.superOption("upperdir"), m.superOption("workdir")
		if upper == "" || done[upper] || !within(dir, upper) {
			continue
		}
		own, abandoned, err := lockAbandoned(upper + mountRecordSuffix)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !abandoned {
			continue
		}
		done[upper] = true
		// Every place the overlay is mounted (a shared parent propagates
		// it), topmost first so none is left under another.
		var targets []mountInfo
		for _, t := range mounts {
			if t.fsType == "overlay" && t.source == mountSource && t.superOption("upperdir") == upper {
				targets = append(targets, t)
			}
		}
		slices.Reverse(targets)
		ok := true
		for _, t := range targets {
			if covered(mounts, t) {
				errs = append(errs, &fs.PathError{Op: "umount", Path: t.mountPoint, Err: fmt.Errorf("another mount is stacked on the cowfs overlay: %w", unix.EBUSY)})
				ok = false
				continue
			}
			err := unix.Unmount(t.mountPoint, unix.UMOUNT_NOFOLLOW)
			if err == unix.EBUSY {
				err = unix.Unmount(t.mountPoint, unix.UMOUNT_NOFOLLOW|unix.MNT_DETACH)
			}
			if err != nil && err != unix.EINVAL { // EINVAL: no longer mounted
				errs = append(errs, &fs.PathError{Op: "umount", Path: t.mountPoint, Err: err})
				ok = false
				continue
			}
			removed = append(removed, t.mountPoint)
		}
		if !ok {
			own.release(false)
			continue
		}
		for _, d := range []string{upper, work} {
			if d == "" || !within(dir, d) {
				continue
			}
			if _, err := os.Lstat(d); err != nil {
				continue
			}
			removeTree(d)
			if _, err := os.Lstat(d); err == nil {
				errs = append(errs, &fs.PathError{Op: "remove", Path: d, Err: unix.ENOTEMPTY})
				continue
			}
			removed = append(removed, d)
		}
		own.release(true)
	}
	return removed, errors.Join(errs...)
}

// cleanupTempDirs removes Run's abandoned temporary directories in dir,
// which is real as the caller named it.
// With ownOnly (Run's own cleanup as it starts) only those of this
// process's uid are removed.
func cleanupTempDirs(dir, real string, mounts []mountInfo, ownOnly bool) ([]string, error) {
	ents, err := os.ReadDir(real)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !(strings.HasPrefix(e.Name(), runDirPrefix) || strings.HasPrefix(e.Name(), copyDirPrefix)) {
			continue
		}
		// Run reclaims only its user's own: another user's directory is
		// not for it to judge, nor to remove. An explicit Cleanup (root's,
		// typically) reclaims every abandoned one, through descriptors.
		if info, err := e.Info(); err != nil || ownOnly && !ownedBySelf(info) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		own, abandoned, err := lockAbandoned(filepath.Join(p, ownerRecordName))
		realP := filepath.Join(real, e.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !abandoned {
			continue
		}
		if slices.ContainsFunc(mounts, func(m mountInfo) bool { return within(realP, m.mountPoint) }) {
			errs = append(errs, &fs.PathError{Op: "remove", Path: p, Err: fmt.Errorf("something is mounted inside: %w", unix.EBUSY)})
			own.release(false)
			continue
		}
		removeTree(p)
		own.release(false)
		if _, err := os.Lstat(p); err == nil {
			errs = append(errs, &fs.PathError{Op: "remove", Path: p, Err: unix.ENOTEMPTY})
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// within reports whether p is dir or lies under it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// covered reports whether another mount sits on m's mount point.
func covered(mounts []mountInfo, m mountInfo) bool {
	return slices.ContainsFunc(mounts, func(o mountInfo) bool { return o.parent == m.id && o.mountPoint == m.mountPoint })
}

// mountInfo is one line of /proc/PID/mountinfo.
type mountInfo struct {
	id, parent   int
	mountPoint   string
	mountOptions string // per-mount options: rw, nodev, nosuid, ...
	fsType       string
	source       string
	superOptions []string
}

// superOption is the value of a key=value super option, unescaped.
func (m mountInfo) superOption(key string) string {
	for _, o := range m.superOptions {
		if k, v, ok := strings.Cut(o, "="); ok && k == key {
			return unescapeMountinfo(v)
		}
	}
	return ""
}

// readMountinfo parses a mountinfo file (proc(5)).
func readMountinfo(path string) ([]mountInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if m, ok := parseMountinfoLine(sc.Text()); ok {
			out = append(out, m)
		}
	}
	if err := sc.Err(); err != nil {
		return out, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return out, nil
}

func parseMountinfoLine(line string) (mountInfo, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return mountInfo{}, false
	}
	a, b := strings.Fields(pre), strings.Fields(post)
	if len(a) < 6 || len(b) < 3 {
		return mountInfo{}, false
	}
	id, err1 := strconv.Atoi(a[0])
	parent, err2 := strconv.Atoi(a[1])
	if err1 != nil || err2 != nil {
		return mountInfo{}, false
	}
	return mountInfo{
		id: id, parent: parent,
		mountPoint:   unescapeMountinfo(a[4]),
		mountOptions: a[5],
		fsType:       b[0],
		source:       unescapeMountinfo(b[1]),
		superOptions: strings.Split(b[2], ","),
	}, true
}

// unescapeMountinfo undoes the kernel's \ooo octal escapes.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// removeTree removes dir even where the copy or the command made
// directories unwritable, or (as root) files and directories immutable or
// append-only. It never follows a symlink and never changes a mode by
// path: os.RemoveAll works with unlinkat and openat(O_NOFOLLOW); where it
// fails, the tree is walked through directory descriptors opened with
// O_NOFOLLOW, and modes and flags are changed on what those descriptors
// hold, so a directory swapped for a symlink meanwhile redirects nothing.
func removeTree(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	parent, err := unix.Open(filepath.Dir(dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(parent)
	removeAt(parent, filepath.Base(dir), os.Geteuid(), 0)
}

// maxRemoveDepth bounds removeAt's recursion (one descriptor per level).
const maxRemoveDepth = 512

// removeAt removes name in the directory open on parent, with what is
// below it: directories only where uid owns them (their modes are set to
// 0700 through a descriptor), immutable and append-only flags cleared
// through a descriptor opened with O_NOFOLLOW.
func removeAt(parent int, name string, uid, depth int) {
	if unix.Unlinkat(parent, name, 0) == nil {
		return
	}
	fd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		clearNoDeleteAt(parent, name)
		unix.Unlinkat(parent, name, 0)
		return
	case unix.S_IFDIR:
	default:
		return
	}
	if int(st.Uid) != uid && uid != 0 || depth > maxRemoveDepth {
		return
	}
	// The mode of exactly the directory held: through /proc, which names
	// the descriptor's inode, never the path.
	if st.Mode&0o700 != 0o700 {
		unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), 0o700)
	}
	clearNoDeleteAt(parent, name)
	d, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(d), name)
	names, _ := f.Readdirnames(-1)
	for _, n := range names {
		removeAt(d, n, uid, depth+1)
	}
	f.Close()
	unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
}

// clearNoDeleteAt clears the immutable and append-only flags of name (a
// regular file or directory, never followed) in the directory open on dir.
func clearNoDeleteAt(dir int, name string) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	clearNoDeleteFD(fd)
}

// The inode flags (chattr +i, +a) that forbid removing a file or the
// entries of a directory; linux/fs.h.
const fsImmutableFl, fsAppendFl = 0x10, 0x20

// clearNoDelete clears p's immutable and append-only flags, where set.
func clearNoDelete(p string) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	clearNoDeleteFD(fd)
}

// clearNoDeleteFD clears the immutable and append-only flags of the file
// open on fd, where set.
func clearNoDeleteFD(fd int) {
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil || flags&(fsImmutableFl|fsAppendFl) == 0 {
		return
	}
	unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags&^(fsImmutableFl|fsAppendFl)))
}

// ownedBySelf reports whether info (from Lstat) is owned by this
// process's effective uid.
func ownedBySelf(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
