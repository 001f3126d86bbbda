package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"

	"github.com/cowfs/cowfs/kernel"
	"github.com/cowfs/cowfs/overlayfs"
)

func cmdRun() *command {
	return &command{
		name:      "run",
		usageLine: "run [-root DIR] [-patch] [-copy] -- command [args...]",
		short:     "run a command over a copy-on-write view and list what it wrote",
		long: `
Run runs the command with the directory tree at -root (default: the
current directory) overlaid in place by a copy-on-write layer, so that the
command sees its usual paths but the tree itself is never written. On
Linux the overlay is a real kernel overlayfs in a private mount namespace
(as root, or in an unprivileged user namespace); where none can be
mounted, or with -copy, the command runs in a temporary copy of the tree
instead, with the same result.

Afterwards run prints what the command changed under the root, one line
per path as git's name-status does ("A path", "M path", "D path"), and
with -patch the changes as a git patch after the list; git apply skips the
list and applies the patch, so

	replay run -patch -- make generate | git apply

accepts the command's effects.

The command's standard input is replay's; its standard output and
standard error go to replay's standard error, so that standard output
holds only the changes. The command sees COWFS_ROOT, the path at which it
sees the root.

Exit status: 0 when the command succeeded, 1 when it exited with a
non-zero status (its changes are printed all the same), 2 when it could
not start or the root could not be overlaid.
`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			root := fs.String("root", ".", "overlay the tree at `DIR`")
			patch := fs.Bool("patch", false, "print a git patch after the change list")
			copyFallback := fs.Bool("copy", false, "run in a temporary copy of the tree, not a kernel overlay")
			return func(e *env, args []string) int { return runRun(e, args, *root, *patch, *copyFallback) }
		},
	}
}

func runRun(e *env, args []string, root string, patch, copyFallback bool) int {
	if len(args) == 0 {
		return e.usageError("run", "no command given")
	}
	f, err := overlayfs.New(root)
	if err != nil {
		return e.trouble("run", err)
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		return e.trouble("run", fmt.Errorf("command could not start: %w", err))
	}
	cmd := exec.Command(path, args[1:]...)
	cmd.Args[0] = args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stderr, e.stderr
	if wd, err := os.Getwd(); err == nil {
		cmd.Dir = wd
	}
	var opts []kernel.RunOption
	if copyFallback {
		opts = append(opts, kernel.WithCopyFallback())
	}
	code := exitSame
	err = kernel.Run(e.ctx, f, cmd, opts...)
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		fmt.Fprintf(e.stderr, "replay run: %s: %v\n", args[0], err)
		code = exitDiffers
	case err != nil:
		return e.trouble("run", err)
	}
	for _, c := range f.Changes() {
		fmt.Fprintln(e.stdout, c.String())
	}
	if patch {
		if err := f.WriteDiff(e.stdout); err != nil {
			return e.trouble("run", err)
		}
	}
	return code
}
