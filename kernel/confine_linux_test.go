package kernel

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

func needLandlock(t *testing.T) {
	t.Helper()
	if _, err := landlockABI(runConfig{}); err != nil {
		t.Skip("Landlock is not available: ", err)
	}
}

// TestRunWithoutLandlock makes Landlock unavailable through NoLandlockEnv:
// the overlay mode runs and says so, the copy fallback refuses before
// anything runs unless Unconfined was given.
func TestRunWithoutLandlock(t *testing.T) {
	t.Setenv(NoLandlockEnv, "1")
	root := t.TempDir()
	writeTree(t, root)
	t.Run("overlay", func(t *testing.T) {
		needMount(t)
		f, err := overlayfs.New(root)
		if err != nil {
			t.Fatal(err)
		}
		var m Mode
		cmd := exec.Command("sh", "-c", "echo x > new")
		cmd.Dir = root
		if err := Run(context.Background(), f, cmd, WithModeReport(func(got Mode) { m = got })); err != nil {
			t.Fatal(err)
		}
		if m.Confined || m.Kind == ModeCopy || !strings.Contains(m.String(), "unconfined") || !strings.Contains(m.Reason, NoLandlockEnv) {
			t.Errorf("mode %q (%+v), want an overlay saying it is unconfined because of %s", m, m, NoLandlockEnv)
		}
		if got := changeStrings(f); !slices.Equal(got, []string{"A new"}) {
			t.Errorf("changes %q", got)
		}
	})
	t.Run("copy", func(t *testing.T) {
		f, err := overlayfs.New(root)
		if err != nil {
			t.Fatal(err)
		}
		marker := filepath.Join(t.TempDir(), "ran")
		cmd := exec.Command("sh", "-c", `echo x > new; touch "$0"`, marker)
		cmd.Dir = root
		reported := false
		err = Run(context.Background(), f, cmd, WithCopyFallback(), WithModeReport(func(Mode) { reported = true }))
		if !errors.Is(err, ErrUnconfined) {
			t.Fatalf("copy without Landlock: %v, want ErrUnconfined", err)
		}
		if _, serr := os.Stat(marker); serr == nil || reported {
			t.Error("the command ran although Run refused")
		}
		if len(f.Changes()) != 0 {
			t.Errorf("changes after a refusal: %q", changeStrings(f))
		}
		var m Mode
		cmd = exec.Command("sh", "-c", "echo x > new")
		cmd.Dir = root
		if err := Run(context.Background(), f, cmd, WithCopyFallback(), Unconfined(), WithModeReport(func(got Mode) { m = got })); err != nil {
			t.Fatal(err)
		}
		if m.Kind != ModeCopy || m.Confined || m.Reason != "Unconfined option" {
			t.Errorf("mode %+v", m)
		}
		if got := changeStrings(f); !slices.Equal(got, []string{"A new"}) {
			t.Errorf("changes %q", got)
		}
	})
}

// TestRunCopyVerifies lets an unconfined command in the copy fallback
// change the real root: Run must notice (the identity check Commit uses),
// name the paths, and leave the layer as it was: no inverted change.
func TestRunCopyVerifies(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root)
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := afero.WriteFile(f, filepath.Join(root, "layer-only"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := changeStrings(f)
	// The real root is read-only in the command's mount namespace; as root
	// (of the initial user namespace) an unconfined command can unmount that.
	cmd := exec.Command("sh", "-c", `umount "$0" 2>/dev/null; rm "$0/a" && echo x > "$0/absfile" && echo y > copy-file`, root)
	cmd.Dir = root
	err = Run(context.Background(), f, cmd, WithCopyFallback(), Unconfined())
	if _, serr := os.Lstat(filepath.Join(root, "absfile")); serr != nil {
		t.Skipf("the unconfined command could not write the real root here (%v): nothing to detect", err)
	}
	if !errors.Is(err, overlayfs.ErrConflict) {
		t.Fatalf("Run: %v, want ErrConflict", err)
	}
	for _, p := range []string{"a", "absfile"} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %s", err, p)
		}
	}
	if got := changeStrings(f); !slices.Equal(got, before) {
		t.Errorf("layer changed by a refused run: %q, want %q", got, before)
	}
}

// TestRunCopyConfinedRealRoot: confined, the same command cannot touch the
// real root in the copy fallback (it is read-only in the command's mount
// namespace, and outside what Landlock lets it write), so nothing is
// inverted either.
func TestRunCopyConfinedRealRoot(t *testing.T) {
	needLandlock(t)
	root := t.TempDir()
	writeTree(t, root)
	before, err := dirTree(root)
	if err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("sh", "-c", `echo y > copy-file; echo x > "$0/absfile"; rm "$0/a"`, root)
	cmd.Dir, cmd.Stderr = root, &stderr
	var ee *exec.ExitError
	if err := Run(context.Background(), f, cmd, WithCopyFallback()); !errors.As(err, &ee) {
		t.Fatalf("Run: %v, want the command's own failure", err)
	}
	if !strings.Contains(stderr.String(), "Read-only file system") {
		t.Errorf("stderr %q, want the real root read-only", stderr.String())
	}
	if got := changeStrings(f); !slices.Equal(got, []string{"A copy-file"}) {
		t.Errorf("changes %q", got)
	}
	after, err := dirTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := diffTrees(before, after, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
		t.Errorf("the real root changed:\n%v", err)
	}
}

// TestRunWithWritable: an extra writable path outside the root receives
// the command's writes (not captured); without it they are refused. In
// the copy fallback a path holding the root is refused before the run.
func TestRunWithWritable(t *testing.T) {
	needLandlock(t)
	for _, copyMode := range []bool{false, true} {
		name := map[bool]string{false: "overlay", true: "copy"}[copyMode]
		t.Run(name, func(t *testing.T) {
			if !copyMode {
				needMount(t)
			}
			base := t.TempDir()
			root, cache := filepath.Join(base, "root"), filepath.Join(base, "cache")
			for _, d := range []string{root, cache} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			f, err := overlayfs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			opts := []RunOption{}
			if copyMode {
				opts = append(opts, WithCopyFallback())
			}
			cmd := exec.Command("sh", "-c", `echo c > "$0/entry" && echo r > in-root`, cache)
			cmd.Dir = root
			if err := Run(context.Background(), f, cmd, opts...); err == nil {
				t.Fatal("a write to a path not given to WithWritable succeeded")
			}
			cmd = exec.Command("sh", "-c", `echo c > "$0/entry" && echo r > in-root`, cache)
			cmd.Dir = root
			if err := Run(context.Background(), f, cmd, append(opts, WithWritable(cache))...); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(cache, "entry")); err != nil || string(b) != "c\n" {
				t.Errorf("cache entry: %q, %v", b, err)
			}
			if got := changeStrings(f); !slices.Equal(got, []string{"A in-root"}) {
				t.Errorf("changes %q", got)
			}
			err = Run(context.Background(), f, exec.Command("true"), append(opts, WithWritable(base))...)
			if copyMode && !errors.Is(err, ErrUnconfined) {
				t.Errorf("copy mode with the root's parent writable: %v, want ErrUnconfined", err)
			}
			if !copyMode && err != nil {
				t.Errorf("overlay mode with the root's parent writable: %v", err)
			}
			err = Run(context.Background(), f, exec.Command("true"), append(opts, WithWritable(filepath.Join(base, "missing")))...)
			if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("missing writable path: %v, want ErrNotExist", err)
			}
		})
	}
}

// TestRunModeString checks the report's wording, which replay run -v prints.
func TestRunModeString(t *testing.T) {
	for _, c := range []struct {
		m    Mode
		want string
	}{
		{Mode{Kind: ModeOverlay, Confined: true, LandlockABI: 7}, "kernel overlay as root, confined (Landlock ABI 7)"},
		{Mode{Kind: ModeOverlayUserNS, Confined: true, LandlockABI: 3}, "kernel overlay in a user namespace, confined (Landlock ABI 3)"},
		{Mode{Kind: ModeCopy, Reason: "Unconfined option"}, "copy of the root, unconfined (Unconfined option)"},
	} {
		if got := c.m.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.m, got, c.want)
		}
	}
}

// TestRunTempInsideRoot: a temporary directory inside the root would be
// part of the tree the command runs on; Run refuses it before anything.
func TestRunTempInsideRoot(t *testing.T) {
	root := t.TempDir()
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, copyMode := range []bool{false, true} {
		opts := []RunOption{WithTempDir(root)}
		if copyMode {
			opts = append(opts, WithCopyFallback())
		}
		err := Run(context.Background(), f, exec.Command("true"), opts...)
		if err == nil || !strings.Contains(err.Error(), "inside the root") {
			t.Errorf("copy=%v: %v, want a refusal", copyMode, err)
		}
		if names, _ := os.ReadDir(root); len(names) != 0 {
			t.Errorf("copy=%v: the root got %v", copyMode, names)
		}
	}
}

// TestWritablePaths: a writable path inside the root, or a symlink to one,
// needs no rule (the root's covers it, in the copy too: the real root
// stays read-only); in the copy fallback one holding the root is refused;
// in the overlay modes other paths are kept as they are.
func TestWritablePaths(t *testing.T) {
	base := t.TempDir()
	root, cp, tmp, cache := filepath.Join(base, "root"), filepath.Join(base, "copy"), filepath.Join(base, "tmp"), filepath.Join(base, "cache")
	for _, d := range []string{root, filepath.Join(root, "sub"), cp, filepath.Join(cp, "sub"), tmp, cache} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "sub"), filepath.Join(base, "alias")); err != nil {
		t.Fatal(err)
	}
	got, err := writablePaths(cp, tmp, root, []string{cache, filepath.Join(root, "sub"), filepath.Join(base, "alias")})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{cp, tmp, cache}
	if !slices.Equal(got, want) {
		t.Errorf("copy mode: %q, want %q", got, want)
	}
	if _, err := writablePaths(cp, tmp, root, []string{base}); !errors.Is(err, ErrUnconfined) {
		t.Errorf("copy mode, the root's parent: %v, want ErrUnconfined", err)
	}
	got, err = writablePaths(root, tmp, "", []string{base, filepath.Join(root, "sub")})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{root, tmp, base}; !slices.Equal(got, want) {
		t.Errorf("overlay mode: %q, want %q", got, want)
	}
}
