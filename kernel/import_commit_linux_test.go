package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// TestImportThenCommit imports an upper that rewrites a lower file,
// replaces a lower directory by a file and adds a file, then commits: the
// disk (read with os) has the upper's content. The same import followed by
// an edit on disk of a replaced path is refused as a conflict naming it,
// and writes nothing.
func TestImportThenCommit(t *testing.T) {
	setup := func() (lower, upper string) {
		lower, upper = t.TempDir(), t.TempDir()
		mk := func(root, name, content string) {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		mk(lower, "a", "old a\n")
		mk(lower, "d/x", "old x\n")
		mk(upper, "a", "new a\n")
		mk(upper, "d", "d is a file now\n")
		mk(upper, "n", "new n\n")
		return lower, upper
	}
	lower, upper := setup()
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(upper, f, Options{UserXattr: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatalf("Commit after Import: %v", err)
	}
	for name, want := range map[string]string{"a": "new a\n", "d": "d is a file now\n", "n": "new n\n"} {
		if got, err := os.ReadFile(filepath.Join(lower, name)); err != nil || string(got) != want {
			t.Errorf("%s after Commit: %q, %v; want %q", name, got, err, want)
		}
	}

	lower, upper = setup()
	g, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(upper, g, Options{UserXattr: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lower, "d/x"), []byte("edited on disk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = g.Commit()
	var ce *overlayfs.CommitError
	if !errors.As(err, &ce) || !errors.Is(err, overlayfs.ErrConflict) || len(ce.Conflicts) != 1 || ce.Conflicts[0] != "d/x" {
		t.Fatalf("Commit after an edit on disk = %v, want a conflict naming d/x", err)
	}
	if got, _ := os.ReadFile(filepath.Join(lower, "a")); string(got) != "old a\n" {
		t.Errorf("the refused Commit wrote a: %q", got)
	}
}
