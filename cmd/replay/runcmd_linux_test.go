package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/kernel"
	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// runReplayRun runs "replay run" with args in dir and returns its exit
// status, standard output and standard error.
func runReplayRun(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	t.Chdir(dir)
	var out, errb bytes.Buffer
	e := &env{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: os.Getenv}
	code := e.main(append([]string{"run"}, args...))
	return code, out.String(), errb.String()
}

// confinedTree makes base/tree (the root, with keep.txt) and base/cache.
func confinedTree(t *testing.T) (base, tree string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("replay run needs Linux")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	base = t.TempDir()
	tree = filepath.Join(base, "tree")
	for _, d := range []string{tree, filepath.Join(base, "cache")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tree, "keep.txt"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return base, tree
}

// probeMode returns the mode Run uses here, by asking it.
func probeMode(t *testing.T, opts ...kernel.RunOption) kernel.Mode {
	t.Helper()
	f, err := overlayfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var m kernel.Mode
	opts = append(opts, kernel.WithModeReport(func(got kernel.Mode) { m = got }))
	if err := kernel.Run(context.Background(), f, exec.Command("true"), opts...); err != nil {
		t.Logf("probe run: %v", err)
	}
	return m
}

// landlockWorks reports whether Run confines here.
func landlockWorks(t *testing.T) bool {
	return probeMode(t, kernel.WithCopyFallback()).Confined
}

// TestRunFromOutsideRoot: with -root from another directory the command
// runs in the root, so a relative write is captured, never made for real.
func TestRunFromOutsideRoot(t *testing.T) {
	for _, mode := range [][]string{nil, {"-copy"}} {
		base, tree := confinedTree(t)
		args := append(append([]string{"-root", "tree"}, mode...), "--", "sh", "-c", "echo x > new.txt")
		code, stdout, stderr := runReplayRun(t, base, args...)
		if code != 0 || stdout != "A new.txt\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and A new.txt", mode, code, stdout, stderr)
		}
		for _, p := range []string{filepath.Join(base, "new.txt"), filepath.Join(tree, "new.txt")} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%v: %s was written for real", mode, p)
			}
		}
	}
}

// TestRunConfinedFlags covers -allow-write, -unconfined and -v, and the
// copy fallback's refusal to touch the real root by its absolute name.
func TestRunConfinedFlags(t *testing.T) {
	base, tree := confinedTree(t)
	if !landlockWorks(t) {
		t.Skip("Landlock is not available here")
	}
	keep := filepath.Join(tree, "keep.txt")
	cache := filepath.Join(base, "cache")

	// Copy fallback, the real root by absolute name: refused inside the
	// command (the real root is read-only there), the file stays, nothing
	// is listed (no inverted change).
	code, stdout, stderr := runReplayRun(t, tree, "-copy", "--", "rm", keep)
	if code != exitDiffers || stdout != "" || !strings.Contains(stderr, "Read-only file system") {
		t.Errorf("rm of the real root in copy mode: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the real file was deleted: %v", err)
	}

	// A write outside the root fails, in both modes (the host is read-only
	// in the command's mount namespace); -allow-write permits it.
	for _, mode := range [][]string{nil, {"-copy"}} {
		script := `echo c > "$0/entry"`
		args := append(append([]string{}, mode...), "--", "sh", "-c", script, cache)
		code, _, stderr = runReplayRun(t, tree, args...)
		// The host is read-only in the command's mount namespace.
		if code != exitDiffers || !strings.Contains(stderr, "Read-only file system") {
			t.Errorf("%v: write outside the root: exit %d, stderr %q", mode, code, stderr)
		}
		if _, err := os.Stat(filepath.Join(cache, "entry")); err == nil {
			t.Fatalf("%v: the write outside the root happened", mode)
		}
		args = append(append([]string{"-allow-write", cache, "-v"}, mode...), "--", "sh", "-c", script, cache)
		code, stdout, stderr = runReplayRun(t, tree, args...)
		if code != 0 || stdout != "" {
			t.Errorf("%v -allow-write: exit %d, stdout %q, stderr %q", mode, code, stdout, stderr)
		}
		if !regexp.MustCompile(`(?m)^replay run: (kernel overlay as root|kernel overlay in a user namespace|copy of the root), confined \(Landlock ABI [0-9]+\); command runs in /`).MatchString(stderr) {
			t.Errorf("%v -v: stderr %q does not report the mode", mode, stderr)
		}
		if b, err := os.ReadFile(filepath.Join(cache, "entry")); err != nil || string(b) != "c\n" {
			t.Errorf("%v -allow-write: %q, %v", mode, b, err)
		}
		os.Remove(filepath.Join(cache, "entry"))
	}

	// -unconfined in copy mode: the command may damage the real root (as
	// root it can unmount the read-only bind), and run says so instead of
	// listing an inverted change.
	code, stdout, stderr = runReplayRun(t, tree, "-copy", "-unconfined", "-v", "--", "sh", "-c", `umount "$0" 2>/dev/null; rm "$0/keep.txt"`, tree)
	if _, err := os.Stat(keep); err == nil {
		t.Skipf("the unconfined command could not reach the real root here (exit %d, %q): nothing to detect", code, stderr)
	}
	if code != exitTrouble || stdout != "" || !strings.Contains(stderr, "keep.txt") || !strings.Contains(stderr, "unconfined (Unconfined option)") {
		t.Errorf("-unconfined rm of the real root: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestRunWithoutLandlockFlag: Landlock made unavailable: the overlay runs
// and -v says it is unconfined; the copy fallback refuses unless
// -unconfined.
func TestRunWithoutLandlockFlag(t *testing.T) {
	_, tree := confinedTree(t)
	overlay := probeMode(t, kernel.Unconfined()).Kind != kernel.ModeCopy
	t.Setenv(kernel.NoLandlockEnv, "1")
	code, stdout, stderr := runReplayRun(t, tree, "-copy", "--", "sh", "-c", "echo x > new.txt")
	if code != exitTrouble || stdout != "" || !strings.Contains(stderr, "Unconfined") {
		t.Errorf("copy without Landlock: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runReplayRun(t, tree, "-copy", "-unconfined", "--", "sh", "-c", "echo x > new.txt")
	if code != 0 || stdout != "A new.txt\n" {
		t.Errorf("copy -unconfined without Landlock: exit %d, stdout %q", code, stdout)
	}
	if !overlay {
		t.Skip("no kernel overlay here (needs root or an unprivileged user namespace): the overlay half is not run")
	}
	code, stdout, stderr = runReplayRun(t, tree, "-v", "--", "sh", "-c", "echo x > new.txt")
	if code != 0 || stdout != "A new.txt\n" {
		t.Errorf("overlay without Landlock: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "unconfined (Landlock unavailable") {
		t.Errorf("-v without Landlock: %q", stderr)
	}
}

// TestRunDeviceNode: the sandbox refuses to make a device node, even as
// root (CAP_MKNOD dropped, Landlock never grants it); the other changes
// are listed all the same, exit status 1 (the command failed).
func TestRunDeviceNode(t *testing.T) {
	_, tree := confinedTree(t)
	if err := unix.Mknod(filepath.Join(t.TempDir(), "probe"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Skip("making device nodes needs CAP_MKNOD: ", err)
	}
	code, stdout, stderr := runReplayRun(t, tree, "-copy", "--", "sh", "-c", "echo x > new.txt && mknod null c 1 3")
	if code != exitDiffers || stdout != "A new.txt\n" || !strings.Contains(stderr, "null") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
