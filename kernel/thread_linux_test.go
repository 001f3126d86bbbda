package kernel

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		got := threadState(t, filepath.Join("/proc/self/task", task.Name()))
		if got != "" && got != want {
			t.Errorf("thread %s after the runs:\n%s\nwant (the main thread before):\n%s", task.Name(), got, want)
		}
	}
}
