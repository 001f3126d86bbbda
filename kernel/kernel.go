package kernel

import (
	"errors"
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
	// ErrUnsupportedType means a file type a layer cannot hold: a fifo,
	// socket or device other than the 0/0 whiteout.
	ErrUnsupportedType = errors.New("kernel: file type not supported in a layer")
	// ErrUnrepresentable means a layer path that an OCI layer tar cannot
	// carry, because its name starts with the whiteout prefix ".wh.".
	ErrUnrepresentable = errors.New("kernel: name not representable in an OCI layer")
)

// RootEnv names the environment variable through which [Run] tells the
// command where it sees the root: the root itself, or the copy.
const RootEnv = "COWFS_ROOT"

// RunOption configures [Run].
type RunOption func(*runConfig)

type runConfig struct {
	forceCopy bool
	userNS    bool
	userNSSet bool
	tempDir   string
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
