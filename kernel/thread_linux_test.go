package kernel

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// threadState is what a thread of this process must keep after a Run in
// a thread: its namespaces, working directory and the kernel's view of
// its privileges (Landlock implies NoNewPrivs; the dropped capabilities
// show in CapBnd), read from /proc, the kernel's own account.
func threadState(t *testing.T, task string) string {
	t.Helper()
	var b strings.Builder
	for _, ns := range []string{"mnt", "pid_for_children", "net", "uts", "ipc"} {
		l, err := os.Readlink(filepath.Join(task, "ns", ns))
		if err != nil {
			return "" // the thread is gone
		}
		b.WriteString(l + " ")
	}
	cwd, _ := os.Readlink(filepath.Join(task, "cwd"))
	b.WriteString("cwd=" + cwd)
	status, _ := os.ReadFile(filepath.Join(task, "status"))
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "NoNewPrivs:") || strings.HasPrefix(line, "CapBnd:") || strings.HasPrefix(line, "Seccomp:") {
			b.WriteString(" " + strings.Join(strings.Fields(line), ""))
		}
	}
	return b.String()
}

// TestRunThreadLeavesCallerAlone: a Run in a thread (as root) leaves
// every thread of the caller as the main thread was before, by the
// kernel's account in /proc (namespaces, working directory, no_new_privs,
// bounding set): the thread that made the sandbox is gone, whichever it
// was (the main thread, which the runtime never ends, must not be the
// one), and a command that reads its stdin to the end gets all of it.
func TestRunThreadLeavesCallerAlone(t *testing.T) {
	if os.Geteuid() != 0 || !inInitUserNS() {
		t.Skip("the thread runs as root in the initial user namespace only")
	}
	needMount(t)
	want := threadState(t, "/proc/self/task/"+strconv.Itoa(os.Getpid()))
	root := t.TempDir()
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	// Busy processes keep the CPUs taken, as on a loaded machine, where a
	// thread's exit after its goroutine's return comes latest.
	for range runtime.NumCPU() {
		busy := exec.Command("sh", "-c", "while :; do :; done")
		if err := busy.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { busy.Process.Kill(); busy.Wait() })
	}
	for i := range 8 {
		cmd := exec.Command("sh", "-c", "cat > in.txt")
		cmd.Dir = root
		input := strings.Repeat("x", 1<<16) + strconv.Itoa(i)
		cmd.Stdin = strings.NewReader(input)
		var mode Mode
		if err := Run(context.Background(), f, cmd, WithModeReport(func(m Mode) { mode = m })); err != nil {
			t.Fatalf("Run %d: %v", i, err)
		}
		if mode.Kind != ModeOverlay {
			t.Fatalf("ran as %v", mode.Kind)
		}
		got, err := afero.ReadFile(f, filepath.Join(root, "in.txt"))
		if err != nil || !bytes.Equal(got, []byte(input)) {
			t.Fatalf("Run %d: the command read %d bytes (%v), want %d", i, len(got), err, len(input))
		}
		// As Run returns, not eventually: the thread's exit follows its
		// goroutine's return, and Run waits for it.
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			got := threadState(t, filepath.Join("/proc/self/task", task.Name()))
			if got != "" && got != want {
				t.Fatalf("Run %d: thread %s after it:\n%s\nwant (the main thread before):\n%s", i, task.Name(), got, want)
			}
		}
	}
}

// noSysAdminEnv makes the test binary run TestRunThreadFallback as the
// child of that test: root without CAP_SYS_ADMIN (as in a default Docker
// container), where the thread cannot make the namespaces.
const noSysAdminEnv = "COWFS_KERNEL_NO_SYS_ADMIN"

// TestRunThreadFallback runs Run as root without CAP_SYS_ADMIN (setpriv
// drops it from the bounding set), where unshare(2) in the thread fails
// and Run takes the re-executed init, which cannot mount either and falls
// back to the copy: a command reading a Stdin that is not an *os.File
// still gets all of it (the thread copies it only once the command runs),
// and writes the same file as a plain run.
func TestRunThreadFallback(t *testing.T) {
	if os.Getenv(noSysAdminEnv) == "" {
		if os.Geteuid() != 0 || !inInitUserNS() {
			t.Skip("needs root in the initial user namespace, to drop CAP_SYS_ADMIN")
		}
		if _, err := landlockABI(runConfig{}); err != nil {
			t.Skip("Landlock is not available (the copy fallback refuses without): ", err)
		}
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("setpriv(1) is not installed (util-linux)")
		}
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(setpriv, "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", self, "-test.run=^TestRunThreadFallback$", "-test.v")
		cmd.Env = append(os.Environ(), noSysAdminEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, lastLines(string(out), 30))
		}
		if strings.Contains(string(out), "--- SKIP") {
			t.Skip("child skipped: ", lastLines(string(out), 3))
		}
		t.Log(lastLines(string(out), 4))
		return
	}
	input := strings.Repeat("0123456789abcdef", 1<<14) // 256 KiB, four pipe buffers
	root := t.TempDir()
	plain := exec.Command("sh", "-c", "cat > in.txt")
	plain.Dir, plain.Stdin = root, strings.NewReader(input)
	if out, err := plain.CombinedOutput(); err != nil {
		t.Fatalf("plain run: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(root, "in.txt"))
	if err != nil || len(want) != len(input) {
		t.Fatalf("plain run wrote %d bytes (%v)", len(want), err)
	}
	if err := os.Remove(filepath.Join(root, "in.txt")); err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "cat > in.txt")
	cmd.Dir, cmd.Stdin = root, strings.NewReader(input)
	var mode Mode
	if err := Run(context.Background(), f, cmd, WithModeReport(func(m Mode) { mode = m })); err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("mode: %v", mode)
	if mode.Kind != ModeCopy || mode.Fallback == "" {
		t.Errorf("ran as %v (fallback %q), want the copy fallback", mode.Kind, mode.Fallback)
	}
	got, err := afero.ReadFile(f, filepath.Join(root, "in.txt"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("the command read %d bytes (%v), a plain run %d", len(got), err, len(want))
	}
}
