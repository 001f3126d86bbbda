package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// runEnv carries the mount request from Run to the re-executed binary.
const runEnv = "COWFS_KERNEL_RUN_HOOK"

// runRequest is what the re-executed binary needs to mount and exec.
type runRequest struct {
	Root      string `json:"root"`
	Upper     string `json:"upper"`
	Work      string `json:"work"`
	UserXattr bool   `json:"userxattr"`
	Path      string `json:"path"` // the command; its argv is the hook's after argv[0]
	StatusFD  int    `json:"statusfd"`
	// Dir is where the command runs, entered after the mount. StatDir
	// says Dir is stat'ed first, as os/exec does before it forks (when
	// SysProcAttr is nil): a Dir that cannot be stat'ed then fails as
	// "chdir DIR", one that cannot be entered as "fork/exec PROG".
	Dir     string `json:"dir,omitempty"`
	StatDir bool   `json:"statdir,omitempty"`
	// Caps is the caller's effective capability set: Dir is stat'ed and
	// entered with no more, as os/exec's child does it with the caller's.
	// In a user namespace the hook is root, which the caller is not.
	Caps uint64 `json:"caps,omitempty"`
	// NoMount: the copy fallback, which only confines and execs.
	NoMount bool `json:"nomount,omitempty"`
	// Landlock is the ABI to confine the command with, 0 for none;
	// Writable lists what it may write then.
	Landlock int      `json:"landlock,omitempty"`
	Writable []string `json:"writable,omitempty"`
	// Nest runs the command in a user namespace nested in the mounting
	// one, as UID and GID (the caller's): the overlay in a user namespace
	// is mounted as its uid 0.
	Nest     bool `json:"nest,omitempty"`
	UID, GID int
	// ChownEPERM: a chown to another owner fails with EPERM, as in a
	// plain run of UID and GID, not EINVAL (see chownAsPlainRun).
	ChownEPERM bool `json:"chowneperm,omitempty"`
	// KeepCaps: unconfined, the command keeps every capability (and
	// runs without the sandbox's seccomp filter).
	KeepCaps bool `json:"keepcaps,omitempty"`
	// Network: the command shares the host's network (WithNetwork).
	Network bool `json:"network,omitempty"`
	// noRecord: mount without the owner record (the thread's run, whose
	// descriptors must not outlive it).
	noRecord bool
}

// runStatus is written to the status pipe when the hook fails; a successful
// exec closes the pipe (close-on-exec) with nothing written.
type runStatus struct {
	Stage string `json:"stage"` // "mount", "stat", "chdir", "confine" or "exec"
	Errno int    `json:"errno"`
	Msg   string `json:"msg"`
	// Op and Path are set when the failure was an *fs.PathError around a
	// bare errno, so that the caller gets one back, as os/exec gives it.
	Op   string `json:"op,omitempty"`
	Path string `json:"path,omitempty"`
}

// newRunStatus describes err, a failure at stage, for the status pipe.
func newRunStatus(stage string, err error) runStatus {
	s := runStatus{Stage: stage, Msg: err.Error()}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s.Errno = int(errno)
	}
	if pe, ok := err.(*fs.PathError); ok {
		if _, bare := pe.Err.(syscall.Errno); bare {
			s.Op, s.Path = pe.Op, pe.Path
		}
	}
	return s
}

// err is the failure again: an *fs.PathError where it was one, else an
// error with the original message that still matches its errno.
func (s runStatus) err() error {
	switch {
	case s.Op != "" && s.Errno != 0:
		return &fs.PathError{Op: s.Op, Path: s.Path, Err: syscall.Errno(s.Errno)}
	case s.Errno != 0:
		return &statusError{msg: s.Msg, errno: syscall.Errno(s.Errno)}
	}
	return errors.New(s.Msg)
}

// statusError is a failure reported through a status pipe: its message as
// it was (which already names the errno), matching the errno.
type statusError struct {
	msg   string
	errno syscall.Errno
}

func (e *statusError) Error() string { return e.msg }
func (e *statusError) Unwrap() error { return e.errno }

// The hook: a binary that links this package and is started by Run with
// runEnv set is Run's helper. Running inside the fresh mount namespace Run
// created, it mounts the overlay over the root in place, changes back into
// its working directory (which now resolves through the overlay) and execs
// the command. It never returns to the program's main.
func init() {
	if sig, ok := os.LookupEnv(dieEnv); ok {
		n, _ := strconv.Atoi(sig)
		dieOf(unix.Signal(n))
	}
	if req, ok := os.LookupEnv(superviseEnv); ok {
		superviseHook(req)
	}
	if req, ok := os.LookupEnv(runEnv); ok {
		runHook(req)
	}
}

// mountView mounts the overlay over the root in place, unless the request
// is the copy fallback's: redirect_dir=on (directory renames) where the
// kernel allows it, then nodev,nosuid, so that no device node made or
// brought into the root is usable and no set-user-ID bit honoured.
func (req runRequest) mountView() error {
	if req.NoMount {
		return nil
	}
	if _, err := mountOverlayRecord(context.Background(), req.Root, req.Upper, req.Work, req.Root, Options{UserXattr: req.UserXattr}, !req.UserXattr, !req.noRecord); err != nil {
		return err
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOSUID}
	if err := unix.MountSetattr(unix.AT_FDCWD, req.Root, 0, &attr); err != nil && err != unix.ENOSYS {
		return &fs.PathError{Op: "mount_setattr", Path: req.Root, Err: err}
	}
	return nil
}

func runHook(reqEnv string) {
	var req runRequest
	if err := decodeRequest(reqEnv, &req); err != nil {
		fmt.Fprintf(os.Stderr, "cowfs kernel hook: bad %s: %v\n", runEnv, err)
		os.Exit(125)
	}
	status := os.NewFile(uintptr(req.StatusFD), "cowfs-status")
	fail := func(stage string, err error) {
		writeStatus(status, newRunStatus(stage, err))
		os.Exit(125)
	}
	syscall.CloseOnExec(req.StatusFD)
	if err := req.mountView(); err != nil {
		fail("mount", err)
	}
	// The command's directory is entered only now: under the overlay it may
	// be one that only the layer holds (the supervisors start in "/").
	if req.Dir != "" {
		if stage, err := enterDir(req.Dir, req.StatDir, req.Caps); err != nil {
			fail(stage, err)
		}
	}
	// After the mount: Landlock forbids mounting, and the rules must name
	// the overlay, not the real root beneath it.
	if req.Landlock > 0 {
		// Descriptors 1 up to the status pipe are the command's: its
		// standard output and error, then its extra files.
		var passed []int
		for fd := 1; fd < req.StatusFD; fd++ {
			passed = append(passed, fd)
		}
		if err := confineSelf(req.Landlock, req.Writable, passed); err != nil {
			fail("confine", fmt.Errorf("kernel: Run: confining the command with Landlock: %w", err))
		}
	}
	if req.ChownEPERM {
		chownAsPlainRun(req.UID, req.GID)
	}
	if err := req.lockDown(); err != nil {
		fail("confine", err)
	}
	closeOnExecFrom(req.StatusFD + 1)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, runEnv+"=") })
	err := syscall.Exec(req.Path, os.Args[1:], env)
	// As os/exec names a program it cannot start.
	fail("exec", &fs.PathError{Op: "fork/exec", Path: req.Path, Err: err})
}

// hookInInit does runHook's work in the PID namespace's init, which then
// starts the command itself: one start of this program fewer than
// starting the hook. c is the command as the supervisor request describes
// it (this program as the hook, its argv the command's after argv[0]);
// hookInInit turns it into the command. The calling goroutine must be
// locked to its thread, which starts the command: Landlock and the
// dropped capabilities are the thread's. On failure it returns the
// status to write to the hook's status pipe, which it returns open.
func hookInInit(reqEnv string, c *exec.Cmd) (*os.File, *runStatus) {
	var req runRequest
	if err := decodeRequest(reqEnv, &req); err != nil {
		fmt.Fprintf(os.Stderr, "cowfs kernel hook: bad %s: %v\n", runEnv, err)
		exit(125)
	}
	status := os.NewFile(uintptr(req.StatusFD), "cowfs-status")
	syscall.CloseOnExec(req.StatusFD)
	fail := func(stage string, err error) (*os.File, *runStatus) {
		s := newRunStatus(stage, err)
		return status, &s
	}
	if err := req.mountView(); err != nil {
		return fail("mount", err)
	}
	if req.Dir != "" {
		if stage, err := enterDir(req.Dir, req.StatDir, req.Caps); err != nil {
			return fail(stage, err)
		}
		c.Dir = "" // this process's, entered through the overlay
	}
	// The hook's status pipe is the last descriptor passed to it: the
	// command's extra files come before.
	c.Path, c.Args = req.Path, os.Args[2:]
	c.ExtraFiles = c.ExtraFiles[:req.StatusFD-3]
	c.Env = slices.DeleteFunc(c.Env, func(kv string) bool { return strings.HasPrefix(kv, runEnv+"=") })
	writable := req.Writable
	if req.Nest {
		// As the caller's own uid and gid, in a user namespace nested in
		// the one that mounted (where the caller is 0). init writes its
		// maps under /proc, after Landlock: the rule lets it.
		c.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		c.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: req.UID, HostID: 0, Size: 1}}
		c.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: req.GID, HostID: 0, Size: 1}}
		c.SysProcAttr.GidMappingsEnableSetgroups = false
		writable = append(slices.Clip(writable), "/proc")
	}
	if req.Landlock > 0 {
		var passed []int
		for fd := 1; fd < req.StatusFD; fd++ {
			passed = append(passed, fd)
		}
		if err := confineSelf(req.Landlock, writable, passed); err != nil {
			return fail("confine", fmt.Errorf("kernel: Run: confining the command with Landlock: %w", err))
		}
	}
	if req.ChownEPERM {
		chownAsPlainRun(req.UID, req.GID)
	}
	if err := req.lockDown(); err != nil {
		return fail("confine", err)
	}
	return status, nil
}

// enterDir makes dir the working directory as os/exec's child would with
// the caller's capabilities caps: stat'ed first where stat is set, as
// os/exec does before it forks. The stage says which step failed.
func enterDir(dir string, stat bool, caps uint64) (stage string, err error) {
	// Capabilities are per thread, the working directory per process.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	restore := capsAtMost(caps)
	defer restore()
	if stat {
		if _, err := os.Stat(dir); err != nil {
			return "stat", err
		}
	}
	if err := os.Chdir(dir); err != nil {
		return "chdir", err
	}
	return "", nil
}

// lockDown is the last step before the command starts, on the thread
// that starts it: unless unconfined, the sandbox's seccomp filter (see
// installSandboxFilter) and the dropped capabilities.
func (req runRequest) lockDown() error {
	if req.KeepCaps {
		return nil
	}
	if err := installSandboxFilter(req.Network); err != nil {
		return fmt.Errorf("kernel: Run: confining the command: %w", err)
	}
	dropCapabilities(req.Network)
	return nil
}

// droppedCaps are the capabilities a command never gets, even as root:
// those that reach beyond its namespaces (devices, raw I/O, modules, the
// clock, rebooting, the kernel log, audit, BPF, tracing other processes,
// real-time scheduling, which a busy thread per CPU turns into a starved
// host, memory locked past its limit, leases on others' files, which hold
// up a host process opening one for writing for 45 s, handles that open
// any inode, mounting and the rest of CAP_SYS_ADMIN, such as TIOCSTI into
// any terminal). What it keeps acts on its own files and namespaces: chown,
// setuid, binding low ports, network administration of its own network
// namespace, sethostname of its own UTS namespace.
var droppedCaps = [...]uintptr{
	unix.CAP_MKNOD, unix.CAP_SYS_ADMIN, unix.CAP_DAC_READ_SEARCH, unix.CAP_SYS_RAWIO, unix.CAP_SYS_MODULE, unix.CAP_SYS_BOOT,
	unix.CAP_SYS_TIME, unix.CAP_WAKE_ALARM, unix.CAP_SYSLOG, unix.CAP_SYS_PTRACE, unix.CAP_SYS_PACCT,
	unix.CAP_SYS_TTY_CONFIG, unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE, unix.CAP_AUDIT_CONTROL,
	unix.CAP_AUDIT_READ, unix.CAP_AUDIT_WRITE, unix.CAP_BPF, unix.CAP_PERFMON, unix.CAP_LINUX_IMMUTABLE,
	unix.CAP_SYS_RESOURCE, unix.CAP_BLOCK_SUSPEND, unix.CAP_CHECKPOINT_RESTORE, unix.CAP_SYS_NICE,
	unix.CAP_IPC_LOCK, unix.CAP_LEASE,
}

// hostNetCaps are dropped too where the command shares the host's
// network (WithNetwork): there they would administer the host's links,
// routes and firewall, and sniff or forge its traffic.
var hostNetCaps = [...]uintptr{unix.CAP_NET_ADMIN, unix.CAP_NET_RAW}

// dropCapabilities removes droppedCaps (and, where network, hostNetCaps)
// from this thread's bounding set (so that exec cannot give them back,
// even to root) and from its effective, permitted and inheritable sets.
// Best effort: without CAP_SETPCAP there is nothing to drop.
func dropCapabilities(network bool) {
	runtime.LockOSThread() // capabilities are per thread; exec follows
	drop := droppedCaps[:]
	if network {
		drop = append(slices.Clip(drop), hostNetCaps[:]...)
	}
	for _, c := range drop {
		unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return
	}
	for _, c := range drop {
		mask := ^(uint32(1) << (c % 32))
		d := &data[c/32]
		d.Effective &= mask
		d.Permitted &= mask
		d.Inheritable &= mask
	}
	unix.Capset(&hdr, &data[0])
}

// effectiveCaps is this thread's effective capability set, all where it
// cannot be read (then nothing is dropped for the caller's sake).
func effectiveCaps() uint64 {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return ^uint64(0)
	}
	return uint64(data[1].Effective)<<32 | uint64(data[0].Effective)
}

// capsAtMost lowers this thread's effective capabilities to at most caps
// (the permitted set stays, so they can be raised again) and returns what
// restores them.
func capsAtMost(caps uint64) (restore func()) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return func() {}
	}
	saved := data
	data[0].Effective &= uint32(caps)
	data[1].Effective &= uint32(caps >> 32)
	if data == saved || unix.Capset(&hdr, &data[0]) != nil {
		return func() {}
	}
	return func() { unix.Capset(&hdr, &saved[0]) }
}

// Run runs cmd with f's view overlaid on f.Root() in place, so the command
// sees its usual absolute paths, and replaces f's layer with everything the
// view holds afterwards: what the layer held before plus what the command
// changed. The real root is never written. Only the primary root is
// overlaid: roots added with [overlayfs.WithRoot] keep their layers, and
// the command sees them as they are on disk.
//
// The overlay lives in a private mount namespace of the command only. Run
// materializes the layer into a temporary upper dir, mounts the overlay in
// a new mount namespace and starts cmd; afterwards it imports the upper
// dir. As root in the initial user namespace a thread of the caller makes
// the namespaces for itself and starts cmd (see the package doc, "Running
// commands"); otherwise Run starts the current executable (which links
// this package) in the new namespaces (and, when not root in the initial
// user namespace, a new user namespace that maps the caller to uid 0,
// mounting with userxattr). In that mode the command runs as the caller's
// own uid and gid, in a user namespace nested in the mounting one, and
// cannot rename the root's directories unless [WithDirRenames].
//
// Where no overlay can be mounted (no overlayfs, no privilege, no user
// namespaces), or with [WithCopyFallback], Run copies the view into a
// temporary directory instead, runs the command there and imports the
// difference. Both ways give the same layer. The fallback is decided
// before the command runs, except when the helper process fails to mount:
// then a Stdin that is not an *os.File may already have been partly read
// (not in a thread, as root in the initial user namespace, which mounts
// before it reads Stdin).
//
// Sandbox: in every mode the command sees the host read-only but for the
// root, its TMPDIR and the WithWritable paths, in a session, PID, UTS, IPC
// and network namespace of its own (no network unless [WithNetwork]),
// with nodev,nosuid mounts, no device creation, a /dev of its own, no
// kernel keyrings, TIOCSTI, vsock or io_uring (a seccomp filter) and only
// its standard descriptors and ExtraFiles (see the package doc,
// "Confinement").
//
// Confinement: in every mode the command runs under Landlock (Linux 5.13+,
// no privileges needed) and may write only beneath the root as it sees
// it, a private temporary directory that Run creates, names in TMPDIR and
// removes afterwards, the standard character devices (/dev/null,
// /dev/zero, /dev/full, /dev/tty, /dev/pts/*), the files passed open for
// writing as its Stdout, Stderr and ExtraFiles, and the paths given to
// [WithWritable]; any other write fails inside the command with EACCES.
// Reads are not restricted. Landlock implies no_new_privs: set-user-ID
// programs run without their privileges. In the copy fallback the real
// root is never writable; Run also checks afterwards that nothing in it
// changed (the identity check Commit uses) and otherwise returns an error
// wrapping [overlayfs.ErrConflict] that names the paths, leaving the layer
// as it was. Where Landlock is missing the overlay modes run unconfined
// and say so through [WithModeReport]; the copy fallback refuses with
// [ErrUnconfined]. [Unconfined] switches confinement off. Unconfined, a
// command in an overlay mode could unmount the overlay and reach the real
// root, so Run makes the same check there.
//
// Working directory: cmd.Dir, or when empty the process's working
// directory, mapped into the copy in copy mode; it may be a directory only
// the layer holds. A Dir the command cannot enter fails as os/exec fails
// for it on a copy of the view: an *fs.PathError with Op "chdir" naming
// Dir when it cannot be stat'ed (missing, a dangling symlink, a file on
// the way, an unsearchable parent; only when cmd.SysProcAttr is nil, as
// os/exec stats it only then), else with Op "fork/exec" naming cmd.Path (a
// regular file, a directory without search permission), as for a program
// that cannot be started. When cmd.Dir is empty and
// the working directory lies outside the root, the command runs in the
// root (as it sees it). What a command writes outside the root (in
// WithWritable paths, or anywhere when unconfined) is not captured.
//
// The command's environment gets COWFS_ROOT, the path at which it sees the
// root (f.Root() itself, or the copy), and TMPDIR.
//
// Run does not start cmd itself: it runs a copy of cmd's Path, Args, Env,
// Dir, Stdin, Stdout, Stderr and ExtraFiles; SysProcAttr is kept, with the
// namespace flags added and Setsid forced (Setpgid, Setctty and
// Foreground cleared: the command has a session of its own). When the command fails, its error (an
// *exec.ExitError for a non-zero exit) is returned after its changes are
// imported. ctx kills the command as exec.CommandContext does, and with
// it everything the command started: no process of it outlives Run, nor
// the caller (see the package doc, "Processes, crashes and cleanup").
//
// What the command leaves unreadable to its own user (chmod 0) is still
// imported, with the modes it left: Run gives the owner read permission
// in its temporary upper or copy first, where the caller is not root.
//
// Cost: the layer is written out and read back whole (O(layer size) in
// time, and the re-imported contents are held in memory by f); the copy
// fallback also copies and compares the whole view (holes in files stay
// holes), and it and every unconfined run stat every path of the root
// twice for the check.
func Run(ctx context.Context, f *overlayfs.Fs, cmd *exec.Cmd, opts ...RunOption) error {
	var cfg runConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cmd.Err != nil {
		return cmd.Err
	}
	if cmd.Process != nil {
		return errors.New("kernel: Run: command already started")
	}
	if cfg.tempDir == "" {
		cfg.tempDir = defaultTempDir()
	}
	if err := tempOutsideRoot(f.Root(), cfg.tempDir); err != nil {
		return err
	}
	cleanup(cfg.tempDir, false) // opportunistic: what killed callers left
	if !cfg.forceCopy && cfg.dirRenames && overlayUserXattr(cfg) {
		cfg.forceCopy, cfg.fallback = true, noRedirectFallback
	}
	if !cfg.forceCopy {
		err := runOverlay(ctx, f, cmd, cfg)
		var me *mountFailed
		if !errors.As(err, &me) {
			return err
		}
		cfg.fallback = me.Error()
	}
	return runCopy(ctx, f, cmd, cfg)
}

// privateTemp creates the command's TMPDIR inside Run's temporary
// directory tmp, which Run removes afterwards.
func privateTemp(tmp string) (string, error) {
	dir := filepath.Join(tmp, "tmp")
	return dir, os.Mkdir(dir, 0o700)
}

// startHooked starts c, which must run this program with req as the hook
// (see runHook), under the supervisors (see superviseStart, which takes
// fallback, nsRequired and fail), and waits until the hook has exec'd the
// command. hookErr is the hook's own failure, nil once the command runs;
// err says the supervisors could not start it (a *startError) or c.Start
// failed. Unless err is set, the caller waits through sup.
func startHooked(c *exec.Cmd, req runRequest, fallback []nsAttr, nsRequired bool, fail string) (sup *supervised, hookErr *runStatus, err error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer statusR.Close()
	req.StatusFD = 3 + len(c.ExtraFiles)
	c.ExtraFiles = append(c.ExtraFiles, statusW)
	reqEnv, err := encodeRequest(req)
	if err != nil {
		statusW.Close()
		return nil, nil, err
	}
	c.Env = append(c.Env, runEnv+"="+reqEnv)
	sup, err = superviseStart(c, fallback, nsRequired, fail)
	statusW.Close()
	if err != nil {
		return nil, nil, err
	}
	if err := sup.started(); err != nil {
		sup.wait()
		return nil, nil, err
	}
	msg, _ := io.ReadAll(statusR)
	if len(msg) == 0 {
		return sup, nil, nil
	}
	s, err := readStatus(msg)
	if err != nil {
		return sup, &runStatus{Stage: "exec", Msg: fmt.Sprintf("kernel: Run: helper: %q", msg)}, nil
	}
	return sup, &s, nil
}

// defaultTempDir is os.TempDir, unless that is on an overlay (the root of
// a container, typically), which cannot hold an upper dir: then /dev/shm.
func defaultTempDir() string {
	dir := os.TempDir()
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil && st.Type == unix.OVERLAYFS_SUPER_MAGIC && unix.Access("/dev/shm", unix.W_OK|unix.X_OK) == nil {
		return "/dev/shm"
	}
	return dir
}

// mountFailed means the overlay could not be mounted; the command did not run.
type mountFailed struct{ err error }

func (e *mountFailed) Error() string { return "kernel: Run: overlay mount failed: " + e.err.Error() }
func (e *mountFailed) Unwrap() error { return e.err }

// cloneCmd copies what Run promises to honour from cmd.
func cloneCmd(ctx context.Context, cmd *exec.Cmd) *exec.Cmd {
	c := exec.CommandContext(ctx, cmd.Path)
	if len(cmd.Args) > 0 { // as os/exec: none means {Path}
		c.Args = slices.Clone(cmd.Args)
	}
	c.Env = slices.Clone(cmd.Env)
	c.Dir = cmd.Dir
	c.Stdin, c.Stdout, c.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	c.ExtraFiles = slices.Clone(cmd.ExtraFiles)
	if cmd.SysProcAttr != nil {
		a := *cmd.SysProcAttr
		c.SysProcAttr = &a
	}
	c.WaitDelay = cmd.WaitDelay
	if c.Env == nil {
		c.Env = os.Environ()
	}
	return c
}

// noRedirectFallback is Mode.Fallback when WithDirRenames chose the copy.
const noRedirectFallback = "WithDirRenames: in a user namespace the overlay cannot rename the root's directories (the kernel forces redirect_dir=nofollow with userxattr: EXDEV)"

// runUserNS reports whether the overlay run makes a user namespace.
func runUserNS(cfg runConfig) bool {
	if cfg.userNSSet {
		return cfg.userNS
	}
	return os.Geteuid() != 0
}

// overlayUserXattr reports whether the overlay run mounts with userxattr,
// and so without directory redirects.
func overlayUserXattr(cfg runConfig) bool {
	return runUserNS(cfg) || !inInitUserNS()
}

func runOverlay(ctx context.Context, f *overlayfs.Fs, cmd *exec.Cmd, cfg runConfig) error {
	userNS := runUserNS(cfg)
	opts := Options{UserXattr: overlayUserXattr(cfg)}
	mode := Mode{Kind: ModeOverlay, Root: f.Root()}
	if userNS {
		mode.Kind = ModeOverlayUserNS
	}
	abi, err := confinement(cfg, &mode)
	if err != nil {
		return err
	}
	tmp, done, err := ownedTempDir(cfg.tempDir, runDirPrefix)
	if err != nil {
		return err
	}
	defer done() // removes it, though the kernel leaves work/work with mode 0
	// WithQuota: the upper on a tmpfs of the quota's size (quota_linux.go).
	base, release, err := quotaDir(f, tmp)
	if err != nil {
		return err
	}
	defer release()
	upper, work := filepath.Join(base, "upper"), filepath.Join(base, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		return err
	}
	tmpDir, err := privateTemp(tmp)
	if err != nil {
		return err
	}
	writable, err := writablePaths(f.Root(), tmpDir, "", cfg.writable)
	if err != nil {
		return err
	}
	// The host is read-only in the command's mount namespace but for the
	// run's directory (upper, work, TMPDIR) and the extra writable paths;
	// the overlay, mounted afterwards, is writable.
	ns := nsAttr{
		Cloneflags: sandboxNS(cfg.network), Unshareflags: syscall.CLONE_NEWNS,
		HostReadOnly: !cfg.unconfined, Writable: append([]string{tmp}, writable[2:]...), LoopbackUp: true,
		Keep: []string{f.Root()},
	}
	if userNS {
		ns.Cloneflags |= syscall.CLONE_NEWUSER
		ns.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		ns.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	if abi == 0 {
		writable = nil
	}
	if err := Materialize(f, upper, opts); err != nil {
		if userNS && errors.Is(err, fs.ErrPermission) {
			// A root the caller does not own: its upper cannot take the
			// root's owner. The copy can run it.
			return &mountFailed{fmt.Errorf("the root is not the caller's to mount over in a user namespace: %w", err)}
		}
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return &mountFailed{fmt.Errorf("cannot re-execute this program: %w", err)}
	}
	dir, path := workDir(f.Root(), f.Root(), cmd.Dir, cmd.Path)
	if !filepath.IsAbs(path) && strings.Contains(path, "/") {
		path = filepath.Join(dir, path)
	}
	mode.Dir = dir
	c := cloneCmd(ctx, cmd)
	// The supervisors start in "/": dir may exist only under the overlay,
	// which the hook enters after mounting it.
	c.Path, c.Args, c.Dir = exe, append([]string{exe}, c.Args...), "/"
	req := runRequest{
		Root: f.Root(), Upper: upper, Work: work, UserXattr: opts.UserXattr,
		Dir: dir, Path: path, Landlock: abi, Writable: writable,
		StatDir: cmd.Dir != "" && cmd.SysProcAttr == nil, Caps: effectiveCaps(),
		Nest: userNS && !hasCredential(cmd), UID: os.Geteuid(), GID: os.Getegid(),
	}
	req.ChownEPERM = req.Nest && os.Geteuid() != 0
	req.KeepCaps, req.Network = cfg.unconfined, cfg.network
	c.Env = append(c.Env, RootEnv+"="+f.Root(), "TMPDIR="+tmpDir)
	// Go's child makes the new namespace's mounts private (MS_REC|MS_PRIVATE)
	// after unshare(CLONE_NEWNS), so the overlay never propagates out.
	// Unconfined, the command may unmount the overlay and reach the real
	// root (as root, or as root of its user namespace): check it afterwards,
	// as the copy fallback does.
	var before *overlayfs.LowerState
	if abi == 0 {
		before = f.LowerState()
	}
	// One start of this program fewer (thread_linux.go); a quota's tmpfs
	// is calibrated for the re-executed init's mount (quota_linux.go).
	if threadOK(userNS, cmd, cfg.maxRSS) && base == tmp && !cfg.noThread {
		// Without a context: os/exec's own watch would kill through a
		// pidfd of the thread's descriptor table from another thread.
		tc := &exec.Cmd{
			Path: path, Args: c.Args[1:], Env: c.Env, Dir: dir,
			Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr, ExtraFiles: c.ExtraFiles,
		}
		hookErr, waitErr, err := runInThread(ctx, tc, req, ns, func() {
			if cfg.report != nil {
				cfg.report(mode)
			}
		})
		if !errors.Is(err, errNoThread) {
			return finishOverlay(f, cmd, upper, opts, before, hookErr, waitErr, err)
		}
	}
	sup, hookErr, err := startHooked(c, req, []nsAttr{ns}, true, "mount")
	if err != nil {
		var se *startError
		if errors.As(err, &se) {
			return &mountFailed{se.err}
		}
		return err
	}
	if hookErr == nil && cfg.report != nil {
		cfg.report(mode)
	}
	waitErr := sup.wait()
	return finishOverlay(f, cmd, upper, opts, before, hookErr, waitErr, nil)
}

// finishOverlay ends an overlay run: the hook's failure, else the check of
// an unconfined run and the import of the upper.
func finishOverlay(f *overlayfs.Fs, cmd *exec.Cmd, upper string, opts Options, before *overlayfs.LowerState, hookErr *runStatus, waitErr, err error) error {
	if err != nil {
		return err
	}
	if hookErr != nil {
		return hookFailure(hookErr, cmd)
	}
	if before != nil {
		if err := realRootChanged(before, "unconfined"); err != nil {
			return errors.Join(waitErr, err)
		}
	}
	return importUpper(upper, f, opts, waitErr)
}

// hasCredential reports whether cmd sets its own user and groups.
func hasCredential(cmd *exec.Cmd) bool {
	return cmd.SysProcAttr != nil && cmd.SysProcAttr.Credential != nil
}

// hookFailure is the error of an overlay run whose hook failed before the
// command started: a *mountFailed when it could not mount (Run falls back
// to the copy), else as os/exec fails for cmd: its Stat of cmd.Dir as
// "chdir DIR" naming Dir as the caller did, the child's chdir and exec as
// "fork/exec PROG" naming cmd.Path. A working directory the caller did not
// set (its own, which the layer may have removed) has no os/exec
// counterpart; it stays "chdir DIR".
func hookFailure(s *runStatus, cmd *exec.Cmd) error {
	err := s.err()
	pe, _ := err.(*fs.PathError)
	switch {
	case s.Stage == "mount":
		return &mountFailed{err}
	case pe == nil:
	case s.Stage == "stat":
		pe.Op, pe.Path = "chdir", cmd.Dir
	case s.Stage == "chdir" && cmd.Dir != "":
		pe.Op, pe.Path = "fork/exec", cmd.Path
	case s.Stage == "chdir":
	default:
		asProgram(err, cmd)
	}
	return err
}

// asProgram names cmd's program in err as os/exec does, by cmd.Path as
// given, where err is a failure to start it ("fork/exec"): Run started
// it by another path (made absolute, or mapped into the copy), or started
// this program as the hook in its place.
func asProgram(err error, cmd *exec.Cmd) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "fork/exec" {
		pe.Path = cmd.Path
	}
	return err
}

// importUpper makes f's layer the upper dir: the upper holds the whole
// layer (Materialize wrote the old one into it), so the layer is reset
// first (the primary root's only: the layers of roots added with
// overlayfs.WithRoot are not in the upper); on failure the old layer is
// restored.
func importUpper(upper string, f *overlayfs.Fs, opts Options, runErr error) error {
	snap := f.Snapshot()
	f.ResetLayer()
	if err := importAs(upper, f.Root(), f, opts, makeReadable(upper), true); err != nil {
		// Skipped device nodes only: the layer keeps the rest.
		if sk := (*skippedError)(nil); !errors.As(err, &sk) {
			f.Restore(snap)
		}
		return errors.Join(runErr, err)
	}
	return runErr
}
