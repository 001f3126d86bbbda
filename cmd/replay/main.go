package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

// Exit codes of every subcommand.
const (
	exitSame    = 0 // same, valid, success
	exitDiffers = 1 // differs, invalid, the command failed
	exitTrouble = 2 // bad usage, unreadable or newer tape, command could not start
)

func main() { os.Exit(run(os.Args[1:])) }

// run is main without the exit, for tests.
func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	e := &env{
		ctx:    ctx,
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
		tty:    isTerminal(os.Stderr),
	}
	return e.main(args)
}

// env is what a subcommand may use of the outside world, so that nothing
// reaches for os.Stdout or os.Getenv on its own.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	tty    bool // stderr is a terminal: live progress allowed
}

// command is one subcommand, described the way cmd/go describes its own.
type command struct {
	name      string
	usageLine string // after "replay "
	short     string
	long      string
	flags     func(fs *flag.FlagSet) func(e *env, args []string) int
}

func commands() []*command {
	return []*command{cmdCheck(), cmdDiff(), cmdShow(), cmdStat(), cmdVerify(), cmdRun(), cmdClean()}
}

func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (e *env) main(args []string) int {
	if len(args) == 0 {
		e.mainUsage(e.stderr)
		return exitTrouble
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return e.help(args[1:])
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(e.stderr, "replay %s: unknown command\nRun 'replay help' for usage.\n", args[0])
		return exitTrouble
	}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runFn := c.flags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(e.stderr, "replay %s: %v\n", c.name, err)
		}
		fmt.Fprintf(e.stderr, "usage: replay %s\nRun 'replay help %s' for details.\n", c.usageLine, c.name)
		return exitTrouble
	}
	return runFn(e, fs.Args())
}

// usageError reports bad usage of c and returns exitTrouble.
func (e *env) usageError(c string, format string, a ...any) int {
	fmt.Fprintf(e.stderr, "replay %s: %s\n", c, fmt.Sprintf(format, a...))
	if cmd := lookup(c); cmd != nil {
		fmt.Fprintf(e.stderr, "usage: replay %s\nRun 'replay help %s' for details.\n", cmd.usageLine, c)
	}
	return exitTrouble
}

// trouble reports an error that is not about what was compared.
func (e *env) trouble(c string, err error) int {
	fmt.Fprintf(e.stderr, "replay %s: %v\n", c, err)
	return exitTrouble
}

func (e *env) mainUsage(w io.Writer) {
	fmt.Fprint(w, `Replay checks that tests are deterministic, using the tapes cowfs records.

Usage:

	replay <command> [arguments]

The commands are:

`)
	for _, c := range commands() {
		fmt.Fprintf(w, "\t%-8s %s\n", c.name, c.short)
	}
	fmt.Fprint(w, `
Use "replay help <command>" for more information about a command.

Exit status, for every command: 0 same or valid, 1 differs or invalid,
2 trouble (bad usage, an unreadable or newer-version tape, a command that
could not start, no tapes produced).
`)
}

func (e *env) help(args []string) int {
	switch len(args) {
	case 0:
		e.mainUsage(e.stdout)
		return exitSame
	case 1:
		c := lookup(args[0])
		if c == nil {
			fmt.Fprintf(e.stderr, "replay help %s: unknown help topic. Run 'replay help'.\n", args[0])
			return exitTrouble
		}
		fmt.Fprintf(e.stdout, "usage: replay %s\n\n%s", c.usageLine, strings.TrimLeft(c.long, "\n"))
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.flags(fs)
		var any bool
		fs.VisitAll(func(*flag.Flag) { any = true })
		if any {
			fmt.Fprint(e.stdout, "\nFlags:\n")
			fs.SetOutput(e.stdout)
			fs.PrintDefaults()
		}
		return exitSame
	default:
		fmt.Fprint(e.stderr, "usage: replay help command\n\nToo many arguments given.\n")
		return exitTrouble
	}
}
