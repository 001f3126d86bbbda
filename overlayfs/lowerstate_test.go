package overlayfs_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// TestLowerState changes the real tree behind a LowerState with os and
// checks that exactly the touched paths (and the directories whose
// entries changed) are reported, and nothing when nothing changed.
func TestLowerState(t *testing.T) {
	root := t.TempDir()
	for name, s := range map[string]string{"a": "a", "b": "b", "d/c": "c", "d/e/f": "f", "keep": "k"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	s := f.LowerState()
	if got := s.Changed(); got != nil {
		t.Fatalf("untouched tree: %q", got)
	}
	// Reading changes nothing Commit looks at.
	if _, err := os.ReadFile(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	if got := s.Changed(); got != nil {
		t.Fatalf("after a read: %q", got)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "a"), []byte("A"), 0o644)) // same size, new ctime
	must(os.Remove(filepath.Join(root, "b")))
	must(os.WriteFile(filepath.Join(root, "d/e/new"), nil, 0o644))
	must(os.Chmod(filepath.Join(root, "d/c"), 0o600))
	want := []string{".", "a", "b", "d/c", "d/e", "d/e/new"}
	if got := s.Changed(); !slices.Equal(got, want) {
		t.Errorf("Changed() = %q, want %q", got, want)
	}
}
