package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// deviceFiles are the character devices every confined command may write.
var deviceFiles = [...]string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/random", "/dev/urandom"}

// ptyDir holds the pseudo-terminals a confined command may write.
const ptyDir = "/dev/pts"

// landlockWriteRights is what a confined command may do only beneath its
// writable directories, for a kernel of Landlock ABI abi: every access
// right that changes the file system. Reads, execution and directory
// listing are never restricted. Refer (renames and links across
// directories, ABI 2) and truncate (ABI 3) are handled where the kernel
// knows them.
func landlockWriteRights(abi int) uint64 {
	r := uint64(unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

// landlockFileRights are the rights that apply to a file rather than a
// directory hierarchy: writing and truncating it.
const landlockFileRights = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE

// errLandlockOff is the reason confinement is unavailable when the
// caller switched Landlock off for testing.
var errLandlockOff = errors.New(NoLandlockEnv + " is set")

// landlockABI returns the kernel's Landlock ABI version, or why Landlock
// cannot be used.
func landlockABI(cfg runConfig) (int, error) {
	if cfg.noLandlock || os.Getenv(NoLandlockEnv) != "" {
		return 0, errLandlockOff
	}
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	if v < 1 {
		return 0, fmt.Errorf("kernel reports Landlock ABI version %d", v)
	}
	return int(v), nil
}

// confinement decides whether the command runs confined: it returns the
// Landlock ABI to confine with (0 for unconfined) and fills in the mode's
// Confined and Reason. Where Landlock is missing, the overlay modes run
// unconfined (Run then checks the real root afterwards) and the copy mode
// refuses with ErrUnconfined.
func confinement(cfg runConfig, m *Mode) (int, error) {
	if !haveMountSetattr() {
		m.Missing = append(m.Missing, "read-only host and nodev,nosuid root (mount_setattr, Linux 5.12)")
	}
	if cfg.unconfined {
		m.Reason = "Unconfined option"
		return 0, nil
	}
	abi, err := landlockABI(cfg)
	if err != nil {
		if m.Kind == ModeCopy {
			return 0, fmt.Errorf("kernel: Run: copy fallback without Landlock (%v) would leave the real root writable: %w", err, ErrUnconfined)
		}
		m.Reason = "Landlock unavailable: " + err.Error()
		m.Missing = append(m.Missing, "writes confined to the root, TMPDIR and WithWritable paths (Landlock, Linux 5.13)")
		return 0, nil
	}
	m.Confined, m.LandlockABI = true, abi
	if abi < 5 {
		m.Missing = append(m.Missing, "device ioctls only on the standard devices and terminals (Landlock ABI 5, Linux 6.10)")
	}
	if abi < 6 {
		m.Missing = append(m.Missing, "signals and abstract unix sockets scoped to the command (Landlock ABI 6, Linux 6.12)")
	}
	return abi, nil
}

// writablePaths returns the paths a confined command may write besides the
// standard devices: the root as it sees it (see), the private temporary
// directory and the caller's extra paths. realRoot is the real root when
// the command runs in a copy (it must stay read-only: one that holds it is
// refused), or "" in the overlay modes, where the mount hides it. An extra
// path inside the root needs no rule of its own, the root's covers it (it
// may exist only in the layer, or only once the copy is made).
func writablePaths(see, tmp, realRoot string, extra []string) ([]string, error) {
	out := []string{see, tmp}
	root := realRoot
	if root == "" {
		root = see
	}
	for _, p := range extra {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		if _, ok := relInside(root, abs); ok {
			continue
		}
		if _, ok := relInside(abs, realRoot); ok && realRoot != "" {
			return nil, fmt.Errorf("kernel: Run: writable path %s holds the root %s, which the copy fallback keeps read-only: %w", p, realRoot, ErrUnconfined)
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("kernel: Run: writable path: %w", err)
		}
		out = append(out, abs)
	}
	return out, nil
}

// relInside returns p relative to dir when p is dir or lies under it.
// Both must be clean absolute paths.
func relInside(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// confineSelf restricts the calling thread, and so the program it execs
// next, with Landlock ABI abi: writes only beneath the writable paths
// (directories, or single files), to the standard character devices and
// to the files open on the descriptors passed (the command's standard
// output and error, say), so that the command may reopen those by name
// (/dev/stdout, /proc/self/fd/N) as it may write them. Only regular files
// and character devices opened for writing count there: pipes and sockets
// need no rule, a descriptor opened read-only grants no write, and a
// directory passed to the command grants nothing beneath it.
// It sets no_new_privs, which Landlock requires of an unprivileged
// caller: set-user-ID programs run without their privileges.
//
// It works on the calling OS thread only (the thread is locked and never
// unlocked): the caller must exec from the same goroutine right after.
func confineSelf(abi int, writable []string, fds []int) error {
	runtime.LockOSThread()
	handled := landlockWriteRights(abi)
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled}
	if abi >= 6 {
		// Signals and abstract unix sockets reach only the command's own
		// processes (the sandbox's Landlock domain).
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	fd := int(r)
	defer unix.Close(fd)
	add := func(p string, rights uint64, optional bool) error {
		pfd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			if optional {
				return nil
			}
			return &fs.PathError{Op: "landlock", Path: p, Err: err}
		}
		defer unix.Close(pfd)
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			return &fs.PathError{Op: "landlock", Path: p, Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			rights &= landlockFileRights | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: rights & handled, Parent_fd: int32(pfd)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(fd), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
			return &fs.PathError{Op: "landlock_add_rule", Path: p, Err: errno}
		}
		return nil
	}
	// No device node is ever made: the rights stay handled, never granted.
	dirRights := handled &^ (unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV)
	for _, p := range writable {
		if err := add(p, dirRights, false); err != nil {
			return err
		}
	}
	// ioctls on devices (ABI 5) only on the standard ones and terminals.
	devRights := uint64(landlockFileRights | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV)
	for _, p := range deviceFiles {
		if err := add(p, devRights, true); err != nil {
			return err
		}
	}
	if err := add(ptyDir, devRights, true); err != nil {
		return err
	}
	for _, passed := range fds {
		var st unix.Stat_t
		if unix.Fstat(passed, &st) != nil {
			continue
		}
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFCHR {
			continue
		}
		// A descriptor opened read-only (or O_PATH) grants no write: the
		// file may be the real root's, or any file the caller only lets
		// the command read.
		if fl, err := unix.FcntlInt(uintptr(passed), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE == unix.O_RDONLY {
			continue
		}
		// Best effort, like the devices: a file the kernel will not take
		// a rule for stays writable through the descriptor itself.
		rule := unix.LandlockPathBeneathAttr{Allowed_access: landlockFileRights & handled, Parent_fd: int32(passed)}
		unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(fd), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}
