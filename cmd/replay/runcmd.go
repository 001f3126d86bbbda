package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"sync"

	"github.com/cowfs/cowfs/kernel"
	"github.com/cowfs/cowfs/overlayfs"
)

func cmdRun() *command {
	return &command{
		name:      "run",
		usageLine: "run [-root DIR] [-patch] [-copy] [-allow-write PATH]... [-net] [-unconfined] [-v] -- command [args...]",
		short:     "run a command over a copy-on-write view and list what it wrote",
		long: `
Run runs the command with the directory tree at -root (default: the
current directory) overlaid in place by a copy-on-write layer, so that the
command sees its usual paths but the tree itself is never written. On
Linux the overlay is a real kernel overlayfs in a private mount namespace
(as root, or in an unprivileged user namespace); where none can be
mounted, or with -copy, the command runs in a temporary copy of the tree
instead, with the same result.

A read-only command leaves no change in either mode, with one limit in
the copy: its files have new inode numbers and ctimes, so a tool that
records those in the tree (git's index) takes them for touched. There run
sets GIT_OPTIONAL_LOCKS=0 (unless already set), so that git status writes
nothing, as in a plain run; an explicit refresh (git update-index
--refresh) still rewrites .git/index. The kernel overlay keeps the tree's
inodes and ctimes, and is used whenever it can be mounted. Renaming a
directory the tree has works in the copy and, as root, in the kernel
overlay; in a user namespace the kernel refuses it (EXDEV: mv copes by
copying, a program's rename(2) fails), so use -copy for such commands.

The command runs in the current directory when that lies inside the root
(in the copy, the same directory of the copy), and otherwise in the root
itself, so relative names always land in the tree. COWFS_ROOT names the
root as the command sees it: the root, or the copy.

The command runs in a sandbox, as under bubblewrap with every namespace:
the host is read-only in its mount namespace (any write, chmod, chown or
touch outside the tree fails with "Read-only file system") except the
tree, a private temporary directory named by TMPDIR that is removed
afterwards and each -allow-write PATH (a build cache, say; what is written
there is not captured or undone); the tree is mounted nodev,nosuid and no
device node can be made; the command has its own session without a
controlling terminal (no input pushed into yours), its own PID, UTS and
IPC namespaces (signals, sethostname and message queues stay inside) and
no network (only a loopback interface) unless -net is given; only its
standard input, output and error reach it. It runs as your own uid and
gid; as root it keeps the capabilities that act on its own files and
namespaces, not those that reach the machine (mknod, mount, raw I/O,
modules, the clock). It is also confined with Landlock (Linux 5.13 or
later; no privileges needed): writes only under the places above and to
the standard character devices (/dev/null, /dev/zero, /dev/full, /dev/tty,
/dev/pts/*); device ioctls only on those (Linux 6.10); signals and
abstract unix sockets only among its own processes (Linux 6.12).
Pathname unix sockets of the host (a D-Bus or Docker socket, say) stay
reachable, as under bubblewrap. Reads are not restricted. Set-user-ID
programs run without their privileges. -unconfined turns Landlock and the
read-only host off. Without Landlock in the kernel, the kernel overlay
still runs, without it, and the copy fallback refuses to run unless
-unconfined is given. Whenever the command runs unconfined or in the copy
fallback, run checks that the tree itself did not change while the
command ran (an unconfined command can unmount the overlay), and reports
trouble (nothing imported) if it did. -v prints the mode used on standard
error: kernel overlay (as root or in a user namespace) or copy, confined
or not, and why the overlay was not used.

In the copy fallback a read-only command can still leave changes where a
tool records inode numbers or ctimes (git's index): the copy has new
ones. The kernel overlay, chosen whenever it can be, has no such effect.

Renaming a directory the tree already has (mv, python's os.rename, Go's
os.Rename) works in the copy and, as root, in the kernel overlay. Not
as root, the overlay runs in a user namespace, where the kernel cannot
record such a rename: it fails with "Invalid cross-device link" (mv copes
by copying). -renames runs such a command in the copy instead when that
is the case (as root it changes nothing).

Afterwards run prints what the command changed under the root, one line
per path as git's name-status does ("A path", "M path", "D path"), and
with -patch the changes as a git patch after the list; git apply skips the
list and applies the patch (paths in a .git directory, which git apply
refuses, are left out of it and named in a line before the first diff), so

	replay run -patch -- make generate | git apply

accepts the command's effects.

The command's standard input is replay's; its standard output and
standard error go to replay's standard error, so that standard output
holds only the changes.

Exit status: 0 when the command succeeded, 1 when it exited with a
non-zero status (its changes are printed all the same), 2 when it could
not start or the root could not be overlaid, or when it left device nodes,
which are not imported (every other change is, and is printed).
`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			root := fs.String("root", ".", "overlay the tree at `DIR`")
			patch := fs.Bool("patch", false, "print a git patch after the change list")
			copyFallback := fs.Bool("copy", false, "run in a temporary copy of the tree, not a kernel overlay")
			var o runOpts
			fs.Func("allow-write", "let the command also write under `PATH` (repeatable; not captured)", func(p string) error {
				o.allowWrite = append(o.allowWrite, p)
				return nil
			})
			fs.BoolVar(&o.unconfined, "unconfined", false, "do not confine the command's writes with Landlock nor make the host read-only")
			fs.BoolVar(&o.network, "net", false, "let the command use the host's network (default: none)")
			fs.BoolVar(&o.renames, "renames", false, "the command renames directories of the tree: not as root, run it in the copy")
			fs.BoolVar(&o.verbose, "v", false, "print the mode used (overlay or copy, confined or not) on standard error")
			return func(e *env, args []string) int {
				o.root, o.patch, o.copy = *root, *patch, *copyFallback
				return runRun(e, args, o)
			}
		},
	}
}

// runOpts are the flags of replay run.
type runOpts struct {
	root        string
	patch, copy bool
	allowWrite  []string
	unconfined  bool
	network     bool
	renames     bool
	verbose     bool
}

func runRun(e *env, args []string, o runOpts) int {
	if len(args) == 0 {
		return e.usageError("run", "no command given")
	}
	f, err := overlayfs.New(o.root)
	if err != nil {
		return e.trouble("run", err)
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		return e.trouble("run", fmt.Errorf("command could not start: %w", err))
	}
	cmd := exec.Command(path, args[1:]...)
	cmd.Args[0] = args[0]
	// The mode report arrives while the command runs: one lock orders its
	// line with the command's output when that is copied by goroutines.
	stderr := &lockedWriter{w: e.stderr}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, stderr, stderr
	// cmd.Dir stays empty: Run keeps a working directory inside the root
	// and moves one outside it into the root.
	var opts []kernel.RunOption
	if o.copy {
		opts = append(opts, kernel.WithCopyFallback())
	}
	if len(o.allowWrite) > 0 {
		opts = append(opts, kernel.WithWritable(o.allowWrite...))
	}
	if o.unconfined {
		opts = append(opts, kernel.Unconfined())
	}
	if o.network {
		opts = append(opts, kernel.WithNetwork())
	}
	if o.renames {
		opts = append(opts, kernel.WithDirRenames())
	}
	if o.verbose {
		opts = append(opts, kernel.WithModeReport(func(m kernel.Mode) {
			fmt.Fprintf(stderr, "replay run: %s; command runs in %s\n", m, m.Dir)
		}))
	}
	code := exitSame
	err = kernel.Run(e.ctx, f, cmd, opts...)
	var exitErr *exec.ExitError
	switch {
	case errors.Is(err, kernel.ErrUnsupportedType):
		// Device nodes the command made were skipped; everything else was
		// imported and is listed.
		fmt.Fprintf(e.stderr, "replay run: %v\n", err)
		code = exitTrouble
	case errors.As(err, &exitErr):
		fmt.Fprintf(e.stderr, "replay run: %s: %v\n", args[0], err)
		code = exitDiffers
	case err != nil:
		return e.trouble("run", err)
	}
	for _, c := range f.Changes() {
		fmt.Fprintln(e.stdout, c.String())
	}
	if o.patch {
		if err := f.WriteDiff(e.stdout); err != nil {
			return e.trouble("run", err)
		}
	}
	return code
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
