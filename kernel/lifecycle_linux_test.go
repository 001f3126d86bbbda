package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// The command of these tests leaves a grandchild in the background and
// sleeps. Every process of it carries the marker: in its environment
// (COWFS_TEST_MARKER) and, for the shells, in argv ($0).
const lifecycleScript = `sh -c 'sleep 300; echo late > "$COWFS_ROOT/late-grandchild"' "$0-grandchild" &
echo started > "$COWFS_TEST_READY"
sleep 300
echo late > late.txt
`

// markerProcs lists the processes whose argv or environment holds marker.
func markerProcs(marker string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), f))
			if err == nil && bytes.Contains(b, []byte(marker)) {
				cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
				break
			}
		}
	}
	return out
}

// waitNoMarker fails unless every process carrying marker is gone within d.
func waitNoMarker(t *testing.T, marker string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := markerProcs(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes of the command still run %v later:\n%s", d, strings.Join(left, "\n"))
			for _, p := range left {
				pid, _ := strconv.Atoi(strings.SplitN(p, ":", 2)[0])
				syscall.Kill(pid, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newMarker(t *testing.T) string {
	return fmt.Sprintf("cowfs-test-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// markerCmd is lifecycleScript as a command; ready appears once it runs.
func markerCmd(marker, ready, dir string) *exec.Cmd {
	cmd := exec.Command("sh", "-c", lifecycleScript, marker)
	cmd.Env = append(os.Environ(), "COWFS_TEST_MARKER="+marker, "COWFS_TEST_READY="+ready)
	cmd.Dir = dir
	return cmd
}

// lifecycleChildEnv makes the test binary run TestLifecycleChild.
const lifecycleChildEnv = "COWFS_KERNEL_LIFECYCLE_CHILD"

type lifecycleJob struct {
	Mode   string // "overlay", "copy", "direct" (no PID namespace), "mount"
	Dir    string // everything goes under it
	Marker string
}

// TestLifecycleChild is the caller that the tests below kill.
func TestLifecycleChild(t *testing.T) {
	js := os.Getenv(lifecycleChildEnv)
	if js == "" {
		t.Skip("runs as a child of the caller-death tests")
	}
	var job lifecycleJob
	if err := json.Unmarshal([]byte(js), &job); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(job.Dir, "ready")
	switch job.Mode {
	case "mount":
		d := filepath.Join(job.Dir, "m")
		mk := func(s string) string {
			p := filepath.Join(d, s)
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			return p
		}
		if _, err := Mount(context.Background(), mk("lower"), mk("upper"), mk("work"), mk("mnt"), Options{UserXattr: !inInitUserNS()}); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(ready, nil, 0o644)
		time.Sleep(time.Hour)
	}
	root := filepath.Join(job.Dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	cmd := markerCmd(job.Marker, ready, root)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	runs := filepath.Join(job.Dir, "runs")
	switch job.Mode {
	// The ready file lies beside the root, where a confined command cannot
	// write: these runs are unconfined.
	case "overlay":
		err = runOverlay(context.Background(), f, cmd, runConfig{tempDir: runs, unconfined: true})
	case "copy":
		err = Run(context.Background(), f, cmd, WithCopyFallback(), WithTempDir(runs), Unconfined())
	case "direct":
		// The copy fallback's supervision where no PID namespace can be made.
		dir, done, derr := ownedTempDir(runs, copyDirPrefix)
		if derr != nil {
			t.Fatal(derr)
		}
		defer done()
		cmd.Env = append(cmd.Env, RootEnv+"="+dir)
		sup, serr := superviseStart(cloneCmd(context.Background(), cmd), nil, false, "exec")
		if serr != nil {
			t.Fatal(serr)
		}
		err = sup.wait()
	}
	t.Fatalf("Run returned (%v); it should have been killed", err)
}

// How the caller runs: as root, as uid 65534 without capabilities, or as
// root of a user namespace of its own, with a mount namespace of its own.
const (
	asRoot = iota
	asUnprivileged
	asUserNS
)

// startLifecycleChild starts TestLifecycleChild for job, waits until its
// command runs and kills it with SIGKILL.
// beforeKill, if given, looks at the child first.
func startLifecycleChild(t *testing.T, job lifecycleJob, how int, beforeKill ...func(pid int)) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	js, _ := json.Marshal(job)
	args := []string{"-test.run=^TestLifecycleChild$", "-test.v"}
	var cmd *exec.Cmd
	if how == asUnprivileged {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("setpriv(1) is not installed (util-linux): cannot run the caller unprivileged")
		}
		bin := filepath.Join(job.Dir, "kernel.test")
		if err := copyExecutable(self, bin); err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command(setpriv, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin}, args...)...)
	} else {
		cmd = exec.Command(self, args...)
	}
	cmd.Env = append(os.Environ(), lifecycleChildEnv+"="+string(js), "TMPDIR="+job.Dir)
	if how == asUserNS {
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER, Unshareflags: syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		}
	}
	// A file, not a pipe: survivors of the kill must not hold up Wait.
	out, err := os.Create(filepath.Join(job.Dir, "child-output"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // on any early exit
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	output := func() string {
		b, _ := os.ReadFile(out.Name())
		return string(b)
	}
	deadline := time.After(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(job.Dir, "ready")); err == nil {
			break
		}
		select {
		case <-done:
			if strings.Contains(output(), "--- SKIP") {
				t.Skip("child skipped: ", lastLines(output(), 3))
			}
			t.Fatalf("the child ended before its command started:\n%s", lastLines(output(), 30))
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("the child's command did not start:\n%s", lastLines(output(), 30))
		case <-time.After(10 * time.Millisecond):
		}
	}
	for _, f := range beforeKill {
		f(cmd.Process.Pid)
	}
	// Kill the caller the hard way and reap it.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	return cmd
}

// lifecycleDir is a temporary directory that uid 65534 may use.
func lifecycleDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"runs", "live"} {
		p := filepath.Join(d, s)
		if err := os.Mkdir(p, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// TestRunCallerKilled kills, with SIGKILL, a process that is inside Run,
// running as root, as uid 65534 (Run makes a user namespace) and as root
// of a user namespace of its own:
// within a second no process of the command may remain, and Cleanup then
// removes the temporary directories it left, but not a live Run's.
func TestRunCallerKilled(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test runs the caller as root and as uid 65534")
	}
	for _, mode := range []string{"overlay", "copy", "direct"} {
		for _, how := range []int{asRoot, asUnprivileged, asUserNS} {
			name := mode + []string{"-root", "-uid65534", "-userns-root"}[how]
			t.Run(name, func(t *testing.T) {
				if mode == "overlay" {
					needMount(t)
				}
				if mode == "direct" && how != asRoot {
					t.Skip("direct supervision does not depend on privilege; run as root only")
				}
				dir := lifecycleDir(t)
				job := lifecycleJob{Mode: mode, Dir: dir, Marker: newMarker(t)}
				startLifecycleChild(t, job, how)
				waitNoMarker(t, job.Marker, time.Second)

				runs := filepath.Join(dir, "runs")
				left, _ := filepath.Glob(filepath.Join(runs, "cowfs-*"))
				if len(left) != 1 {
					t.Fatalf("the killed Run left %v, want one temporary directory", left)
				}
				removed, err := Cleanup(runs)
				if err != nil {
					t.Errorf("Cleanup: %v", err)
				}
				if !slices.Equal(removed, left) {
					t.Errorf("Cleanup removed %q, want %q", removed, left)
				}
				if now, _ := filepath.Glob(filepath.Join(runs, "cowfs-*")); len(now) != 0 {
					t.Errorf("after Cleanup: %q", now)
				}

				// A live Run's directory stays.
				liveRoot := filepath.Join(dir, "live")
				f, err := overlayfs.New(liveRoot)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				liveReady := filepath.Join(dir, "live-ready")
				liveMarker := newMarker(t) + "-live"
				liveDone := make(chan error)
				go func() {
					opts := []RunOption{Unconfined()} // live-ready lies beside the root
					if mode != "overlay" {
						opts = append(opts, WithCopyFallback())
					}
					liveDone <- Run(ctx, f, markerCmd(liveMarker, liveReady, liveRoot), append(opts, WithTempDir(runs))...)
				}()
				waitFile(t, liveReady, 30*time.Second)
				live, _ := filepath.Glob(filepath.Join(runs, "cowfs-*"))
				if removed, err := Cleanup(runs); err != nil || len(removed) > 0 {
					t.Errorf("Cleanup with a live Run: removed %q, %v", removed, err)
				}
				if now, _ := filepath.Glob(filepath.Join(runs, "cowfs-*")); !slices.Equal(now, live) || len(live) != 1 {
					t.Errorf("after Cleanup: %q, want the live Run's %q", now, live)
				}
				cancel()
				if err := <-liveDone; err == nil {
					t.Error("the cancelled live Run reported success")
				}
				waitNoMarker(t, liveMarker, 0)
				if now, _ := filepath.Glob(filepath.Join(runs, "cowfs-*")); len(now) != 0 {
					t.Errorf("the live Run left %q", now)
				}
				for _, late := range []string{"root/late.txt", "root/late-grandchild"} {
					if _, err := os.Lstat(filepath.Join(dir, late)); err == nil {
						t.Errorf("%s was written to the real root", late)
					}
				}
			})
		}
	}
}

// TestMountOwnerKilled kills a process that mounted an overlay with Mount:
// the orphan stays mounted, marked as cowfs's; Cleanup unmounts it (lazily,
// as it is busy) and removes its upper and work, and leaves a live owner's
// mount and an unrelated tmpfs alone.
func TestMountOwnerKilled(t *testing.T) {
	if os.Geteuid() != 0 || !inInitUserNS() {
		t.Skip("needs root in the initial user namespace: the orphan must be mounted where this test sees it")
	}
	needMount(t)
	dir := lifecycleDir(t)
	startLifecycleChild(t, lifecycleJob{Mode: "mount", Dir: dir}, asRoot)
	orphan := filepath.Join(dir, "m", "mnt")
	mi := func() []mountInfo {
		ms, err := readMountinfo("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	find := func(target string) (mountInfo, bool) {
		ms := mi() // one read: other tests mount and unmount meanwhile
		i := slices.IndexFunc(ms, func(m mountInfo) bool { return m.mountPoint == target })
		if i < 0 {
			return mountInfo{}, false
		}
		return ms[i], true
	}
	m, ok := find(orphan)
	if !ok {
		t.Fatalf("the killed owner's overlay on %s is not in /proc/self/mountinfo", orphan)
	}
	if m.fsType != "overlay" || m.source != "cowfs" {
		t.Errorf("orphan mount: type %q source %q, want overlay cowfs", m.fsType, m.source)
	}
	t.Cleanup(func() { unix.Unmount(orphan, unix.MNT_DETACH) })

	// A live owner's mount and a tmpfs, under the same directory.
	var l, u, w, target string
	for i, p := range []*string{&l, &u, &w, &target} {
		*p = filepath.Join(dir, "live", strconv.Itoa(i))
		if err := os.Mkdir(*p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	live, err := Mount(context.Background(), l, u, w, target, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Unmount() })
	tmpfs := filepath.Join(dir, "tmpfs")
	if err := os.Mkdir(tmpfs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("cowfs", tmpfs, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(tmpfs, unix.MNT_DETACH) })

	// Keep the orphan busy, so that only a lazy unmount works.
	busy, err := os.Open(orphan)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	removed, err := Cleanup(dir)
	if err != nil {
		t.Errorf("Cleanup: %v", err)
	}
	want := []string{orphan, filepath.Join(dir, "m", "upper"), filepath.Join(dir, "m", "work")}
	if !slices.Equal(removed, want) {
		t.Errorf("Cleanup removed %q, want %q", removed, want)
	}
	if _, ok := find(orphan); ok {
		t.Error("the orphan is still mounted")
	}
	for _, p := range want[1:] {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was not removed", p)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "m", "upper"+mountRecordSuffix)); err == nil {
		t.Error("the orphan's owner record was not removed")
	}
	if m, ok := find(target); !ok || m.source != "cowfs" {
		t.Error("the live owner's mount was unmounted")
	}
	if _, ok := find(tmpfs); !ok {
		t.Error("the tmpfs was unmounted")
	}
	for _, p := range []string{u, w, filepath.Join(dir, "m", "lower")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s should remain: %v", p, err)
		}
	}
	if err := live.Unmount(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(u + mountRecordSuffix); err == nil {
		t.Error("Unmount left its owner record")
	}
}

// TestMountOwnerKilledInNamespace: a caller that mounted in a user and
// mount namespace of its own leaves no mount when it is killed (its
// namespace dies with it), only the directories it made.
func TestMountOwnerKilledInNamespace(t *testing.T) {
	needMount(t)
	dir := lifecycleDir(t)
	startLifecycleChild(t, lifecycleJob{Mode: "mount", Dir: dir}, asUserNS, func(pid int) {
		if !slices.ContainsFunc(overlaysUnder(dir), func(s string) bool {
			return strings.HasPrefix(s, "/proc/"+strconv.Itoa(pid)+"/")
		}) {
			t.Fatalf("the child's overlay is not in its /proc/%d/mountinfo", pid)
		}
		if m, _ := readMountinfo("/proc/self/mountinfo"); slices.ContainsFunc(m, func(m mountInfo) bool { return within(dir, m.mountPoint) }) {
			t.Fatal("the child's overlay is in this test's mount namespace")
		}
	})
	deadline := time.Now().Add(10 * time.Second) // the namespace's teardown is asynchronous; slow on a loaded machine
	for left := overlaysUnder(dir); len(left) > 0; left = overlaysUnder(dir) {
		if time.Now().After(deadline) {
			t.Fatalf("overlays still mounted 10 s after their owner was killed:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Lstat(filepath.Join(dir, "m", "upper"+mountRecordSuffix)); err != nil {
		t.Errorf("the owner record beside upper: %v", err)
	}
}

// lifecycleModes are runModes plus "direct": the supervision Run falls
// back to where no PID namespace can be made, on a plain command (no
// copy, no import).
func lifecycleModes() []runMode {
	return append(runModes(), runMode{"direct", func(ctx context.Context, f *overlayfs.Fs, cmd *exec.Cmd, _ ...RunOption) error {
		sup, err := superviseStart(cloneCmd(ctx, cmd), nil, false, "exec")
		if err != nil {
			return err
		}
		err = sup.wait()
		var se *startError
		if errors.As(err, &se) {
			return se.err
		}
		return err
	}})
}

// overlaysUnder lists the overlay mounts, in any process's mount
// namespace, whose upper directory lies under dir.
func overlaysUnder(dir string) []string {
	var out []string
	paths, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, p := range paths {
		ms, err := readMountinfo(p)
		if err != nil {
			continue
		}
		for _, m := range ms {
			if u := m.superOption("upperdir"); m.fsType == "overlay" && u != "" && within(dir, u) {
				out = append(out, p+": "+m.mountPoint)
			}
		}
	}
	return out
}

// TestRunCancelLeavesNothing cancels Run while the command and a
// background grandchild run: when Run returns no process of the command
// remains, and no overlay of it is mounted in any mount namespace.
func TestRunCancelLeavesNothing(t *testing.T) {
	// Every mode's temporary directories go to os.TempDir(): this one.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, mode := range lifecycleModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			root := t.TempDir()
			f := newOverlay(t, root)
			marker := newMarker(t)
			ready := filepath.Join(t.TempDir(), "ready")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					if _, err := os.Stat(ready); err == nil {
						break
					}
				}
				cancel()
			}()
			cmd := markerCmd(marker, ready, root)
			err := mode.run(ctx, f, cmd, WithWritable(filepath.Dir(ready)))
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Errorf("cancelled Run: %v, want killed", err)
			}
			waitNoMarker(t, marker, 0)
			if left := overlaysUnder(tmp); len(left) > 0 {
				t.Errorf("overlays still mounted after Run returned:\n%s", strings.Join(left, "\n"))
			}
			if left, _ := filepath.Glob(filepath.Join(tmp, "cowfs-*")); len(left) > 0 {
				t.Errorf("temporary directories left: %q", left)
			}
		})
	}
}

// TestRunReturnKillsBackground: what the command leaves running in the
// background is killed when it exits, and Run waits for that.
func TestRunReturnKillsBackground(t *testing.T) {
	for _, mode := range lifecycleModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			root := t.TempDir()
			f := newOverlay(t, root)
			marker := newMarker(t)
			// setsid and a double fork: a daemon leaves the process group and
			// its parent; only a PID namespace or a subreaper still has it.
			cmd := exec.Command("sh", "-c", `(setsid sh -c 'sleep 300' "$0-daemon" &) ; echo x > out`, marker)
			cmd.Env = append(os.Environ(), "COWFS_TEST_MARKER="+marker)
			cmd.Dir = root
			if err := mode.run(context.Background(), f, cmd); err != nil {
				t.Fatal(err)
			}
			waitNoMarker(t, marker, 0)
			if got := changeStrings(f); mode.name != "direct" && !slices.Equal(got, []string{"A out"}) {
				t.Errorf("changes: %q", got)
			}
		})
	}
}

// TestRunExitStatusLikeOS: the error of a command that exits non-zero or
// dies of a signal is what os/exec gives for the same command run plainly.
func TestRunExitStatusLikeOS(t *testing.T) {
	scripts := []string{"exit 7", "kill -TERM $$", "kill -KILL $$", "kill -USR1 $$", "kill -QUIT $$", "kill -SEGV $$", "kill -PIPE $$"}
	status := func(err error) string {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return fmt.Sprintf("not an ExitError: %v", err)
		}
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			return "signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exit %d (%d)", ws.ExitStatus(), ee.ExitCode())
	}
	for _, mode := range lifecycleModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			for _, s := range scripts {
				root := t.TempDir()
				want := status(exec.Command("sh", "-c", s).Run())
				f, err := overlayfs.New(root)
				if err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command("sh", "-c", s)
				cmd.Dir = root
				if got := status(mode.run(context.Background(), f, cmd)); got != want {
					t.Errorf("%q: %s, want %s as os/exec gives", s, got, want)
				}
			}
			// A program that does not exist: not found, as os/exec says.
			missing := filepath.Join(t.TempDir(), "no-such-program")
			oracleErr := exec.Command(missing).Run()
			f, err := overlayfs.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			err = mode.run(context.Background(), f, exec.Command(missing))
			if !errors.Is(oracleErr, fs.ErrNotExist) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
				t.Errorf("missing program: %v, want like os/exec's %v", err, oracleErr)
			}
		})
	}
}

func TestCleanupLeavesWhatIsNotAbandoned(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, record bool) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(p, "work", "work"), 0o755); err != nil {
			t.Fatal(err)
		}
		if record {
			if err := os.WriteFile(filepath.Join(p, ownerRecordName), []byte("dead"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	dead := mk("cowfs-run-dead", true)
	// The kernel leaves work/work with mode 0.
	if err := os.Chmod(filepath.Join(dead, "work", "work"), 0); err != nil {
		t.Fatal(err)
	}
	deadCopy := mk("cowfs-copy-dead", true)
	noRecord := mk("cowfs-run-norecord", false)
	other := mk("other-dead", true)
	liveDir, done, err := ownedTempDir(dir, runDirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	// A symlink named like a run dir, to a dead run dir elsewhere.
	elsewhere := mk("elsewhere/cowfs-run-x", true)
	if err := os.Symlink(elsewhere, filepath.Join(dir, "cowfs-run-link")); err != nil {
		t.Fatal(err)
	}
	// A record that is a symlink is not a record.
	symRec := mk("cowfs-run-symrec", false)
	if err := os.Symlink(filepath.Join(dead, ownerRecordName), filepath.Join(symRec, ownerRecordName)); err != nil {
		t.Fatal(err)
	}

	removed, err := Cleanup(dir)
	if err != nil {
		t.Errorf("Cleanup: %v", err)
	}
	if want := []string{deadCopy, dead}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	for _, p := range []string{noRecord, other, liveDir, elsewhere, symRec, filepath.Join(dir, "cowfs-run-link")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s should remain: %v", p, err)
		}
	}
	if _, err := Cleanup(filepath.Join(dir, "missing")); err == nil {
		t.Error("Cleanup of a missing directory succeeded")
	}
}

func TestMountinfoUnescape(t *testing.T) {
	line := `812 29 0:93 / /tmp/a\040b\134c rw,relatime shared:1 - overlay cowfs rw,lowerdir=/l,upperdir=/u\054x\075y,workdir=/w,userxattr`
	m, ok := parseMountinfoLine(line)
	if !ok {
		t.Fatal("not parsed")
	}
	if m.id != 812 || m.parent != 29 || m.mountPoint != `/tmp/a b\c` || m.fsType != "overlay" || m.source != "cowfs" {
		t.Errorf("parsed %+v", m)
	}
	if got := m.superOption("upperdir"); got != "/u,x=y" {
		t.Errorf("upperdir %q", got)
	}
	if got := m.superOption("workdir"); got != "/w" {
		t.Errorf("workdir %q", got)
	}
}

// TestCleanupRacesCreation runs Cleanup over and over while temporary
// directories are being made: a directory whose owner is alive, however
// new, is never removed.
func TestCleanupRacesCreation(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	cleaned := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				cleaned <- n
				return
			default:
			}
			removed, _ := Cleanup(dir)
			n += len(removed)
		}
	}()
	for range 300 {
		d, done, err := ownedTempDir(dir, runDirPrefix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "x"), nil, 0o644); err != nil {
			t.Fatalf("a live owner's directory went away: %v", err)
		}
		done()
	}
	close(stop)
	if n := <-cleaned; n != 0 {
		t.Errorf("Cleanup removed %d directories of live owners", n)
	}
}

// TestRunLeaksNoDescriptors: the command gets the descriptors and the
// environment it would get from os/exec, and none of the supervisors',
// nor any the caller holds without close-on-exec (which os/exec would
// pass on): only 0, 1, 2 and its extra file (issue 22).
func TestRunLeaksNoDescriptors(t *testing.T) {
	// No pipeline before ls: the shell would hold its pipe while ls looks.
	const script = `ls /proc/$$/fd; cat <&3; env | grep -c '^COWFS_KERNEL' || true`
	extra := func(t *testing.T) *os.File {
		p := filepath.Join(t.TempDir(), "extra")
		if err := os.WriteFile(p, []byte("extra file\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	oracle := exec.Command("sh", "-c", script)
	oracle.ExtraFiles = []*os.File{extra(t)}
	got, err := oracle.Output()
	if err != nil {
		t.Fatal(err)
	}
	// os/exec's listing, without what the caller leaks to it.
	var want []byte
	for _, line := range strings.SplitAfter(string(got), "\n") {
		if n, err := strconv.Atoi(strings.TrimSpace(line)); err == nil && n > 3 {
			continue
		}
		want = append(want, line...)
	}
	for _, mode := range lifecycleModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			f, err := overlayfs.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", script)
			cmd.ExtraFiles = []*os.File{extra(t)}
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := mode.run(context.Background(), f, cmd); err != nil {
				t.Fatal(err)
			}
			if out.String() != string(want) {
				t.Errorf("the command saw\n%s\nwant, as os/exec gives it,\n%s", out.String(), want)
			}
		})
	}
}

// TestRunReclaimsTempDirs: Run removes abandoned temporary directories
// beside its own as it starts, and leaves everything else.
func TestRunReclaimsTempDirs(t *testing.T) {
	tmp := t.TempDir()
	dead := filepath.Join(tmp, "cowfs-copy-dead")
	if err := os.MkdirAll(filepath.Join(dead, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, ownerRecordName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(tmp, "cowfs-copy-norecord")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), f, exec.Command("true"), WithCopyFallback(), WithTempDir(tmp)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dead); err == nil {
		t.Error("Run left an abandoned temporary directory beside its own")
	}
	if _, err := os.Lstat(other); err != nil {
		t.Errorf("Run removed a directory without an owner record: %v", err)
	}
}

// TestCleanupKeepsDirWithMount: an abandoned temporary directory with
// something mounted inside is not removed (removing would reach into the
// mount), and Cleanup says why.
func TestCleanupKeepsDirWithMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	dead := filepath.Join(dir, "cowfs-run-dead")
	inside := filepath.Join(dead, "upper")
	if err := os.MkdirAll(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, ownerRecordName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", inside, "tmpfs", 0, ""); err != nil {
		t.Skip("cannot mount a tmpfs here: ", err)
	}
	defer unix.Unmount(inside, unix.MNT_DETACH)
	if err := os.WriteFile(filepath.Join(inside, "precious"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := Cleanup(dir)
	if len(removed) != 0 || !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), dead) {
		t.Errorf("Cleanup: removed %q, %v; want nothing removed and EBUSY naming %s", removed, err, dead)
	}
	if _, err := os.Lstat(filepath.Join(inside, "precious")); err != nil {
		t.Errorf("a file inside the mount is gone: %v", err)
	}
}
