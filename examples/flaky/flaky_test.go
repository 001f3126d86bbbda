package flaky

import (
	"os"
	"strconv"
	"testing"

	"github.com/cowfs/cowfs/helpers"
)

// Each test gets the fixture testdata/shop.txtar under a cowfs overlay.
// With COWFS_TAPE_DIR set (replay check sets it), each records a tape.

func TestSorted(t *testing.T) {
	env := helpers.NewTxtar(t, "testdata/shop.txtar")
	inv, err := Inventory(env.Fs(), env.Root())
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteSorted(env.Fs(), env.Root(), inv); err != nil {
		t.Fatal(err)
	}
	env.Changed("A out", "A out/sorted.txt")
}

func TestUnsorted(t *testing.T) {
	env := helpers.NewTxtar(t, "testdata/shop.txtar")
	inv, err := Inventory(env.Fs(), env.Root())
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteUnsorted(env.Fs(), env.Root(), inv); err != nil {
		t.Fatal(err)
	}
	// The test passes: it checks what was written, not the order.
	env.Changed("A out", "A out/unsorted.txt")
}

func TestAppendLogs(t *testing.T) {
	env := helpers.NewTxtar(t, "testdata/shop.txtar")
	if err := AppendLogs(env.Fs(), env.Root(), 25); err != nil {
		t.Fatal(err)
	}
	env.Changed("A out", "A out/left.log", "A out/right.log")
}

// TestFlaky stands for a test that depends on something outside it (a
// port, a clock, a shared cache). To be flaky on cue, and reproducibly
// so, it fails in the even-numbered runs of replay check, which sets
// COWFS_RUN (helpers.EnvRun) to 1, 2, ... N in run after run. Under a
// plain go test, COWFS_RUN is unset and the test passes. It keeps no
// state between runs: replay check -n 3 fails run 2, every time.
func TestFlaky(t *testing.T) {
	env := helpers.NewTxtar(t, "testdata/shop.txtar")
	if err := WriteCount(env.Fs(), env.Root()); err != nil {
		t.Fatal(err)
	}
	if run := runNumber(t); run%2 == 0 {
		t.Errorf("the shared resource was busy (run %d)", run)
	}
}

// runNumber is the run of replay check this is, from COWFS_RUN; 1 when
// it is unset.
func runNumber(t *testing.T) int {
	v := os.Getenv(helpers.EnvRun)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a run number, 1 or more", helpers.EnvRun, v)
	}
	return n
}
