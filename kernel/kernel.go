package kernel

import (
	"errors"
	"fmt"
)

// Options says how an upper directory is, or will be, mounted.
type Options struct {
	// UserXattr selects the user.overlay.* xattr namespace, for a mount with
	// the userxattr option (an unprivileged mount inside a user namespace).
	// Without it the trusted.overlay.* namespace is used, which needs
	// CAP_SYS_ADMIN in the initial user namespace to write.
	UserXattr bool
}

// xattrPrefix is the overlay xattr namespace the options select. Exactly
// one namespace is ever written: the kernel shows the other one as an
// ordinary xattr of the merged file.
func (o Options) xattrPrefix() string {
	if o.UserXattr {
		return "user.overlay."
	}
	return "trusted.overlay."
}

var (
	// ErrNoOverlay means the running kernel has no overlay filesystem.
	ErrNoOverlay = errors.New("kernel: overlay filesystem not supported by this kernel (modprobe overlay)")
	// ErrReadOnly means the overlay mounted, but read-only: the kernel
	// could not use the work directory or the upper filesystem and fell back
	// silently. Mount unmounts it again and returns this error.
	ErrReadOnly = errors.New("kernel: overlay came up read-only (work dir or upper filesystem unusable)")
	// ErrUpperFilesystem means upper and work are on different filesystems,
	// or on an overlay, which the kernel refuses as an upper layer.
	ErrUpperFilesystem = errors.New("kernel: upper and work must be on one non-overlay filesystem (a tmpfs works)")
	// ErrRedirect means an upper directory uses redirect_dir, which a layer
	// cannot express (a renamed lower directory). Import refuses it.
	ErrRedirect = errors.New("kernel: upper dir uses redirect_dir (renamed lower directory); mount with redirect_dir=nofollow")
	// ErrMetacopy means an upper file is a metadata-only copy-up whose data
	// lives elsewhere. Import refuses it.
	ErrMetacopy = errors.New("kernel: upper dir uses metacopy (metadata-only copy-up); mount with metacopy=off")
	// ErrUnsupportedType means a file type a layer cannot hold: a device
	// node other than the 0/0 whiteout.
	ErrUnsupportedType = errors.New("kernel: file type not supported in a layer")
	// ErrUnrepresentable means a layer entry that an OCI layer tar cannot
	// carry: a name that starts with the whiteout prefix ".wh.", or a
	// socket (tar has no type for it).
	ErrUnrepresentable = errors.New("kernel: name not representable in an OCI layer")
	// ErrUnconfined means Run could not confine the command as promised:
	// in the copy fallback without Landlock the real root would be
	// writable, so Run refuses unless [Unconfined] was given.
	ErrUnconfined = errors.New("kernel: command cannot be confined (Landlock unavailable); pass Unconfined() to run it anyway")
)

// NoLandlockEnv names an environment variable that, set to any non-empty
// value, makes [Run] act as on a kernel without Landlock: the overlay
// modes run unconfined and say so, the copy fallback refuses with
// [ErrUnconfined]. It exists to test that path on kernels that have
// Landlock.
const NoLandlockEnv = "COWFS_NO_LANDLOCK"

// RootEnv names the environment variable through which [Run] tells the
// command where it sees the root: the root itself, or the copy.
const RootEnv = "COWFS_ROOT"

// RunOption configures [Run].
type RunOption func(*runConfig)

type runConfig struct {
	forceCopy  bool
	userNS     bool
	userNSSet  bool
	tempDir    string
	writable   []string
	unconfined bool
	noLandlock bool // act as if the kernel had no Landlock (tests)
	report     func(Mode)
}

// WithCopyFallback makes Run skip the kernel overlay and run the command in
// a temporary copy of the merged view, importing the difference afterwards.
// Run does this by itself when no overlay can be mounted.
func WithCopyFallback() RunOption {
	return func(c *runConfig) { c.forceCopy = true }
}

// WithUserNamespace chooses whether Run enters a new user namespace (and
// mounts with userxattr). By default it does so exactly when the process
// is not root in the initial user namespace.
func WithUserNamespace(on bool) RunOption {
	return func(c *runConfig) { c.userNS, c.userNSSet = on, true }
}

// WithTempDir sets where Run creates its upper and work directories (or
// its copy of the root). It must be on a non-overlay filesystem that
// supports the xattrs in use; the default is os.TempDir(), or /dev/shm
// when that is on an overlay (as in many containers).
func WithTempDir(dir string) RunOption {
	return func(c *runConfig) { c.tempDir = dir }
}

// WithWritable lets the command write beneath paths (files or
// directories, which must exist) besides the root, its private TMPDIR and
// the standard character devices: a build cache, say. In the copy
// fallback a path inside the root is mapped into the copy, and one that
// holds the root is refused with [ErrUnconfined], since the real root must
// stay read-only.
func WithWritable(paths ...string) RunOption {
	return func(c *runConfig) { c.writable = append(c.writable, paths...) }
}

// Unconfined runs the command without Landlock confinement: it may then
// write anywhere its user may, and what it writes outside the root (as it
// sees it) is neither captured nor undone. In the copy fallback that
// includes the real root; Run still detects such a change afterwards and
// refuses to import the run.
func Unconfined() RunOption {
	return func(c *runConfig) { c.unconfined = true }
}

// WithModeReport makes Run call fn with the mode it runs the command in,
// once, just before the command starts.
func WithModeReport(fn func(Mode)) RunOption {
	return func(c *runConfig) { c.report = fn }
}

// ModeKind says where [Run] ran a command.
type ModeKind uint8

const (
	// ModeOverlay is a kernel overlay mounted by a process that is root in
	// its user namespace (no new user namespace).
	ModeOverlay ModeKind = iota + 1
	// ModeOverlayUserNS is a kernel overlay mounted in a new user
	// namespace (with userxattr), where the command runs as uid 0.
	ModeOverlayUserNS
	// ModeCopy is the copy fallback: the command runs in a temporary copy
	// of the view.
	ModeCopy
)

func (k ModeKind) String() string {
	switch k {
	case ModeOverlay:
		return "kernel overlay as root"
	case ModeOverlayUserNS:
		return "kernel overlay in a user namespace"
	case ModeCopy:
		return "copy of the root"
	}
	return fmt.Sprintf("ModeKind(%d)", uint8(k))
}

// Mode is how [Run] ran a command, as [WithModeReport] receives it.
type Mode struct {
	Kind ModeKind
	// Confined says whether Landlock restricted the command's writes to
	// the root as it sees it, its TMPDIR, the standard character devices
	// and the paths given to [WithWritable].
	Confined bool
	// LandlockABI is the kernel's Landlock ABI version when Confined.
	LandlockABI int
	// Reason says why the command was not confined, when it was not.
	Reason string
	// Root is where the command sees the root: the root itself, or the
	// copy. Dir is its working directory.
	Root, Dir string
}

// String describes the mode in one line, e.g. "kernel overlay as root,
// confined (Landlock ABI 7)".
func (m Mode) String() string {
	if m.Confined {
		return fmt.Sprintf("%s, confined (Landlock ABI %d)", m.Kind, m.LandlockABI)
	}
	return fmt.Sprintf("%s, unconfined (%s)", m.Kind, m.Reason)
}
