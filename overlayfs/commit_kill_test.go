package overlayfs_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cowfs/cowfs/internal/longtest"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
)

// killChildEnv, when set, makes the test binary a committing child of
// TestCommitKill instead of running tests: it names a JSON file with the
// root and the workload.
const killChildEnv = "COWFS_KILL_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(killChildEnv); spec != "" {
		os.Exit(killChild(spec))
	}
	if spec := os.Getenv(permChildEnv); spec != "" {
		os.Exit(permChild(spec))
	}
	os.Exit(m.Run())
}

type killSpec struct {
	Root string
	Ops  []wlOp
}

// killChild builds the layer of the workload, says "go" on stdout, commits,
// and says how long the commit took.
func killChild(specFile string) int {
	data, err := os.ReadFile(specFile)
	var spec killSpec
	if err == nil {
		err = json.Unmarshal(data, &spec)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := overlayfs.New(spec.Root)
	if err == nil {
		err = wlRun(c, spec.Root, spec.Ops)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("go")
	start := time.Now()
	if err := c.Commit(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("done", time.Since(start).Nanoseconds())
	return 0
}

// killRun starts a child committing the workload in spec; after the child
// says "go", wait(d) decides when to SIGKILL it (never, with d < 0). It
// returns the commit's duration when the child finished.
func killRun(t testing.TB, spec string, d time.Duration) (time.Duration, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+spec)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(out)
	if line, err := rd.ReadString('\n'); err != nil || line != "go\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child: %q %v", line, err)
	}
	if d >= 0 {
		time.Sleep(d)
		cmd.Process.Signal(syscall.SIGKILL)
	}
	line, _ := rd.ReadString('\n')
	err = cmd.Wait()
	if ns, ok := strings.CutPrefix(strings.TrimSpace(line), "done "); ok && err == nil {
		n, _ := strconv.ParseInt(ns, 10, 64)
		return time.Duration(n), true
	}
	var ee *exec.ExitError
	if d < 0 || !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v (output %q)", err, line)
	}
	return 0, false
}

// TestCommitKill kills a process committing a large layer (hundreds of
// files: new ones, rewrites, deletions, renames of files and directories,
// symlinks, mode changes with special bits, the root's mode) at random
// moments spread over the commit's duration, runs Recover, and compares
// the tree with the old one and with the new one (os on a copy that ran
// the same workload): exactly one must match, every time, and Recover
// leaves no journal. The tree is on a tmpfs where one can be mounted, so
// that trials are cheap; fsync plays no part in surviving a process kill.
func TestCommitKill(t *testing.T) {
	if runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs processes and signals")
	}
	// How many times to kill a committing process: 12, or 200 with
	// COWFS_LONG; COWFS_KILL_TRIALS overrides both.
	trials := longtest.N(12, 200)
	if s := os.Getenv("COWFS_KILL_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("COWFS_KILL_TRIALS=%q: %v", s, err)
		}
		trials = n
	}
	if testing.Short() {
		trials = min(trials, 20)
	}
	scratch := lcSyncFreeDir(t)
	base, root := filepath.Join(scratch, "base"), filepath.Join(scratch, "root")
	wlBase(t, base, 16, 300)
	ops := wlGenerate(t, base, rand.New(rand.NewPCG(1, 12)), 400)
	oldTree, newTree := snapTree(t, base), wlOracle(t, base, scratch, ops)
	specData, err := json.Marshal(killSpec{Root: root, Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(spec, specData, 0o600); err != nil {
		t.Fatal(err)
	}
	match := func(label string) string {
		got := snapTree(t, root)
		switch {
		case len(oldTree.diff(got)) == 0:
			return "old"
		case len(newTree.diff(got)) == 0:
			return "new"
		}
		d1, d2 := oldTree.diff(got), newTree.diff(got)
		t.Fatalf("%s: the tree is neither the old one (%d differences, first %s) nor the new one (%d differences, first %s)",
			label, len(d1), d1[0], len(d2), d2[0])
		return ""
	}

	// Calibrate: the commit's duration, uninterrupted; the result is new.
	var durs []time.Duration
	for range 3 {
		resetTree(t, base, root)
		d, _ := killRun(t, spec, -1)
		durs = append(durs, d)
		if got := match("uninterrupted commit"); got != "new" {
			t.Fatalf("an uninterrupted commit left the %s tree", got)
		}
	}
	// Kills land uniformly over the fastest commit seen: on a loaded
	// machine the others are slower, and a kill after the end tests nothing.
	slices.Sort(durs)
	span := durs[0]

	r := rand.New(rand.NewPCG(2, 12))
	counts := map[string]int{}
	for i := range trials {
		resetTree(t, base, root)
		d := time.Duration(r.Int64N(int64(span)))
		_, finished := killRun(t, spec, d)
		state := "no journal"
		if _, err := os.Lstat(filepath.Join(root, ".cowfs-commit")); err == nil {
			state = "journal"
			if _, err := os.Lstat(filepath.Join(root, ".cowfs-commit", "intent")); err == nil {
				state = "intent"
			}
		}
		if _, err := overlayfs.New(root); (state == "no journal") != (err == nil) {
			t.Fatalf("trial %d (%s): New = %v", i, state, err)
		}
		if err := overlayfs.Recover(root); err != nil {
			t.Fatalf("trial %d: Recover: %v", i, err)
		}
		if _, err := os.Lstat(filepath.Join(root, ".cowfs-commit")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("trial %d: Recover left the journal (%v)", i, err)
		}
		got := match(fmt.Sprintf("trial %d, killed %v into a commit of ~%v (%s)", i, d, durs[1], state))
		if state == "intent" && got != "new" {
			t.Fatalf("trial %d: killed after the commit point, Recover gave the old tree", i)
		}
		key := fmt.Sprintf("%s -> %s", state, got)
		if finished {
			key = "finished -> " + got
		}
		counts[key]++
	}
	t.Logf("%d trials over a commit of %v (%d ops, %d paths after): %v", trials, durs[1], len(ops), len(newTree), counts)
	if trials >= 100 && (counts["intent -> new"] == 0 || counts["journal -> old"] == 0) {
		t.Errorf("the kills missed a phase of the commit (no kill while staging, or none after the commit point): %v", counts)
	}
}
