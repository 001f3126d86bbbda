package kernel

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// MountPoint is an overlay mounted by [Mount]. (The type cannot share the
// function's name in Go.) Unmount it exactly once.
type MountPoint struct {
	target string
	owner  *ownerLock // the owner record beside upper, held until Unmount
	mu     sync.Mutex
	done   bool
}

// Target is the mount point.
func (m *MountPoint) Target() string { return m.target }

// pinnedOptions are the overlay features that must stay off: with them the
// kernel writes uppers a layer cannot express (redirects, metacopy) or
// keeps state (index) that outlives the mount.
var pinnedOptions = [...][2]string{{"index", "off"}, {"metacopy", "off"}, {"redirect_dir", "nofollow"}}

// redirectOptions are Run's mount options where it can follow redirects:
// with redirect_dir=on a command may rename a lower directory (the kernel
// records a trusted.overlay.redirect xattr, which Run's import turns into
// a rename in the layer); with nofollow the rename fails with EXDEV. The
// kernel refuses redirect_dir=on together with userxattr, so an overlay in
// a user namespace keeps nofollow.
var redirectOptions = [...][2]string{{"index", "off"}, {"metacopy", "off"}, {"redirect_dir", "on"}}

// mountOptions are the pinned options of a mount, with directory renames
// (redirect_dir=on) or without.
func mountOptions(redirect bool) [][2]string {
	if redirect {
		return redirectOptions[:]
	}
	return pinnedOptions[:]
}

// Mount mounts an overlay of lower with the given upper and work directories
// on target. It pins index=off, metacopy=off and redirect_dir=nofollow, adds
// userxattr when opts.UserXattr is set, uses the new mount API (fsopen,
// fsconfig with lowerdir+) and falls back to mount(2) with escaped options
// on kernels without it. lower and target may be the same directory: the
// overlay then hides the original in place for every process in this mount
// namespace.
//
// The overlay's source is "cowfs", and an owner record beside upper
// (UPPER.cowfs-owner, locked by this process until Unmount) lets
// [Cleanup] unmount it once this process is gone without unmounting.
//
// Errors are *fs.PathError with Op "mount" and Path target. They wrap the
// errno and, where one applies, [ErrNoOverlay], [ErrUpperFilesystem] or
// [ErrReadOnly]; the message carries the kernel's own explanation and a hint
// (for EPERM: run in a user namespace with opts.UserXattr).
func Mount(ctx context.Context, lower, upper, work, target string, opts Options) (*MountPoint, error) {
	return mountOverlay(ctx, lower, upper, work, target, opts, false)
}

// mountOverlay is Mount, with redirect_dir=on where redirect is set (Run's
// own mount, whose import follows the redirects; see redirectOptions).
func mountOverlay(ctx context.Context, lower, upper, work, target string, opts Options, redirect bool) (*MountPoint, error) {
	return mountOverlayRecord(ctx, lower, upper, work, target, opts, redirect, true)
}

// mountOverlayRecord is mountOverlay, without the owner record (see
// claimMountRecord) unless record is set: Run's own mounts live in a
// namespace of their own, which no Cleanup could reach.
func mountOverlayRecord(ctx context.Context, lower, upper, work, target string, opts Options, redirect, record bool) (*MountPoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, &fs.PathError{Op: "mount", Path: target, Err: err}
	}
	var err error
	dirs := []*string{&lower, &upper, &work, &target}
	for _, p := range dirs {
		if *p, err = filepath.Abs(*p); err != nil {
			return nil, &fs.PathError{Op: "mount", Path: target, Err: err}
		}
		fi, err := os.Stat(*p)
		if err != nil {
			return nil, &fs.PathError{Op: "mount", Path: target, Err: err}
		}
		if !fi.IsDir() {
			return nil, &fs.PathError{Op: "mount", Path: target, Err: fmt.Errorf("%s: %w", *p, unix.ENOTDIR)}
		}
	}
	if err := checkUpperWork(upper, work); err != nil {
		return nil, &fs.PathError{Op: "mount", Path: target, Err: err}
	}
	var own *ownerLock
	if record {
		own = claimMountRecord(upper, work, target)
	}
	err = mountNewAPI(lower, upper, work, target, opts, redirect)
	if errors.Is(err, errNoNewAPI) {
		err = mountLegacy(lower, upper, work, target, opts, redirect)
	}
	if err != nil {
		own.release(true)
		return nil, &fs.PathError{Op: "mount", Path: target, Err: err}
	}
	m := &MountPoint{target: target, owner: own}
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil || st.Flags&unix.ST_RDONLY != 0 {
		_ = m.Unmount()
		if err == nil {
			err = ErrReadOnly
		}
		return nil, &fs.PathError{Op: "mount", Path: target, Err: err}
	}
	return m, nil
}

// claimMountRecord creates and locks the owner record of a mount of upper,
// or takes over the record of a dead owner. It returns nil where it cannot
// (a directory it may not write, a live owner of the same upper): such a
// mount works, but [Cleanup] never reclaims it.
func claimMountRecord(upper, work, target string) *ownerLock {
	path := upper + mountRecordSuffix
	what := fmt.Sprintf("mount %s\nupper %s\nwork %s", target, upper, work)
	own, err := createOwner(path, what)
	if errors.Is(err, fs.ErrExist) {
		var abandoned bool
		if own, abandoned, err = lockAbandoned(path); !abandoned || err != nil {
			return nil
		}
		own.release(true)
		own, err = createOwner(path, what)
	}
	if err != nil {
		return nil
	}
	return own
}

// Unmount unmounts the overlay. A second call returns an error wrapping
// fs.ErrClosed.
func (m *MountPoint) Unmount() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return &fs.PathError{Op: "umount", Path: m.target, Err: fs.ErrClosed}
	}
	if err := unix.Unmount(m.target, 0); err != nil {
		if err == unix.EBUSY {
			return &fs.PathError{Op: "umount", Path: m.target, Err: fmt.Errorf("%w (a process still uses the mount)", err)}
		}
		return &fs.PathError{Op: "umount", Path: m.target, Err: err}
	}
	m.done = true
	m.owner.release(true)
	return nil
}

// checkUpperWork explains up front what the kernel would only log.
func checkUpperWork(upper, work string) error {
	for _, d := range []string{upper, work} {
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); err != nil {
			return &fs.PathError{Op: "statfs", Path: d, Err: err}
		}
		if st.Type == unix.OVERLAYFS_SUPER_MAGIC {
			return fmt.Errorf("%s is on an overlay: %w", d, ErrUpperFilesystem)
		}
	}
	var su, sw unix.Stat_t
	if err := unix.Stat(upper, &su); err != nil {
		return &fs.PathError{Op: "stat", Path: upper, Err: err}
	}
	if err := unix.Stat(work, &sw); err != nil {
		return &fs.PathError{Op: "stat", Path: work, Err: err}
	}
	if su.Dev != sw.Dev {
		return fmt.Errorf("%s and %s are on different filesystems: %w", upper, work, ErrUpperFilesystem)
	}
	return nil
}

// errNoNewAPI means: this kernel lacks fsopen or lowerdir+, use mount(2).
var errNoNewAPI = errors.New("new mount API unavailable")

// fsconfig string values are copied with strndup_user(value, 256).
const fsconfigMaxString = 255

func mountNewAPI(lower, upper, work, target string, opts Options, redirect bool) (err error) {
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		switch err {
		case unix.ENOSYS:
			return errNoNewAPI
		case unix.ENODEV:
			return fmt.Errorf("fsopen: %w: %w", ErrNoOverlay, err)
		}
		return explain("fsopen", err, nil)
	}
	defer unix.Close(fd)
	setDir := func(key, dir string, escape bool) error {
		s := dir
		if escape {
			s = escapeOption(dir)
		}
		if len(s) <= fsconfigMaxString {
			return unix.FsconfigSetString(fd, key, s)
		}
		// Longer strings are refused; a directory fd is not (Linux 6.13+).
		dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		return unix.FsconfigSetFd(fd, key, dfd)
	}
	if err := setDir("lowerdir+", lower, false); err != nil {
		if err == unix.EINVAL && len(lower) <= fsconfigMaxString {
			drainLog(fd)
			return errNoNewAPI // kernel before 6.8: no lowerdir+
		}
		return explain("fsconfig lowerdir+", err, drainLog(fd))
	}
	// Unlike lowerdir+, the kernel unescapes upperdir and workdir strings.
	for _, kv := range [][2]string{{"upperdir", upper}, {"workdir", work}} {
		if err := setDir(kv[0], kv[1], true); err != nil {
			return explain("fsconfig "+kv[0], err, drainLog(fd))
		}
	}
	if err := unix.FsconfigSetString(fd, "source", mountSource); err != nil {
		return explain("fsconfig source", err, drainLog(fd))
	}
	for _, kv := range mountOptions(redirect) {
		if err := unix.FsconfigSetString(fd, kv[0], kv[1]); err != nil {
			return explain("fsconfig "+kv[0], err, drainLog(fd))
		}
	}
	if opts.UserXattr {
		if err := unix.FsconfigSetFlag(fd, "userxattr"); err != nil {
			return explain("fsconfig userxattr", err, drainLog(fd))
		}
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		return explain("fsconfig create", err, drainLog(fd))
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return explain("fsmount", err, drainLog(fd))
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return explain("move_mount", err, nil)
	}
	return nil
}

// drainLog reads the messages the kernel queued on an fs context.
func drainLog(fd int) []string {
	var msgs []string
	buf := make([]byte, 4096)
	for range 64 {
		n, err := unix.Read(fd, buf)
		if err != nil || n <= 0 {
			break
		}
		msgs = append(msgs, strings.TrimSpace(string(buf[:n])))
	}
	return msgs
}

// escapeOption escapes a path for the comma-separated mount(2) data, where
// overlayfs also splits lowerdir at colons and unescapes backslashes.
func escapeOption(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r == '\\' || r == ',' || r == ':' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// legacyData builds the mount(2) data string, which must fit in one page
// including its terminating NUL.
func legacyData(lower, upper, work string, opts Options, redirect bool) (string, error) {
	var b strings.Builder
	b.WriteString("lowerdir=" + escapeOption(lower))
	b.WriteString(",upperdir=" + escapeOption(upper))
	b.WriteString(",workdir=" + escapeOption(work))
	for _, kv := range mountOptions(redirect) {
		b.WriteString("," + kv[0] + "=" + kv[1])
	}
	if opts.UserXattr {
		b.WriteString(",userxattr")
	}
	if b.Len() >= os.Getpagesize() {
		return "", fmt.Errorf("mount data is %d bytes, the kernel takes less than %d: %w (use shorter paths)", b.Len(), os.Getpagesize(), unix.ENAMETOOLONG)
	}
	return b.String(), nil
}

func mountLegacy(lower, upper, work, target string, opts Options, redirect bool) error {
	data, err := legacyData(lower, upper, work, opts, redirect)
	if err != nil {
		return err
	}
	if err := unix.Mount(mountSource, target, "overlay", 0, data); err != nil {
		if err == unix.ENODEV {
			return fmt.Errorf("mount: %w: %w", ErrNoOverlay, err)
		}
		return explain("mount", err, nil)
	}
	return nil
}

// explain wraps errno with the kernel's log and a hint for the usual causes.
func explain(op string, errno error, log []string) error {
	var hint string
	switch errno {
	case unix.EPERM:
		hint = "mounting needs CAP_SYS_ADMIN: run as root, or inside a user namespace (unshare -Urm) with Options.UserXattr"
	case unix.EXDEV:
		hint = "upper and work must be on the same filesystem"
	case unix.ENAMETOOLONG:
		hint = "use shorter paths"
	case unix.EOPNOTSUPP:
		hint = "the upper filesystem lacks a feature overlayfs needs (xattrs, RENAME_WHITEOUT, tmpfile); a tmpfs or ext4 works"
	}
	msg := op
	if len(log) > 0 {
		msg += " (" + strings.Join(log, "; ") + ")"
	}
	if hint != "" {
		msg += " [" + hint + "]"
	}
	if errno == unix.EXDEV || (errno == unix.EINVAL && logMentions(log, "upper fs", "same filesystem", "upper filesystem")) {
		return fmt.Errorf("%s: %w: %w", msg, ErrUpperFilesystem, errno)
	}
	return fmt.Errorf("%s: %w", msg, errno)
}

func logMentions(log []string, subs ...string) bool {
	for _, l := range log {
		for _, s := range subs {
			if strings.Contains(l, s) {
				return true
			}
		}
	}
	return false
}
