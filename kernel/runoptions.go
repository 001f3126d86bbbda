package kernel

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
	network    bool
	noThread   bool // as root, re-execute this program as init anyway (benchmarks, tests)
	dirRenames bool
	maxRSS     int64  // the thread's resident-memory limit, 0 for threadMaxRSS (benchmarks)
	fallback   string // why the overlay was not used, for the mode report
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
// the standard character devices: a build cache, say. A path inside the
// root changes nothing (the root is writable, in the layer) and need not
// exist. In the copy fallback a path that holds the root is refused with
// [ErrUnconfined], since the real root must stay read-only.
func WithWritable(paths ...string) RunOption {
	return func(c *runConfig) { c.writable = append(c.writable, paths...) }
}

// Unconfined runs the command without Landlock confinement, with the
// host writable in its mount namespace and, as root, with every
// capability (mknod included): it may then write anywhere its user may,
// and what it writes outside the root (as it sees it) is neither captured
// nor undone. The namespaces (PID, UTS, IPC, network), the session and
// the closed descriptors stay. In the copy fallback that
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

// WithNetwork lets the command use the host's network. By default it runs
// in a network namespace of its own, which holds only a loopback
// interface: it reaches no host, no service listening on the host's
// loopback and no abstract unix socket outside.
func WithNetwork() RunOption {
	return func(c *runConfig) { c.network = true }
}

// WithDirRenames says the command may rename directories the root
// already has (rename(2) of a lower directory: python's os.rename, Go's
// os.Rename, mv) and must see them work as in a plain run. As root in the
// initial user namespace the overlay does that anyway (redirect_dir=on,
// imported as renames), and the option changes nothing. In a user
// namespace it cannot: the kernel takes redirect_dir=on only with
// trusted.* xattrs, and forces redirect_dir=nofollow with userxattr, so
// that such a rename fails with EXDEV there. With this option Run then
// runs the command in the copy mode instead, where renames work, and says
// why through [WithModeReport] (Mode.Fallback). The copy costs a copy of
// the whole view (see Run's Cost) and has the copy mode's limit on tools
// that record inode numbers (git's index, see the package doc).
func WithDirRenames() RunOption {
	return func(c *runConfig) { c.dirRenames = true }
}

// withReexecInit makes Run start the PID namespace's init by executing
// this program again even where a thread could make the namespaces (see
// thread_linux.go): the path taken with a quota or a SysProcAttr, and the
// peer that the thread's speed is measured against.
func withReexecInit() RunOption {
	return func(c *runConfig) { c.noThread = true }
}
