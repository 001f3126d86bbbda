// Package kernel connects an [overlayfs.Fs] layer with the Linux kernel's
// overlay filesystem: it writes a layer as a real overlayfs upper directory
// ([Materialize]), reads an upper directory back into a layer ([Import]),
// mounts overlays ([Mount]), runs a command with the root overlaid in place
// and imports what it wrote ([Run]), and converts layers to and from OCI
// image layer tars ([WriteOCILayer], [ReadOCILayer]).
//
// The package is Linux only. On other systems every function returns an
// error wrapping [errors.ErrUnsupported].
//
// # Upper directories
//
// An upper directory written by Materialize, mounted with
// lowerdir=f.Root(), shows exactly f's view (FIFOs and sockets included):
// names, types, modes (with
// setuid, setgid and sticky), contents, symlink targets, owners and
// modification times. Deletions are 0/0 character devices (whiteouts),
// written only where they hide something: the lower has the path and the
// parent directory is merged. Never inside an opaque or upper-only
// directory, where the kernel would list them as broken entries, and never
// as xattr whiteouts, which the kernel honours in lower layers only. A
// directory that replaces a lower directory carries the opaque xattr in
// exactly one namespace: trusted.overlay.opaque, or user.overlay.opaque
// with [Options.UserXattr] for a mount with userxattr. The other namespace
// would show through as an ordinary xattr. Directories the layer does not
// hold but whose children it does, and the upper root, copy the lower's
// mode, owner and times. A directory whose time the view moved (an entry
// made, removed or renamed in it, see [overlayfs.Fs.DirTimes]) gets that
// time, and is in the upper for it alone where the layer has nothing at
// or below it, so that the mounted overlay shows the view's times.
//
// Materialize creates everything first, then applies directory metadata
// children-first, so creating a child never disturbs its parent's mtime and
// a read-only directory is made read-only last; owners are set before
// modes, since chown clears setuid bits. All writes go through an
// [os.Root] opened at the upper directory, one path component at a time,
// so a hostile layer path cannot write outside it.
//
// Import reads an upper directory the kernel wrote (or Materialize, or an
// OCI extractor) and stacks it on the current view (device nodes aside,
// see Special files below). The kernel's whiteouts
// are often hard links to one shared inode; their link count is ignored. Its
// bookkeeping xattrs (origin, impure, uuid, nlink, ...) are skipped. An
// upper that uses redirect_dir or metacopy cannot be expressed as a layer
// and is refused, before anything changes, with [ErrRedirect] or
// [ErrMetacopy]; Run's own import follows directory redirects (see
// Directory renames below). The upper root's mode and owner are imported
// where they differ from the view's root (its entry "."). The times of the
// directories the kernel wrote in, the root's too, are kept as the view's
// ([overlayfs.Fs.PutDirTime]); a directory copied up only for that
// becomes no layer entry.
//
// Content the layer keeps by reference never changes afterwards: a file of
// 1 MiB or more is imported as a private copy (a reflink where the
// filesystem can, else a sparse copy into an unlinked file), unless it is
// Run's own (its upper or copy, the command gone) and has one link. A
// command's output hard-linked into a [WithWritable] directory has two,
// and is copied: writing the linked name later leaves the layer as it was.
//
// # Mounting
//
// Mount always pins index=off, metacopy=off and redirect_dir=nofollow, so
// the kernel writes only what Import understands, and adds userxattr when
// asked. It uses the new mount API (fsopen, fsconfig with lowerdir+,
// fsmount, move_mount); on kernels before 6.8 it falls back to mount(2)
// with backslash, comma and colon escaped and the option string under one
// page. Paths longer than fsconfig's 255-byte strings are passed as
// directory file descriptors (Linux 6.13+). Upper and work must be on one
// filesystem that is not itself an overlay; Mount checks this first and
// says so ([ErrUpperFilesystem]). After mounting it checks that the kernel
// did not silently fall back to read-only ([ErrReadOnly]), as it does when
// it cannot use the work directory.
//
// The lower must not change while it is mounted: the kernel's behaviour is
// then undefined.
//
// # Directory renames
//
// A command that renames a directory the root already has (rename(2) of a
// lower or merged directory: python's os.rename, Go's os.Rename, mv) works
// in overlay mode when Run mounts as root in the initial user namespace:
// Run's own mount (not [Mount], whose default stays as above) uses
// redirect_dir=on, the kernel records the rename as a
// trusted.overlay.redirect xattr on the renamed directory's upper copy,
// and Run's import follows it as the kernel's lookup does: it moves the
// lower subtree to the new name in the layer (the overlayfs Rename, file
// contents stay lazy references to the lower), then stacks the upper's
// own changes on it. The layer is the same as the copy mode's and the
// in-process Fs's for the same command. The kernel refuses redirect_dir=on
// together with userxattr (it forces redirect_dir=nofollow: redirects
// neither made nor followed), and an unprivileged user namespace has no
// other way to record a renamed lower directory (trusted.* xattrs need
// CAP_SYS_ADMIN in the initial user namespace; metacopy is refused with
// userxattr too). So in a user namespace ([ModeOverlayUserNS]) such a
// rename fails with EXDEV, as it does across filesystems: mv copes by
// copying, os.Rename and python's os.rename do not. [WithDirRenames]
// makes such commands work as in a plain run everywhere: where Run would
// mount with userxattr, it runs the command in the copy mode instead and
// says so (Mode.Fallback); as root it changes nothing.
// TestRunDirectoryRename checks it as uid 65534 against a plain run.
//
// # Running commands
//
// Run materializes f's layer into a temporary upper directory, mounts the
// overlay over the root in place in a new mount namespace, enters the
// working directory (now inside the overlay) and starts the command. The
// command sees the root at its usual absolute path, with the layer's
// changes, and every write lands in the upper directory, which Run then
// imports. The mount dies with the namespace.
//
// As root in the initial user namespace (the usual case in CI and
// containers), without a quota or a cmd.SysProcAttr, and in a caller with
// at most 128 MiB resident (the fork below copies its page tables: beyond
// that a start of the program costs less), all of this happens
// in one thread of the caller, locked to its goroutine and ended
// afterwards: it unshares its descriptor table, file system attributes
// and the mount, PID, UTS, IPC and network namespaces for itself alone,
// mounts, forks the PID namespace's init (a bare fork that runs a few
// system calls and never executes anything, see below), confines itself
// (Landlock, capabilities) and starts the command with os/exec; its
// children inherit all of that, the rest of the process never sees it.
// Otherwise (a user namespace must be made, which a thread of a
// multithreaded process cannot do; a quota; a SysProcAttr) Run starts
// the current executable again as the PID namespace's init, in the new
// namespaces (and, when the caller is not root in the initial user
// namespace, a new user namespace that maps it to uid 0). An init
// function of this package recognises that process by an environment
// variable and does the same work. Re-executing the program itself needs
// no external tool and works in test binaries; its cost is that any
// program calling Run must link this package, which it does by calling
// Run.
//
// Run covers the primary root, f.Root(), only: the command sees roots
// added with [overlayfs.WithRoot] as they are on disk, without their
// layers, and cannot write them when confined; their layers stay as they
// were.
//
// Where no overlay can be mounted (no overlayfs, no privilege, user
// namespaces disabled), or with [WithCopyFallback], Run copies the view to
// a temporary directory, runs the command there and imports the
// difference. The layer ends up the same. The environment variable
// COWFS_ROOT tells the command where the root is (in both modes); in copy
// mode the root's real path is not redirected, and writes to it fail.
//
// An Fs made with [overlayfs.WithQuota] bounds the command too: in overlay
// mode the upper and work directories go on a tmpfs mounted with the
// quota's size= and nr_inodes= (plus the few inodes and the page Run keeps
// there itself), so a command that fills it sees ENOSPC and short writes
// as on a full disk, and the layer imports what it managed to write
// (TestRunQuota compares it with a plain run in a real tmpfs). The upper
// holds the whole layer, as the quota counts it; whiteouts are inodes on
// the tmpfs (the quota does not count them). Mounting the tmpfs needs
// CAP_SYS_ADMIN: without it Run with a quota fails rather than run the
// command unbounded. The copy fallback does not bound the command; the
// layer counts what it imported.
//
// A read-only command leaves no change in either mode, with one limit in
// the copy fallback: its files have new inode numbers and ctimes, which
// tools that record them in the tree take for touched files. Git's index
// is the common case: git status refreshes the index's stat cache and
// rewrites .git/index (different bytes: a real change). The copy fallback
// therefore runs the command with GIT_OPTIONAL_LOCKS=0 (unless its
// environment sets it), which makes git skip such opportunistic writes, as
// a plain run has none to make; an explicit refresh (git update-index
// --refresh, git add of unchanged files) still rewrites the index there.
// The overlay modes keep the lower's inodes and ctimes and have no such
// limit; Run uses them whenever it can mount.
//
// # Confinement
//
// Run is a sandbox with bubblewrap's guarantees (as under bwrap --ro-bind
// / / --dev /dev --proc /proc --unshare-all --die-with-parent
// --new-session), with cowfs's overlay as the command's root. In both
// modes, as root and unprivileged:
//
//   - The host is read-only in the command's mount namespace, except the
//     root as it sees it (the overlay, mounted afterwards, or the copy),
//     Run's temporary directory (its private TMPDIR) and the
//     [WithWritable] paths: no write, chmod, chown, touch or xattr
//     reaches the host through any name (a hard link outside the root to
//     a root file included); they fail with EROFS. This needs
//     mount_setattr (Linux 5.12); the run fails where it is refused.
//     Device nodes (/dev/null, /dev/pts/N) stay writable: a read-only
//     mount does not govern them. The command's /proc is a new mount;
//     its machine-wide entries (sys, sysrq-trigger, irq, bus) are made
//     read-only as under bwrap, so that without Landlock too root cannot
//     write /proc/sys/kernel/core_pattern (a program the kernel would run
//     as root on the host).
//   - The root's mount (the overlay, or the copy's directory) is nodev and
//     nosuid, and no device node can be made: Landlock never grants
//     LANDLOCK_ACCESS_FS_MAKE_CHAR or MAKE_BLOCK (EACCES), CAP_MKNOD is
//     dropped (EPERM), a user namespace cannot anyway.
//   - The command runs in a session of its own without a controlling
//     terminal (setsid): it cannot push input into the caller's terminal
//     with TIOCSTI (EPERM; /dev/tty is ENXIO), and kill(0) reaches its own
//     process group only. A seccomp filter refuses TIOCSTI and TIOCLINUX
//     outright (EPERM), so a terminal passed to it that is nobody's
//     controlling terminal, which TIOCSCTTY would make its own, takes no
//     input either, and TIOCSETD and TIOCEXCL, which would leave the
//     caller's terminal broken after the run (N_NULL drops every byte;
//     exclusive, it cannot be opened again). With Landlock ABI 5 (Linux 6.10) it may use device
//     ioctls only on the standard devices and terminals it opens.
//   - Its /dev is its own, as under bwrap --dev /dev: a tmpfs holding
//     null, zero, full, random, urandom and tty (the host's nodes), the
//     symlinks stdin, stdout, stderr, fd, core and ptmx, a devpts
//     instance of its own on pts, and an empty shm (the host's where
//     the root, Run's temporary directory or a WithWritable path lies in
//     it; one
//     elsewhere in /dev is refused). No
//     other device of the host is reachable by name: as root it could
//     otherwise read the host's disks, and write to any terminal and read
//     its input. The terminals passed to it as descriptors still work.
//   - The kernel's keyrings are not namespaced: the command inherits the
//     caller's session keyring, and root's user keyring is every root
//     process's. The seccomp filter refuses keyctl, add_key and
//     request_key (EPERM), as Docker's and Flatpak's do. It also refuses
//     vsock sockets (EAFNOSUPPORT) unless [WithNetwork]: vsock reaches
//     the hypervisor's host from any network namespace. And io_uring
//     (ENOSYS, as on a kernel without it, so that programs fall back to
//     system calls, as under Docker): its operations are system calls
//     out of a filter's sight (IORING_OP_SOCKET made vsock sockets). The
//     filter is written for amd64 (with i386 calls) and arm64 (with arm
//     calls); other architectures run without it.
//   - It has its own PID namespace (kill(-1) reaches only its own
//     processes; with Landlock ABI 6, Linux 6.12, no signal leaves its
//     Landlock domain), UTS namespace (sethostname is its own), IPC
//     namespace (System V objects and POSIX message queues are its own)
//     and network namespace with only a loopback interface, up, unless
//     [WithNetwork]: no host, no service on the host's loopback, no
//     abstract unix socket outside (also scoped by Landlock ABI 6).
//   - Only its standard input, output and error and cmd.ExtraFiles reach
//     it: every other descriptor of the caller, close-on-exec or not, is
//     closed (close_range with CLOSE_RANGE_CLOEXEC, Linux 5.11, else one
//     by one) in the supervisors and before the command starts.
//   - As root it keeps the capabilities that act on its own files and
//     namespaces (chown, setuid, binding low ports, its network and
//     hostname); those that reach the machine are dropped from every set
//     and the bounding set: CAP_MKNOD, CAP_SYS_ADMIN (mount, TIOCSTI into
//     any terminal), CAP_DAC_READ_SEARCH (open_by_handle_at, which opens
//     any inode of a file system through any mount of it: through the
//     writable TMPDIR or copy, a host file would take chmod and chown),
//     CAP_SYS_RAWIO, CAP_SYS_MODULE, CAP_SYS_BOOT,
//     CAP_SYS_TIME, CAP_SYS_PTRACE, CAP_SYSLOG, CAP_BPF, CAP_PERFMON,
//     CAP_AUDIT_*, CAP_MAC_*, CAP_SYS_RESOURCE, CAP_LINUX_IMMUTABLE,
//     CAP_SYS_NICE (real-time scheduling: a busy SCHED_FIFO thread per CPU
//     starves the host), CAP_IPC_LOCK (memory locked past its limit),
//     CAP_LEASE (a lease on another user's host file holds up every
//     process that opens it for writing) and a few more (see
//     droppedCaps). With [WithNetwork], CAP_NET_ADMIN and
//     CAP_NET_RAW too: the network is then the host's (as under bwrap
//     --share-net, whose root is root of a user namespace only). The
//     re-executed init is not dumpable, so the command cannot ptrace the
//     thread of it that shares its credentials.
//   - It runs as the caller's own uid and gid. Unprivileged, the overlay
//     is mounted by uid 0 of a user namespace that maps the caller, and
//     the command runs in a user namespace nested in it that maps the
//     caller's ids back, so id -u prints the caller's uid; a chown to
//     another owner fails with EPERM, as in a plain run, not the user
//     namespace's EINVAL (a seccomp filter, amd64 and arm64). Owners the
//     namespace cannot map read as 65534.
//
// Landlock (Linux 5.13+, no privileges needed) also confines writes: the
// command may write only beneath the root as it sees it, its private
// TMPDIR, the standard character devices (/dev/null, /dev/zero,
// /dev/full, /dev/tty, /dev/ptmx, /dev/random, /dev/urandom, /dev/pts/*),
// the files given to it as standard output, standard error or extra files
// (so that /dev/stdout and /proc/self/fd/N work when those are regular
// files), and the paths given to [WithWritable]. Any other write fails
// with EROFS (the read-only host, checked first) or EACCES; reads and
// execution are not restricted. Renaming or linking across directories
// needs Landlock ABI 2 (Linux 5.19); with ABI 1 the kernel refuses it with
// EXDEV, which mv handles by copying. Landlock requires no_new_privs:
// set-user-ID programs run without their privileges. The helper applies
// the ruleset to the thread that starts the command, after the mount
// (which Landlock would forbid), so the command and its children inherit
// it. [Mode] says which protections the kernel lacks (Mode.Missing).
//
// What the sandbox does not prevent: reads (the command sees the host's
// files as its user may); pathname unix sockets of the host (a D-Bus,
// Docker or ssh-agent socket) stay reachable, as under bubblewrap, since
// connecting needs no write to the file system and Landlock (up to ABI
// 7) does not govern it; resource use (CPU, memory, disk in the temporary
// directory: no cgroup limits); with [WithNetwork], the network; and
// what an unconfined run ([Unconfined], which also leaves the host
// writable) or a kernel without Landlock lets through, as below.
//
// In the copy fallback the real root is never writable: read-only in the
// command's mount namespace like the rest of the host, and a WithWritable
// path that holds it is refused ([ErrUnconfined]); one inside the root
// changes nothing in any mode, the root being writable already. Run also
// takes the identity of every path of the real root (what Commit's
// conflict check compares) before the copy and checks it afterwards; if
// anything changed (an unconfined command wrote there), it imports nothing
// and returns an error wrapping [overlayfs.ErrConflict] that names the
// paths. The layer never receives an inverted change. A read-only command
// can still leave changes in copy mode where a tool records inode numbers
// or ctimes (git's index): the copy has new ones. The overlay, chosen
// whenever it can be, has no such effect.
//
// Where Landlock is missing (or [NoLandlockEnv] is set, for tests), the
// overlay modes run the command without it and say so through
// [WithModeReport]; the copy fallback refuses with [ErrUnconfined]. So
// it does where no namespace can be made (a container whose seccomp
// profile refuses them, user namespaces disabled): the command would run
// on the host's mounts (chown, chmod, utimes and xattrs of host files,
// which Landlock does not govern, would reach them), network, /dev and
// processes (TestSandboxNoNamespaces).
// [Unconfined] switches Landlock and the read-only host off in every
// mode. An unconfined command may unmount the overlay where it keeps
// CAP_SYS_ADMIN of its mount namespace (in a user namespace) and reach the
// real root. Run therefore checks the real root afterwards in every
// unconfined mode, as the copy fallback does, and refuses to import a run
// that changed it. What a command writes outside the root (WithWritable
// paths, or anywhere when unconfined) is neither captured nor undone.
//
// Unprivileged, on a root the caller does not own, the overlay's upper
// cannot take the root's owner: Run then falls back to the copy and says
// so (Mode.Fallback).
//
// A command whose cmd.Dir is empty runs in the process's working
// directory when that lies inside the root (in copy mode, the same
// directory of the copy), and in the root otherwise, so relative names
// never escape. [WithModeReport] receives the [Mode] used: kernel overlay
// as root, kernel overlay in a user namespace, or copy; confined or not;
// where the command sees the root and runs.
//
// # Special files
//
// FIFOs and sockets a command leaves are imported as layer entries of
// their own type and recreated by Materialize (mkfifo, mknod with
// S_IFSOCK); the copy fallback copies those of the view as what they are.
// Device nodes, which a layer cannot hold, are skipped: Import and Run
// import everything else first, then return an error wrapping
// [ErrUnsupportedType] that names each skipped path.
//
// The root's ".cowfs-commit", the name overlayfs's Commit keeps for its
// journal, is skipped the same way (a layer holding it could never be
// committed): Import and Run import everything else and return an error
// wrapping [ErrReservedName]; ReadOCILayer refuses such a tar.
//
// Hard links are carried: Materialize makes the names of one layer file
// ([overlayfs.Fs.Link]) hard links in the upper, and Import makes the
// names of one upper inode (a regular file, symlink, FIFO or socket with
// a link count above one; whiteouts aside) names of one layer file, so a
// command's ln or cp -al run through Run comes back as links. Run's copy
// fallback does too: its copy of the view links the names the view shows
// as one file, and the names of one inode in the copy come back as links.
//
// One more thing a layer does not hold, which Import and Run leave out
// without an error: extended attributes (other than the overlay's own,
// which are read as above). Inode flags (chattr) are not imported either.
//
// # Processes, crashes and cleanup
//
// No process that Run starts outlives it: not when the command returns,
// not when ctx is cancelled, not when the caller dies, even by SIGKILL.
//
// In a thread (as root, see Running commands), init is a fork of the
// caller that mounts the namespace's /proc, closes every descriptor and
// reaps orphans; it carries PR_SET_PDEATHSIG SIGKILL, tied to the thread,
// which lives until the command is gone (the thread ends only with the
// caller otherwise), and also ends when a pipe whose write end only the
// thread holds closes (within 0.1 s): Landlock's signal scope can refuse
// the death signal from the confined thread. The command is its sibling in its namespace, started
// by os/exec, so Run's error is the command's own (*exec.ExitError with
// its code or signal). When the command exits, and when ctx is cancelled,
// Run kills init, the kernel kills the rest of the namespace, and Run
// returns when init is reaped, so all are gone; when the caller dies, the
// thread's death kills init, with the same effect.
//
// Otherwise Run starts an init process (this program again) in a new PID namespace
// (inside the user namespace, when there is one), which starts the
// command. init reads a pipe from the caller: at end of file (the caller
// is gone) it exits; ctx kills it; either way the kernel kills the rest
// of the namespace. init exits with the command's code; when the command
// died of a signal (which the init of a PID namespace cannot die of
// itself), Run's *exec.ExitError comes from this program started once
// more to die of the same signal. Where no PID namespace can be made, a
// supervisor starts first, as follows. When the command exits, init exits
// and the kernel kills whatever the command left in the namespace. When
// ctx is cancelled or the caller dies, the supervisor (which reads a pipe
// from the caller) kills init, and the kernel does the rest; init and the
// command also carry PR_SET_PDEATHSIG SIGKILL. The overlay's mount
// namespace belongs to these processes only, so it goes with them. Run
// returns only when they are all gone. The supervisor then exits as the
// command did (the same code, or killed by the same signal), so Run's
// *exec.ExitError reads as the command's own. The supervisors ignore
// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGPIPE, so that
// what a terminal or a kill of the caller's process group sends does not
// kill them before the caller; the command, in a session of its own, does
// not get it (the caller's death or ctx then ends it). init also does the
// helper's work (mount, working directory, Landlock, capabilities) and
// starts the command itself.
//
// The PID namespace gets its own /proc where one can be mounted (a
// container whose /proc has masked paths refuses; the caller's then
// stays), so that $$ and getpid() name the command's own entries there;
// processes outside the namespace are not visible in it.
//
// The re-executed init costs one more start of the program per Run (4–7
// ms for a test binary), the thread's fork a copy of the page tables
// (BenchmarkRunVsBwrap measures both against bubblewrap in one run).
//
// The copy fallback does the same, with a mount namespace for the /proc.
// Without root it makes them inside a user namespace that maps the caller
// to itself, so the command keeps its uid and gid (owners it cannot map
// read as 65534, and set-user-ID programs of other owners gain nothing).
// Where no PID namespace can be made at all (unconfined only, see
// Confinement), the supervisor runs the command as a child subreaper and kills all its descendants; only a
// SIGKILL of the supervisor itself then lets the command's descendants
// escape (the command still dies of its PR_SET_PDEATHSIG).
//
// What a killed caller does leave are files and mounts: Run's temporary
// directories (cowfs-run-* holding upper and work, cowfs-copy-* holding a
// full copy of the view) and overlays mounted by [Mount] and never
// unmounted. Each carries an owner record, a file whose flock lock its
// owner holds (in Run's directories ".cowfs-owner", beside a mount's upper
// directory UPPER.cowfs-owner); the kernel releases the lock when the
// owner dies. Mount's overlays carry the source "cowfs", so that
// /proc/self/mountinfo tells them apart. [Cleanup] removes what has no
// live owner; `replay clean` does the same from a shell. Run, whenever it
// starts, removes the abandoned temporary directories of its own uid
// beside its own (it unmounts nothing: that is left to an explicit
// Cleanup). Neither follows a symlink nor changes a mode by path: they
// work through directory descriptors (openat, unlinkat, O_NOFOLLOW).
//
// # OCI layers
//
// WriteOCILayer and ReadOCILayer use the image-spec conventions: ".wh.NAME"
// deletes NAME, ".wh..wh..opq" makes its directory opaque, and markers act
// on the layers below only, never on entries of the same tar. ReadOCILayer
// also takes what tools write when they tar an upper directly: 0/0
// character devices and PAX xattrs (SCHILY.xattr.trusted.overlay.opaque).
// A hard link's target must be a file or symlink of the same tar or of
// the view below (the layers read before), looked up one component at a
// time without following any symlink: a link never reads through a
// symlink out of the root (a rootfs's etc/localtime -> /usr/share/...
// stays a symlink); anything else is refused with [ErrLinkTarget].
// ReadOCILayer is all or nothing: on any error the layer is as it was.
//
// # Privileges
//
// Materialize and Import need none for a layer whose owners are the
// caller's: 0/0 whiteouts (Linux 5.8+) and user.* xattrs are unprivileged.
// trusted.* xattrs and foreign owners need root. Mount needs CAP_SYS_ADMIN:
// root, or any user inside its own user namespace (unshare -Urm) with
// Options.UserXattr (Linux 5.11+).
//
// # Errors
//
// Errors are *fs.PathError (or wrap one) naming the path involved: the
// upper path for Materialize and Import, the mount target for Mount. They
// wrap the errno the kernel returned, so errors.Is(err, fs.ErrPermission)
// works, and this package's sentinels for its own conditions (whose text
// does not repeat "kernel:": the wrapping message or path error says
// where). Mount errors carry the kernel's own log lines from the fs
// context and a hint. ReadOCILayer and WriteOCILayer return
// *fs.PathError with Op "oci" naming the tar entry.
//
// # Concurrency
//
// Functions take no locks of their own; Materialize reads a consistent
// snapshot of the layer ([overlayfs.Fs.Layer]). Import and ReadOCILayer
// change the layer and must not race with other writers of the same Fs.
// Run must not race with other uses of the same Fs.
//
// # Where things live
//
// options.go: [Options] (what an upper dir is); runoptions.go: the
// [RunOption]s (how Run behaves) and the environment variables Run reads
// or sets; mode.go: [Mode], how Run ran a command; errors.go: the
// sentinels. materialize_linux.go with plan_linux.go: [Materialize];
// import_linux.go: [Import]; link_linux.go: hard links in Materialize,
// Import and the copy fallback; redirect_linux.go: Run's import of directory
// renames; private_linux.go: content kept by reference; special_linux.go:
// FIFOs, sockets and devices in a layer; mount_linux.go: [Mount];
// oci_linux.go: the OCI layer tar; run_linux.go: [Run] and its re-executed
// helper (the mount, dropped capabilities); thread_linux.go: the run in a
// thread as root, and fork_linux.go its forked init; runcopy_linux.go: Run's copy
// fallback; quota_linux.go: the tmpfs that bounds a run of an Fs with a
// quota; landlock_linux.go: confinement; seccomp_linux.go: chown's EPERM
// in a user namespace and the sandbox's filter (keyrings, TIOCSTI, vsock,
// io_uring), with seccomp_legacy_linux.go and seccomp_nolegacy_linux.go
// for the calls only some architectures have; lifecycle_linux.go (also the sandbox's namespaces, read-only
// host and /proc, its own /dev, and descriptors) and
// owner_linux.go: the supervisors and owner records that let [Cleanup]
// (cleanup_linux.go) tell abandoned temporary directories and mounts from
// live ones; userns_linux.go, workdir_linux.go and readable_linux.go:
// small helpers of Run;
// stub_other.go: the other platforms.
package kernel
