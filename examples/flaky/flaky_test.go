package flaky

import (
	"os"
	"path/filepath"
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
// port, a clock, a shared cache). To be flaky on cue, it fails every
// other time it runs on this machine, counting its runs in a file in the
// temporary directory.
func TestFlaky(t *testing.T) {
	env := helpers.NewTxtar(t, "testdata/shop.txtar")
	if err := WriteCount(env.Fs(), env.Root()); err != nil {
		t.Fatal(err)
	}
	if runs := countRun(t); runs%2 == 0 {
		t.Errorf("the shared resource was busy (run %d)", runs)
	}
}

// countRun increments and returns the number of runs of TestFlaky.
func countRun(t *testing.T) int {
	p := filepath.Join(os.TempDir(), "cowfs-example-flaky.count")
	b, _ := os.ReadFile(p)
	n, _ := strconv.Atoi(string(b))
	n++
	if err := os.WriteFile(p, []byte(strconv.Itoa(n)), 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}
