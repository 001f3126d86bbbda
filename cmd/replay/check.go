package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/tape"
)

func cmdCheck() *command {
	return &command{
		name:      "check",
		usageLine: "check [-n N] [-order MODE] [-vary[=LIST]] [-seed S] [-keep] [-json] [packages | -- command args...]",
		short:     "run tests several times and compare their tapes",
		long: `
Check runs a command, "go test ./..." by default, N times. Package
patterns ("replay check ./pkg/...") run go test on them; any other
command follows "--". Each run gets a
fresh, empty tape directory in COWFS_TAPE_DIR, where tests using the cowfs
helpers record one tape each (and keep the file contents they read and
wrote, up to COWFS_TAPE_CONTENT bytes each, 64 KiB by default), -count=1
added to GOFLAGS, so that no run is a cached result that records nothing,
and COWFS_RUN set to the number of the run (1 to N), an input a test may
vary on to reproduce a failure on cue.

The tapes are grouped by the package and test named in their headers, and
each run's tape is compared with the first run's in the mode -order names
(default path: per path, the same operations, outcomes and bytes; see
'replay help diff'). Per test, check prints one of:

	ok  	PKG	TEST	identical
	    every run recorded the same operations in the same order;
	ok  	PKG	TEST	interleaving-only
	    the same per path, but independent paths were touched in a
	    different order (goroutines racing on different files);
	ok  	PKG	TEST	no file activity
	    every run's tape is empty: nothing was compared;
	--- DIVERGE: TEST (PKG)
	    a run differs from the first: the first divergence follows, with
	    its path, the records around it and, when the file contents were
	    captured, a text diff of the two versions;
	--- FAIL: TEST (PKG)
	    the test failed in every run.

A test that passes in one run and fails (or is skipped) in another has
diverged too, tape or not. When the command is "go test", check adds -json
to it and reads each test's outcome from the events; any other command
whose standard output is test2json events (go test -json, go tool
test2json) is read the same way. Otherwise only the command's exit status
is compared, as the outcome of "(command)".

go test -json makes testing.Verbose() true in the tests, in every run. A
test that behaves differently under -v (one that skips unless verbose)
may therefore fail in every run of check and nowhere else. All runs agree,
so it is a FAIL, never a DIVERGE; when check added -json itself, it runs
each test that failed in every run (the first ten) once more without
-json (go test -count=1 -run '^NAME$' PKG) and, if it passes there, says
so under the FAIL ("passes without -json ...", class verbose-only in
-json output).

A test whose tapes hold no record at all (it made an Env and did not use
its file system) is reported as "no file activity" rather than identical:
there was nothing to compare.

The last line is "ok" or "FAIL" with the counts. While it runs, check
shows a progress line (run k/N, elapsed time) on standard error when that
is a terminal, and prints a plain line per finished run otherwise.

-keep keeps the tape directories (one per run) and prints where they are.

-json prints, instead of text, events shaped as test2json's: the outcome
of each test in each run (Action pass, fail or skip, with "Run": k), then
one event per test with Action "identical" (equal in the chosen mode;
"Class" says identical or interleaving-only), "no-activity", "diverge"
(with "Class", "Run" of the first differing run, "Path" and the report in
"Output") or "fail", and a last event with Action "pass" or "fail" and the
summary.

-vary perturbs, in runs 2 to N (run 1 runs as it is, the baseline), what
a test must not depend on; -vary alone varies everything, -vary=LIST the
variations named (comma-separated):

	order      test order (go test -shuffle)
	listing    directory listings of the overlay in a seeded order
	shortread  File.Read returns fewer bytes than asked (at least one)
	rootpath   the root copied to another absolute path first
	tz         TZ set to another time zone
	locale     LANG and LC_ALL set to another locale
	umask      another umask
	procs      GOMAXPROCS set to another number
	home       HOME and TMPDIR set to fresh directories

listing, shortread and rootpath are made by the cowfs helpers in the
test (COWFS_VARY, COWFS_VARY_SEED); the others by check in the command's
environment. Run k varies with seed S+k-2, S from -seed or random; the
seed is printed and recorded in each tape's header (info "vary",
"vary-seed"). When a test diverges, check runs the command again once
without variation and once with each variation alone, at the seed of the
run that diverged, and names the variations that provoke the divergence
alone, with the command that reproduces it:
"replay check -vary=listing -seed S".

When go test cannot build a package or set up (a compile error, no
go.mod), check prints go's own output and stops after that run (exit 2).
Tests that ran but wrote no tape (they do not use the cowfs helpers) are
named in a line of their own.

Exit status: 0 when every test is identical, interleaving-only (in path
mode) or without file activity, 1 when a test diverged or failed, 2 when
the command could not start, no tapes were produced (nothing to read: the
tests probably do not use the cowfs helpers, or the go test cache
swallowed the run), or a tape cannot be read.
`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			o := &checkOpts{}
			fs.IntVar(&o.n, "n", 3, "run the command `N` times (at least 2)")
			fs.Var(&o.vary, "vary", "perturb runs 2 to N: every variation, or those of `LIST` (-vary=listing,tz)")
			fs.Func("seed", "the seed `S` of -vary (random by default)", func(v string) error {
				s, err := strconv.ParseUint(v, 10, 64)
				o.seed, o.seedSet = s, true
				return err
			})
			fs.StringVar(&o.order, "order", "path", "comparison `mode`: path, global, set or final")
			fs.BoolVar(&o.keep, "keep", false, "keep the tapes and print where they are")
			fs.BoolVar(&o.json, "json", false, "print test2json-shaped events")
			return func(e *env, args []string) int { return runCheck(e, args, o) }
		},
	}
}

type checkOpts struct {
	n       int
	order   string
	mode    tape.Mode
	keep    bool
	json    bool
	vary    varyFlag
	seed    uint64
	seedSet bool
}

// event is a test2json event, with the fields check adds.
type event struct {
	Time    time.Time `json:",omitzero"`
	Action  string
	Package string  `json:",omitempty"`
	Test    string  `json:",omitempty"`
	Elapsed float64 `json:",omitempty"`
	Output  string  `json:",omitempty"`
	Run     int     `json:",omitempty"` // check: which run (1-based)
	Class   string  `json:",omitempty"` // check: how the test differs
	Path    string  `json:",omitempty"` // check: path of the first divergence
	Vary    string  `json:",omitempty"` // check -vary: the variations that provoke the divergence
	Seed    string  `json:",omitempty"` // check -vary: the seed that reproduces it

	ImportPath  string `json:",omitempty"` // go test: build-output events
	FailedBuild string `json:",omitempty"` // go test: the build a package failed on
}

// outcome is how a test (or a package, Test == "") ended in one run.
type outcome struct {
	pkg, test string
	action    string // pass, fail, skip
	output    []string
}

// runResult is what one run of the command left.
type runResult struct {
	dir      string
	tapes    map[string]*loaded
	outcomes map[string]*outcome // by key, as loaded.key
	order    []string            // outcome keys in the order they ended
	events   bool                // the command printed test2json events
	exitErr  error
	raw      []string // output lines that are not events
	elapsed  time.Duration
	build    map[string][]string // go's build-output, by ImportPath
	failed   []string            // the builds (ImportPath) packages failed on
}

const maxOutputLines = 20

func outcomeKey(pkg, test string) string { return pkg + " " + test }

// commandKey is the pseudo-test whose outcome is the command's exit status,
// used when the command prints no test2json events.
const commandKey = " (command)"

func runCheck(e *env, args []string, o *checkOpts) int {
	var err error
	if o.mode, err = tape.ParseMode(o.order); err != nil {
		return e.usageError("check", "%v", err)
	}
	if o.n < 2 {
		return e.usageError("check", "-n %d compares nothing: want 2 runs or more", o.n)
	}
	argv := args
	switch {
	case len(argv) == 0:
		argv = []string{"go", "test", "./..."}
	case isPackagePattern(argv[0]):
		// "replay check ./pkg/...": packages, not a command.
		argv = slices.Concat([]string{"go", "test"}, argv)
	}
	addedJSON := len(withJSON(argv)) != len(argv)
	argv = withJSON(argv)
	if _, err := exec.LookPath(argv[0]); err != nil {
		return e.trouble("check", fmt.Errorf("command could not start: %w", err))
	}
	base, err := os.MkdirTemp("", "replay-check-")
	if err != nil {
		return e.trouble("check", err)
	}
	if o.keep {
		defer fmt.Fprintf(e.stderr, "replay check: tapes kept in %s (run-1 ... run-%d)\n", base, o.n)
	} else {
		defer os.RemoveAll(base)
	}
	if o.vary.set && !o.seedSet {
		o.seed = rand.Uint64N(1 << 31)
	}
	if o.vary.set {
		fmt.Fprintf(e.stderr, "replay check: -vary=%s -seed %d: run 1 as it is, run k varied with seed %d+k-2\n", o.vary.String(), o.seed, o.seed)
	}
	runs, err := runAll(e, argv, base, o)
	if err != nil {
		return e.trouble("check", err)
	}
	ntapes := 0
	for _, r := range runs {
		ntapes += len(r.tapes)
	}
	if ntapes == 0 {
		msg := fmt.Sprintf("no tapes produced in %s of %s: the tests probably don't use the cowfs helpers, or the go test cache swallowed the run (GOFLAGS had -count=1 added)", plural(o.n, "run"), strings.Join(argv, " "))
		if r := runs[0]; r.exitErr != nil {
			msg += fmt.Sprintf("\nthe command failed in run 1 (%v); its output ends:\n%s", r.exitErr, indent(tail(r.allOutput(), maxOutputLines), "    "))
		}
		return e.trouble("check", errors.New(msg))
	}
	vs := verdicts(runs, o)
	if addedJSON {
		checkVerbose(e, vs)
	}
	if o.vary.set {
		if err := attribute(e, argv, base, runs, vs, o); err != nil {
			return e.trouble("check", err)
		}
	}
	return report(e, vs, runs, argv, o)
}

// runAll runs the command o.n times, each in its own tape directory under
// base, varied from run 2 on with -vary. The error is trouble.
func runAll(e *env, argv []string, base string, o *checkOpts) ([]*runResult, error) {
	runs := make([]*runResult, o.n)
	start := time.Now()
	for k := range o.n {
		dir := filepath.Join(base, fmt.Sprintf("run-%d", k+1))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		var p *perturbation
		if o.vary.set && k > 0 {
			var err error
			if p, err = perturb(o.vary.names, o.seed+uint64(k-1), e.getenv, filepath.Join(base, fmt.Sprintf("scratch-%d", k+1)), isGoTest(argv)); err != nil {
				return nil, err
			}
			fmt.Fprintf(e.stderr, "replay check: run %d varies (seed %d): %s\n", k+1, p.seed, strings.Join(p.desc, " "))
		}
		stop := e.progress(k+1, o.n, start)
		r, err := runOnce(e, argv, dir, k+1, p)
		stop(r)
		if err == nil && e.ctx.Err() != nil {
			err = fmt.Errorf("interrupted during run %d", k+1)
		}
		if err != nil {
			return nil, err
		}
		if len(r.failed) > 0 {
			return nil, r.buildFailure(k + 1)
		}
		runs[k] = r
		if o.json {
			for _, key := range r.order {
				oc := r.outcomes[key]
				if oc.test != "" || key == commandKey {
					writeJSON(e.stdout, event{Time: time.Now(), Action: oc.action, Package: oc.pkg, Test: oc.test, Run: k + 1})
				}
			}
		}
	}
	return runs, nil
}

// isPackagePattern says whether arg names Go packages rather than a
// command: a pattern with "...", or a directory (which cannot be run).
func isPackagePattern(arg string) bool {
	if strings.Contains(arg, "...") {
		return true
	}
	fi, err := os.Stat(arg)
	return err == nil && fi.IsDir()
}

// isGoTest says whether argv is a go test command line.
func isGoTest(argv []string) bool {
	return len(argv) >= 2 && filepath.Base(argv[0]) == "go" && argv[1] == "test"
}

// withJSON adds -json to a go test command line, whose events tell each
// test's outcome.
func withJSON(argv []string) []string {
	if !isGoTest(argv) {
		return argv
	}
	for _, a := range argv[2:] {
		if a == "-args" || a == "--args" {
			break
		}
		if a == "-json" || a == "--json" || a == "-json=true" {
			return argv
		}
	}
	return slices.Concat(argv[:2], []string{"-json"}, argv[2:])
}

// progress shows run k of n: a live line redrawn on a terminal, or a plain
// line per finished run. The returned func ends it.
func (e *env) progress(k, n int, start time.Time) func(*runResult) {
	if !e.tty {
		return func(r *runResult) {
			if r == nil {
				return
			}
			status := "exit status 0"
			if r.exitErr != nil {
				status = r.exitErr.Error()
			}
			fmt.Fprintf(e.stderr, "replay check: run %d/%d done in %.1fs, %s, %s\n", k, n, r.elapsed.Seconds(), plural(len(r.tapes), "tape"), status)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			fmt.Fprintf(e.stderr, "\r\x1b[Kreplay check: run %d/%d, %.1fs elapsed", k, n, time.Since(start).Seconds())
			select {
			case <-done:
				fmt.Fprint(e.stderr, "\r\x1b[K")
				return
			case <-t.C:
			}
		}
	})
	return func(*runResult) { close(done); wg.Wait() }
}

// runOnce runs the command once with dir as its tape directory, reads
// its events and its tapes. The error is trouble: the command could not
// start, or a tape could not be read.
func runOnce(e *env, argv []string, dir string, run int, p *perturbation) (*runResult, error) {
	r := &runResult{dir: dir, outcomes: map[string]*outcome{}, build: map[string][]string{}}
	if isGoTest(argv) {
		argv = p.withArgs(argv)
	}
	cmd := exec.CommandContext(e.ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(),
		tape.EnvDir+"="+dir,
		helpers.EnvRun+"="+strconv.Itoa(run),
		"GOFLAGS="+strings.TrimSpace(e.getenv("GOFLAGS")+" -count=1"))
	if p != nil {
		cmd.Env = append(cmd.Env, p.env...)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := startWithUmask(cmd, p); err != nil {
		return nil, fmt.Errorf("command could not start: %w", err)
	}
	r.readEvents(stdout)
	r.exitErr = cmd.Wait()
	r.elapsed = time.Since(start)
	var exitErr *exec.ExitError
	if r.exitErr != nil && !errors.As(r.exitErr, &exitErr) {
		return nil, fmt.Errorf("command failed to run: %w", r.exitErr)
	}
	for l := range strings.Lines(stderr.String()) {
		r.raw = append(r.raw, strings.TrimSuffix(l, "\n"))
	}
	if !r.events {
		action := "pass"
		if r.exitErr != nil {
			action = "fail"
		}
		r.outcomes[commandKey] = &outcome{test: "(command)", action: action, output: indentLines(r.raw, "    ")}
		r.order = append(r.order, commandKey)
	}
	ls, err := loadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", filepath.Base(dir), err)
	}
	r.tapes = byKey(ls)
	return r, nil
}

// readEvents consumes the command's standard output: test2json events where
// lines parse as such, plain output otherwise.
func (r *runResult) readEvents(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	running := map[string]*outcome{}
	for sc.Scan() {
		line := sc.Text()
		var ev event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &ev) != nil || ev.Action == "" {
			r.raw = append(r.raw, line)
			continue
		}
		r.events = true
		if ev.Action == "build-output" || ev.Action == "build-fail" {
			if ev.Action == "build-output" && len(r.build[ev.ImportPath]) < 10*maxOutputLines {
				r.build[ev.ImportPath] = append(r.build[ev.ImportPath], strings.TrimSuffix(ev.Output, "\n"))
			}
			continue
		}
		if ev.Action == "fail" && ev.FailedBuild != "" && ev.Test == "" && !slices.Contains(r.failed, ev.FailedBuild) {
			r.failed = append(r.failed, ev.FailedBuild)
		}
		key := outcomeKey(ev.Package, ev.Test)
		oc := running[key]
		if oc == nil {
			oc = &outcome{pkg: ev.Package, test: ev.Test}
			running[key] = oc
		}
		switch ev.Action {
		case "output", "build-output":
			if len(oc.output) < 10*maxOutputLines {
				oc.output = append(oc.output, strings.TrimSuffix(ev.Output, "\n"))
			}
		case "pass", "fail", "skip":
			oc.action = ev.Action
			if _, dup := r.outcomes[key]; !dup {
				r.order = append(r.order, key)
			}
			r.outcomes[key] = oc
		}
	}
	// A package that never ended (its binary was killed) counts as failed.
	for key, oc := range running {
		if _, ok := r.outcomes[key]; !ok && oc.test == "" && oc.pkg != "" {
			oc.action = "fail"
			r.outcomes[key] = oc
			r.order = append(r.order, key)
		}
	}
}

// buildFailure is the trouble of a run in which go test could not build a
// package or set up: go's own output, which says why.
func (r *runResult) buildFailure(run int) error {
	var b strings.Builder
	names := make([]string, len(r.failed))
	for i, f := range r.failed {
		names[i], _, _ = strings.Cut(f, " ") // "pkg [pkg.test]"
	}
	fmt.Fprintf(&b, "run %d: go test could not build or set up %s; go says:", run, strings.Join(names, ", "))
	for _, f := range r.failed {
		lines := r.build[f]
		if len(lines) == 0 {
			lines = []string{"(no output from go for " + f + ")"}
		}
		fmt.Fprintf(&b, "\n%s", indent(head(lines, 2*maxOutputLines), "    "))
	}
	b.WriteString("\n(check stops here: the other runs would fail the same way)")
	return errors.New(b.String())
}

func (r *runResult) allOutput() []string {
	var out []string
	for _, key := range r.order {
		out = append(out, r.outcomes[key].output...)
	}
	return append(out, r.raw...)
}

// verdict is check's finding about one test across all runs.
type verdict struct {
	pkg, test string
	kind      string // identical, interleaving-only, no-activity, diverge, fail, no-tape
	class     string // diverge: data, interleaving-only, outcome, missing, truncated
	run       int    // diverge: the first run that differs from run 1
	path      string
	lines     []string // the report
	tapes     bool
	vary      string // diverge under -vary: the variations that provoke it
	seed      string // and the seed that reproduces it
}

func (v *verdict) name() string { return testName(v.pkg, v.test, "") }

func verdicts(runs []*runResult, o *checkOpts) []*verdict {
	tapeMaps := make([]map[string]*loaded, len(runs))
	outMaps := make([]map[string]*outcome, len(runs))
	for k, r := range runs {
		tapeMaps[k], outMaps[k] = r.tapes, r.outcomes
	}
	keys := slices.Concat(sortedKeys(tapeMaps...), sortedKeys(outMaps...))
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var out []*verdict
	for _, key := range keys {
		v := &verdict{}
		for k := range runs {
			if l := runs[k].tapes[key]; l != nil {
				v.pkg, v.test, v.tapes = l.t.Header.Package, l.t.Header.Test, true
			} else if oc := runs[k].outcomes[key]; oc != nil && v.pkg == "" && v.test == "" {
				v.pkg, v.test = oc.pkg, oc.test
			}
		}
		if i := strings.LastIndex(key, " #"); i >= 0 && v.tapes {
			v.test += key[i:] // a second tape of one test, see byKey
		}
		judge(v, key, runs, o)
		if v.kind != "" {
			out = append(out, v)
		}
	}
	return out
}

// judge decides v: an outcome that differs between runs first, then tapes
// that differ, then a failure in every run, else the class of the tapes.
func judge(v *verdict, key string, runs []*runResult, o *checkOpts) {
	byAction := map[string][]int{}
	for k := range runs {
		if a := runsAction(runs, key, k); a != "" {
			byAction[a] = append(byAction[a], k+1)
		}
	}
	if len(byAction) > 1 {
		v.kind, v.class = "diverge", "outcome"
		var parts []string
		for _, a := range []string{"pass", "fail", "skip"} {
			if ks := byAction[a]; len(ks) > 0 {
				parts = append(parts, fmt.Sprintf("%s in %s", pastTense(a), runList(ks)))
			}
		}
		v.lines = append(v.lines, strings.Join(parts, "; "))
		a1 := runsAction(runs, key, 0)
		for k := 1; k < len(runs) && v.run == 0; k++ {
			if runsAction(runs, key, k) != a1 {
				v.run = k + 1
			}
		}
		if fails := byAction["fail"]; len(fails) > 0 {
			if out := runs[fails[0]-1].outcomes[key].output; len(out) > 0 {
				v.lines = append(v.lines, fmt.Sprintf("run %d output:", fails[0]))
				v.lines = append(v.lines, head(out, maxOutputLines)...)
			}
		}
		if v.tapes {
			var tv verdict
			if lines := tapeDivergence(&tv, key, runs, o); tv.kind == "diverge" {
				v.lines = append(v.lines, lines...)
			}
		}
		return
	}
	if v.tapes {
		if lines := tapeDivergence(v, key, runs, o); v.kind == "diverge" {
			v.lines = lines
			return
		}
	}
	if len(byAction["fail"]) > 0 {
		v.kind = "fail"
		fails := byAction["fail"]
		oc := runs[fails[0]-1].outcomes[key]
		switch {
		case len(runs) == 1:
			v.lines = append(v.lines, "failed")
		case len(fails) == len(runs):
			v.lines = append(v.lines, fmt.Sprintf("failed in all %d runs", len(runs)))
		default:
			v.lines = append(v.lines, fmt.Sprintf("failed in %s, did not run in the others", runList(fails)))
		}
		if len(oc.output) > 0 {
			v.lines = append(v.lines, fmt.Sprintf("run %d output:", fails[0]))
			v.lines = append(v.lines, head(oc.output, maxOutputLines)...)
		}
		return
	}
	if !v.tapes {
		if v.test != "" && key != commandKey {
			v.kind = "no-tape"
		}
		return
	}
}

// runsAction is how key ended in run k ("" when it did not run). A
// package that failed because some of its tests failed counts as passed:
// those tests carry the failure.
func runsAction(runs []*runResult, key string, k int) string {
	oc := runs[k].outcomes[key]
	if oc == nil {
		return ""
	}
	if oc.test == "" && oc.action == "fail" {
		for _, t := range runs[k].outcomes {
			if t.pkg == oc.pkg && t.test != "" && t.action == "fail" {
				return "pass"
			}
		}
	}
	return oc.action
}

func pastTense(a string) string {
	switch a {
	case "pass":
		return "passed"
	case "fail":
		return "failed"
	}
	return "skipped"
}

func runList(ks []int) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = strconv.Itoa(k)
	}
	if len(ks) == 1 {
		return "run " + s[0]
	}
	return "runs " + strings.Join(s, ", ")
}

// tapeDivergence compares every run's tape of key with run 1's. It sets
// v.kind to diverge (with class, run, path) and returns the report of the
// first run that differs, or sets identical / interleaving-only.
func tapeDivergence(v *verdict, key string, runs []*runResult, o *checkOpts) []string {
	first := runs[0].tapes[key]
	worst := tape.Identical
	var differing []int
	var lines []string
	for k := 1; k < len(runs); k++ {
		other := runs[k].tapes[key]
		var msg []string
		var class, path string
		switch {
		case first == nil:
			class, msg = "missing", []string{fmt.Sprintf("no tape in run 1, but one in run %d", k+1)}
		case other == nil:
			class, msg = "missing", []string{fmt.Sprintf("no tape in run %d", k+1)}
		case first.t.Truncated != other.t.Truncated:
			class = "truncated"
			which := 1
			if other.t.Truncated {
				which = k + 1
			}
			msg = []string{fmt.Sprintf("the tape of run %d is truncated (no trailer): the test did not finish recording", which)}
		default:
			rep := compareLoaded(first, other, &diffOpts{mode: o.mode, context: tape.ContextLen})
			worst = max(worst, rep.class)
			if rep.Equal {
				continue
			}
			class = rep.Class
			if len(rep.Shown) > 0 && rep.Shown[0].Path != "" {
				path = rep.Shown[0].Path
			}
			msg = plainReport(v.name(), first, other, rep, k+1)
		}
		differing = append(differing, k+1)
		if lines == nil {
			lines, v.class, v.run, v.path = msg, class, k+1, path
		}
	}
	if len(differing) > 0 {
		v.kind = "diverge"
		if len(differing) > 1 {
			lines = append(lines, fmt.Sprintf("(%s differ from run 1; the first is shown)", runList(differing)))
		}
		return lines
	}
	v.kind = worst.String()
	if first != nil && len(first.t.Records) == 0 {
		// Equal, but about nothing: the test made an Env and did not
		// touch its file system. Saying "identical" would claim a
		// determinism check that did not happen.
		v.kind = "no-activity"
	}
	return nil
}

// head returns the first n lines of a test's output, without go test's
// "=== RUN" style markers: the test's own messages come first, the logs
// after them can be long.
func head(lines []string, n int) []string {
	var out []string
	for i, l := range lines {
		if strings.HasPrefix(l, "=== ") {
			continue
		}
		if len(out) == n {
			return append(out, fmt.Sprintf("    ... (%d more lines)", len(lines)-i))
		}
		out = append(out, l)
	}
	return out
}

func tail(lines []string, n int) []string {
	return lines[max(0, len(lines)-n):]
}

func indentLines(lines []string, in string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = in + l
	}
	return out
}

func indent(lines []string, in string) string {
	return strings.Join(indentLines(lines, in), "\n")
}

// report prints the verdicts and returns the exit status.
func report(e *env, vs []*verdict, runs []*runResult, argv []string, o *checkOpts) int {
	counts := map[string]int{}
	for _, v := range vs {
		counts[v.kind]++
		if o.json {
			ev := event{Time: time.Now(), Package: v.pkg, Test: v.test, Class: v.class, Run: v.run, Path: v.path, Vary: v.vary, Seed: v.seed}
			switch v.kind {
			case "identical", "interleaving-only":
				ev.Action, ev.Class = "identical", v.kind
			case "diverge":
				ev.Action = "diverge"
			case "no-activity":
				ev.Action = "no-activity"
			case "fail":
				ev.Action = "fail"
			default:
				continue
			}
			if len(v.lines) > 0 {
				ev.Output = strings.Join(v.lines, "\n") + "\n"
			}
			writeJSON(e.stdout, ev)
			continue
		}
		switch v.kind {
		case "identical", "interleaving-only":
			fmt.Fprint(e.stdout, okLine(v.pkg, v.test, v.name(), v.kind))
		case "no-activity":
			fmt.Fprint(e.stdout, okLine(v.pkg, v.test, v.name(), "no file activity"))
		case "diverge":
			fmt.Fprintf(e.stdout, "--- DIVERGE: %s\n", v.name())
			fmt.Fprintln(e.stdout, indent(v.lines, "    "))
		case "fail":
			fmt.Fprintf(e.stdout, "--- FAIL: %s\n", v.name())
			fmt.Fprintln(e.stdout, indent(v.lines, "    "))
		}
	}
	if !o.json {
		writeNoTape(e, vs)
	}
	summary := fmt.Sprintf("%s of %s: %d identical, %d interleaving-only, %d diverged, %d failed",
		plural(len(runs), "run"), strings.Join(argv, " "), counts["identical"], counts["interleaving-only"], counts["diverge"], counts["fail"])
	if n := counts["no-activity"]; n > 0 {
		summary += fmt.Sprintf(", %d without file activity", n)
	}
	if n := counts["no-tape"]; n > 0 {
		summary += fmt.Sprintf(", %d without tape", n)
	}
	status, code := "ok", exitSame
	if counts["diverge"]+counts["fail"] > 0 {
		status, code = "FAIL", exitDiffers
	}
	if o.json {
		writeJSON(e.stdout, event{Time: time.Now(), Action: map[string]string{"ok": "pass", "FAIL": "fail"}[status], Output: summary + "\n"})
	} else {
		fmt.Fprintf(e.stdout, "%s\t%s\n", status, summary)
	}
	return code
}

// writeNoTape names the tests that ran without writing a tape: check
// compared only their outcomes.
func writeNoTape(e *env, vs []*verdict) {
	var names []string
	for _, v := range vs {
		if v.kind == "no-tape" {
			names = append(names, v.name())
		}
	}
	if len(names) == 0 {
		return
	}
	const most = 10
	more := ""
	if len(names) > most {
		more = fmt.Sprintf(" and %d more", len(names)-most)
		names = names[:most]
	}
	fmt.Fprintf(e.stdout, "?   \twithout tape (no cowfs helpers: only their outcomes were compared): %s%s\n", strings.Join(names, ", "), more)
}
