package helpers_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/internal/longtest"
	"github.com/cowfs/cowfs/kernel"
)

// runChildEnv makes the test binary run TestEnvRunChild in the way its
// value names: "fatal" (t.Fatal after a Run whose command left a daemon),
// "panic" (a panic while the command runs) or "timeout" (the test binary's
// -test.timeout expires while the command runs).
const runChildEnv = "COWFS_HELPERS_RUN_CHILD"

// childMarker is in the environment and argv of every process the child's
// command starts.
const childMarker = "COWFS_HELPERS_MARKER"

func TestEnvRunChild(t *testing.T) {
	how := os.Getenv(runChildEnv)
	if how == "" {
		t.Skip("runs as a child of TestEnvRunFailingTestLeavesNothing")
	}
	marker := os.Getenv(childMarker)
	root := t.TempDir()
	e := helpers.New(t, root)
	ready := filepath.Join(os.Getenv("TMPDIR"), "ready")
	switch how {
	case "fatal":
		cmd := exec.Command("sh", "-c", `(setsid sh -c 'sleep 300' "$0-daemon" &); sleep 300 & echo x > f`, marker)
		cmd.Dir = e.Root()
		if err := e.Run(cmd); err != nil {
			t.Errorf("Run: %v", err)
		}
		t.Fatal("the test fails after Run")
	case "panic", "timeout":
		if how == "panic" {
			go func() {
				for i := 0; i < 3000; i++ {
					if _, err := os.Stat(ready); err == nil {
						panic("the test panics while the command runs")
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
		cmd := exec.Command("sh", "-c", `(setsid sh -c 'sleep 300' "$0-daemon" &); touch "$1"; sleep 300`, marker, ready)
		cmd.Dir = e.Root()
		e.Run(cmd, kernel.WithWritable(filepath.Dir(ready)))
		t.Error("Run returned")
	}
}

// markerProcesses lists the processes whose argv or environment holds marker.
func markerProcesses(marker string) []string {
	paths, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, p := range paths {
		for _, f := range []string{"cmdline", "environ"} {
			if b, err := os.ReadFile(filepath.Join(p, f)); err == nil && bytes.Contains(b, []byte(marker)) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// mountsUnder lists the mounts, in any process's mount namespace, whose
// line in mountinfo names a path under dir.
func mountsUnder(dir string) []string {
	paths, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, dir+"/") {
				out = append(out, p+": "+line)
			}
		}
	}
	return out
}

// TestEnvRunFailingTestLeavesNothing runs a test that uses Env.Run and
// fails (t.Fatal), panics, or times out, as a separate test binary, and
// checks the system itself afterwards: no process of the command (the
// process table), no overlay or other mount under its temporary directory
// (every mountinfo), and in the temporary directory nothing that
// kernel.Cleanup does not reclaim (a killed process cannot remove its own
// directories; they carry owner records for that) and, after a test that
// only failed, nothing at all.
func TestEnvRunFailingTestLeavesNothing(t *testing.T) {
	needRun(t)
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	hows := []string{"fatal", "panic", "timeout"}
	// Whether a panicking caller's exit reaches the namespace's init
	// depended on which of its threads ended last (the parent-death
	// signal of the confined thread was refused): one run in two leaked
	// before the life pipe. The long step repeats the panic.
	for range longtest.N(0, 5) {
		hows = append(hows, "panic")
	}
	for _, how := range hows {
		t.Run(how, func(t *testing.T) {
			tmp := t.TempDir()
			marker := fmt.Sprintf("cowfs-helpers-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
			args := []string{"-test.run=^TestEnvRunChild$", "-test.v"}
			if how == "timeout" {
				args = append(args, "-test.timeout=3s")
			}
			cmd := exec.Command(self, args...)
			cmd.Env = append(os.Environ(), runChildEnv+"="+how, childMarker+"="+marker, "TMPDIR="+tmp)
			out, err := cmd.CombinedOutput()
			text := string(out)
			if strings.Contains(text, "--- SKIP") {
				t.Skip("child skipped: ", text)
			}
			if err == nil {
				t.Fatalf("the child test passed:\n%s", text)
			}
			if !strings.Contains(text, map[string]string{"fatal": "the test fails after Run", "panic": "the test panics", "timeout": "test timed out"}[how]) {
				t.Fatalf("the child did not end as meant:\n%s", text)
			}
			deadline := time.Now().Add(10 * time.Second)
			for len(markerProcesses(marker)) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if left := markerProcesses(marker); len(left) > 0 {
				for _, p := range left {
					if pid, err := strconv.Atoi(filepath.Base(p)); err == nil {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				t.Errorf("processes of the command outlived the test: %q", left)
			}
			if left := mountsUnder(tmp); len(left) > 0 {
				t.Errorf("mounts left:\n%s", strings.Join(left, "\n"))
			}
			if how == "fatal" {
				if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
					t.Errorf("left in the temporary directory: %v", ents)
				}
				return
			}
			removed, err := kernel.Cleanup(tmp)
			if err != nil {
				t.Errorf("kernel.Cleanup: %v", err)
			}
			t.Logf("kernel.Cleanup reclaimed %q", removed)
			ents, _ := os.ReadDir(tmp)
			var names []string
			for _, e := range ents {
				if e.Name() != "ready" && !strings.HasPrefix(e.Name(), "TestEnvRunChild") {
					names = append(names, e.Name()) // t.TempDir of a crashed test stays, as with any test
				}
			}
			if len(names) > 0 {
				t.Errorf("left after kernel.Cleanup: %q", names)
			}
		})
	}
}

// TestEnvRunInCleanup: a command run from a Cleanup function, when the
// test's context is already done, runs (it used to fail at once with
// "context canceled") and its writes reach the overlay.
func TestEnvRunInCleanup(t *testing.T) {
	needRun(t)
	root := t.TempDir()
	e := helpers.New(t, root)
	t.Cleanup(func() {
		b, err := os.ReadFile(filepath.Join(root, "f"))
		if err == nil {
			t.Errorf("the command wrote the real root: %q", b)
		}
		got, err := afero.ReadFile(e.Overlay(), filepath.Join(root, "f"))
		if err != nil || string(got) != "teardown\n" {
			t.Errorf("what the command wrote, in the overlay: %q, %v", got, err)
		}
	})
	t.Cleanup(func() {
		if t.Context().Err() == nil {
			t.Fatal("the test's context is not done in Cleanup: nothing to check")
		}
		cmd := exec.Command("sh", "-c", "echo teardown > f")
		cmd.Dir = root
		if err := e.Run(cmd); err != nil {
			t.Errorf("Run in Cleanup: %v", err)
		}
	})
}
