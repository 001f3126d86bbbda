package main

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/cowfs/cowfs/helpers"
)

// variations are the names -vary takes, in the order they are tried and
// printed.
var variations = []string{"order", "listing", "shortread", "rootpath", "tz", "locale", "umask", "procs", "home"}

// variationDoc says what each variation changes, for help and reports.
var variationDoc = map[string]string{
	"order":     "test order, go test -shuffle",
	"listing":   "directory listing order",
	"shortread": "short reads, File.Read returning fewer bytes than asked",
	"rootpath":  "the root's absolute path",
	"tz":        "the time zone, TZ",
	"locale":    "the locale, LANG and LC_ALL",
	"umask":     "the umask",
	"procs":     "GOMAXPROCS",
	"home":      "HOME and TMPDIR",
}

// varyFlag is the value of -vary: off, every variation (-vary), or a
// list (-vary=listing,tz).
type varyFlag struct {
	set   bool
	names []string
}

func (f *varyFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return strings.Join(f.names, ",")
}

func (f *varyFlag) IsBoolFlag() bool { return true }

func (f *varyFlag) Set(s string) error {
	switch s {
	case "false":
		f.set, f.names = false, nil
		return nil
	case "true", "all":
		f.set, f.names = true, slices.Clone(variations)
		return nil
	}
	var names []string
	for n := range strings.SplitSeq(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(variations, n) {
			return fmt.Errorf("unknown variation %q (want some of %s)", n, strings.Join(variations, ","))
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no variation named (want some of %s)", strings.Join(variations, ","))
	}
	// In the canonical order, so that a reproduction line reads the same.
	slices.SortFunc(names, func(a, b string) int { return slices.Index(variations, a) - slices.Index(variations, b) })
	f.set, f.names = true, names
	return nil
}

// perturbation is how one run is varied: what it adds to the command's
// environment and arguments, and the umask it starts with.
type perturbation struct {
	names []string
	seed  uint64
	env   []string
	args  []string // go test flags, before the packages
	umask int      // -1: as it is
	desc  []string // what was varied, for the user
}

// varyRand is the source of variation name's value for seed: the same in a
// run that varies only it and in one that varies everything.
func varyRand(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// pick returns one of choices that differs from current.
func pick(r *rand.Rand, current string, choices ...string) string {
	var ok []string
	for _, c := range choices {
		if c != current {
			ok = append(ok, c)
		}
	}
	return ok[r.IntN(len(ok))]
}

// perturb returns the perturbation of names with seed. getenv reads the
// environment the runs inherit; scratch is a directory for HOME and
// TMPDIR; goTest says the command is go test (-shuffle applies).
func perturb(names []string, seed uint64, getenv func(string) string, scratch string, goTest bool) (*perturbation, error) {
	p := &perturbation{names: names, seed: seed, umask: -1}
	p.env = append(p.env, helpers.EnvVary+"="+strings.Join(names, ","), helpers.EnvVarySeed+"="+strconv.FormatUint(seed, 10))
	for _, n := range names {
		r := varyRand(seed, n)
		switch n {
		case "order":
			if goTest {
				s := strconv.FormatInt(int64(seed&(1<<62-1)), 10)
				p.args = append(p.args, "-shuffle="+s)
				p.desc = append(p.desc, "-shuffle="+s)
			}
		case "listing", "shortread", "rootpath":
			p.desc = append(p.desc, n)
		case "tz":
			tz := pick(r, getenv("TZ"), "Asia/Kolkata", "America/St_Johns", "Pacific/Chatham", "Asia/Kathmandu", "America/Los_Angeles", "Australia/Eucla")
			p.env = append(p.env, "TZ="+tz)
			p.desc = append(p.desc, "TZ="+tz)
		case "locale":
			current := getenv("LC_ALL")
			if current == "" {
				current = getenv("LANG")
			}
			l := pick(r, current, "de_DE.UTF-8", "tr_TR.UTF-8", "fr_FR.UTF-8", "ja_JP.UTF-8")
			p.env = append(p.env, "LANG="+l, "LC_ALL="+l)
			p.desc = append(p.desc, "LANG=LC_ALL="+l)
		case "umask":
			current := currentUmask()
			if current < 0 {
				continue // not on this platform
			}
			u, _ := strconv.ParseInt(pick(r, fmt.Sprintf("%03o", current), "002", "027", "077", "007"), 8, 32)
			p.umask = int(u)
			p.desc = append(p.desc, fmt.Sprintf("umask=%03o", u))
		case "procs":
			n := pick(r, strconv.Itoa(runtime.GOMAXPROCS(0)), "1", "3", "5", "8")
			p.env = append(p.env, "GOMAXPROCS="+n)
			p.desc = append(p.desc, "GOMAXPROCS="+n)
		case "home":
			home, tmp := filepath.Join(scratch, "home"), filepath.Join(scratch, "tmp")
			for _, d := range []string{home, tmp} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return nil, err
				}
			}
			p.env = append(p.env, "HOME="+home, "TMPDIR="+tmp)
			// The go command keeps its caches and settings under HOME by
			// default: pin them, or every run rebuilds everything and
			// finds no module offline.
			p.env = append(p.env, goPins(getenv)...)
			p.desc = append(p.desc, "HOME,TMPDIR="+scratch+"/{home,tmp}")
		}
	}
	return p, nil
}

// goPins returns the go command's locations that default to paths under
// HOME, as they are now.
func goPins(getenv func(string) string) []string {
	var out []string
	keys := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"}
	var missing []string
	for _, k := range keys {
		if v := getenv(k); v != "" {
			out = append(out, k+"="+v)
		} else {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return out
	}
	b, err := exec.Command("go", slices.Concat([]string{"env"}, missing)...).Output()
	if err != nil {
		return out
	}
	vals := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, k := range missing {
		if i < len(vals) && vals[i] != "" {
			out = append(out, k+"="+vals[i])
		}
	}
	return out
}

// withArgs inserts the perturbation's go test flags after "go test".
func (p *perturbation) withArgs(argv []string) []string {
	if p == nil || len(p.args) == 0 || len(argv) < 2 {
		return argv
	}
	return slices.Concat(argv[:2], p.args, argv[2:])
}

// reproduce is the command line that replays names with seed.
func reproduce(names []string, seed uint64) string {
	return fmt.Sprintf("replay check -vary=%s -seed %d", strings.Join(names, ","), seed)
}

// startWithUmask starts cmd with the umask of p, if any: the process's
// umask is set around the start (the child inherits it) and restored.
func startWithUmask(cmd *exec.Cmd, p *perturbation) error {
	if p == nil || p.umask < 0 {
		return cmd.Start()
	}
	old := setUmask(p.umask)
	defer setUmask(old)
	return cmd.Start()
}

// attribute finds, for each test that diverged in a varied run, which
// variation provokes it: the command runs again without variation (a
// control) and with each variation of the run alone, at the seed of the
// run that diverged; the variations alone under which the test diverges
// from run 1 again are named. Tests that diverge in the control diverge
// on their own.
func attribute(e *env, argv []string, base string, runs []*runResult, vs []*verdict, o *checkOpts) error {
	byRun := map[int][]*verdict{}
	var order []int
	for _, v := range vs {
		if v.kind != "diverge" || v.run < 2 {
			continue
		}
		if byRun[v.run] == nil {
			order = append(order, v.run)
		}
		byRun[v.run] = append(byRun[v.run], v)
	}
	slices.Sort(order)
	for _, k := range order {
		group := byRun[k]
		seed := o.seed + uint64(k-2)
		tries := [][]string{nil}
		if len(o.vary.names) > 1 {
			for _, n := range o.vary.names {
				tries = append(tries, []string{n})
			}
		}
		fmt.Fprintf(e.stderr, "replay check: %s diverged in run %d: %s more to find which variation provokes it\n",
			plural(len(group), "test"), k, plural(len(tries), "run"))
		provokers := make([][]string, len(group))
		control := make([]bool, len(group))
		for i, names := range tries {
			r, err := rerun(e, argv, base, k, i, names, seed)
			if err != nil {
				return err
			}
			for j, v := range group {
				if !divergesFrom(runs[0], r, v, o) {
					continue
				}
				if names == nil {
					control[j] = true
				} else {
					provokers[j] = append(provokers[j], names[0])
				}
			}
		}
		for j, v := range group {
			if len(o.vary.names) == 1 {
				provokers[j] = o.vary.names // the one variation, tried alone already
			}
			explain(v, k, seed, o.vary.names, provokers[j], control[j])
		}
	}
	return nil
}

// rerun runs the command once more, varying names with seed (nothing
// when names is empty), in its own tape directory.
func rerun(e *env, argv []string, base string, run, i int, names []string, seed uint64) (*runResult, error) {
	dir := filepath.Join(base, fmt.Sprintf("attr-%d-%d", run, i))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	var p *perturbation
	what := "without variation"
	if len(names) > 0 {
		var err error
		if p, err = perturb(names, seed, e.getenv, dir+"-scratch", isGoTest(argv)); err != nil {
			return nil, err
		}
		what = "with " + strings.Join(p.desc, " ") + " alone"
	}
	r, err := runOnce(e, argv, dir, run, p)
	if err == nil && e.ctx.Err() != nil {
		err = fmt.Errorf("interrupted while re-running %s", what)
	}
	if err != nil {
		return nil, err
	}
	if !e.tty {
		fmt.Fprintf(e.stderr, "replay check: run %d again %s done in %.1fs\n", run, what, r.elapsed.Seconds())
	}
	return r, nil
}

// divergesFrom says whether v's test differs between first and r, in
// outcome or tape, as check judges it.
func divergesFrom(first, r *runResult, v *verdict, o *checkOpts) bool {
	key := outcomeKey(v.pkg, v.test)
	if v.tapes {
		for k, l := range first.tapes {
			if l.t.Header.Package == v.pkg && l.t.Header.Test == v.test {
				key = k
				break
			}
		}
	}
	var tv verdict
	tv.pkg, tv.test, tv.tapes = v.pkg, v.test, v.tapes
	judge(&tv, key, []*runResult{first, r}, o)
	return tv.kind == "diverge"
}

// explain adds to v's report which variation provokes it.
func explain(v *verdict, run int, seed uint64, all, provokers []string, control bool) {
	s := strconv.FormatUint(seed, 10)
	switch {
	case control:
		v.lines = append(v.lines, fmt.Sprintf("not provoked by -vary: run %d diverges again without any variation (the test is nondeterministic by itself; replay check without -vary shows it)", run))
	case len(provokers) > 0:
		var what []string
		for _, n := range provokers {
			what = append(what, n+" ("+variationDoc[n]+")")
		}
		v.vary, v.seed = strings.Join(provokers, ","), s
		v.lines = append(v.lines, fmt.Sprintf("provoked by %s: alone, it makes the test diverge again", strings.Join(what, "; ")))
		for _, n := range provokers {
			v.lines = append(v.lines, "reproduce: "+reproduce([]string{n}, seed))
		}
	default:
		v.vary, v.seed = strings.Join(all, ","), s
		v.lines = append(v.lines, fmt.Sprintf("provoked by -vary, by no variation alone: by several together, or by chance; run %d varied %s", run, strings.Join(all, ",")))
		v.lines = append(v.lines, "reproduce: "+reproduce(all, seed))
	}
}
