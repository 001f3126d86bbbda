package main

import (
	"flag"
	"fmt"

	"github.com/cowfs/cowfs/kernel"
)

func cmdClean() *command {
	return &command{
		name:      "clean",
		usageLine: "clean [DIR]",
		short:     "remove the temporary directories and mounts of killed cowfs processes",
		long: `
Clean removes what cowfs processes that were killed (a CI timeout, an OOM
kill, a second ^C) left under DIR, by default the temporary directory
($TMPDIR, else /tmp): the temporary directories of kernel.Run
(cowfs-run-*, cowfs-copy-*), and overlays mounted by kernel.Mount whose
upper directory lies under DIR, which it unmounts (lazily when still in
use) before removing their upper and work directories.

It touches only what carries an owner record whose owner is gone: the
directories and mounts of processes still running, and everything that
is not cowfs's, stay. Unmounting needs the privilege to mount; clean sees
the mounts of its own mount namespace only.

It prints each path it removed or unmounted, one per line.

Exit status: 0 when everything abandoned was removed (or there was
nothing), 2 when something could not be.
`,
		flags: func(*flag.FlagSet) func(*env, []string) int { return runClean },
	}
}

func runClean(e *env, args []string) int {
	if len(args) > 1 {
		return e.usageError("clean", "too many arguments")
	}
	var dir string
	if len(args) == 1 {
		dir = args[0]
	}
	removed, err := kernel.Cleanup(dir)
	for _, p := range removed {
		fmt.Fprintln(e.stdout, p)
	}
	if err != nil {
		return e.trouble("clean", err)
	}
	return exitSame
}
