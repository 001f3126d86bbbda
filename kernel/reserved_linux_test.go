package kernel

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// checkReservedSkipped: the error names .cowfs-commit and wraps
// ErrReservedName, the rest (a.txt) is in the layer, and Commit, which
// refuses a layer holding the journal's name, writes it.
func checkReservedSkipped(t *testing.T, f *overlayfs.Fs, err error) {
	t.Helper()
	if !errors.Is(err, ErrReservedName) {
		t.Fatalf("got %v, want an error wrapping ErrReservedName", err)
	}
	for _, c := range f.Changes() {
		if c.Path == ".cowfs-commit" || filepath.Dir(c.Path) == ".cowfs-commit" {
			t.Errorf("the layer holds %s", c.Path)
		}
	}
	if err := f.Commit(); err != nil {
		t.Fatalf("Commit after the skip: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(f.Root(), "a.txt")); err != nil || string(got) != "a\n" {
		t.Errorf("a.txt after Commit: %q, %v", got, err)
	}
	if _, err := os.Lstat(filepath.Join(f.Root(), ".cowfs-commit")); err == nil {
		t.Errorf(".cowfs-commit left in the root")
	}
}

// TestImportReservedName (issue 23): an upper holding the root's
// .cowfs-commit (a directory with a file, as a journal would be) is
// imported without it, and says so; a later Commit works.
func TestImportReservedName(t *testing.T) {
	base := t.TempDir()
	root, upper := filepath.Join(base, "root"), filepath.Join(base, "upper")
	for _, d := range []string{root, filepath.Join(upper, ".cowfs-commit", "stage")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{"a.txt": "a\n", ".cowfs-commit/intent": "x"} {
		if err := os.WriteFile(filepath.Join(upper, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	checkReservedSkipped(t, f, Import(upper, f, Options{}))
}

// TestRunReservedName: a command that makes the root's .cowfs-commit, in
// both modes: skipped with an error, everything else imported, Commit
// works.
func TestRunReservedName(t *testing.T) {
	if _, err := landlockABI(runConfig{}); err != nil {
		t.Skip("Landlock is not available: ", err)
	}
	for _, mode := range []string{"overlay", "copy"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "overlay" {
				needMount(t)
			}
			root := t.TempDir()
			f, err := overlayfs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", `mkdir -p .cowfs-commit/stage && echo x > .cowfs-commit/intent && echo a > a.txt`)
			cmd.Dir = root
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			var opts []RunOption
			if mode == "copy" {
				opts = append(opts, WithCopyFallback())
			}
			err = Run(context.Background(), f, cmd, opts...)
			if ok, _ := afero.Exists(f, filepath.Join(root, "a.txt")); !ok {
				t.Fatalf("a.txt not imported (%v)\n%s", err, stderr.String())
			}
			checkReservedSkipped(t, f, err)
		})
	}
}
