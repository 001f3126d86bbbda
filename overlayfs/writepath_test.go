package overlayfs_test

// Edges of the write path's fast paths (issue 14): an O_TRUNC that keeps the
// file's buffer, checked against os on a real file for what handles see,
// and against the content each frozen copy (Snapshot, Fork, Layer) had.

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/afero"
)

// truncSeq writes name three times through fsys (longer, shorter, empty,
// then again), with a read handle opened before the first rewrite, and
// returns what the handle and ReadFile saw after each step.
func truncSeq(t *testing.T, fsys afero.Fs, name string) []string {
	t.Helper()
	var seen []string
	must(t, afero.WriteFile(fsys, name, []byte("the first version, long"), 0o644))
	h, err := fsys.Open(name)
	must(t, err)
	defer h.Close()
	for _, content := range []string{"second, longer than the first one", "third", "", "fourth version"} {
		must(t, afero.WriteFile(fsys, name, []byte(content), 0o644))
		got, err := io.ReadAll(io.NewSectionReader(h, 0, 1<<10))
		must(t, err)
		all, err := afero.ReadFile(fsys, name)
		must(t, err)
		seen = append(seen, string(got), string(all))
	}
	return seen
}

func TestTruncReuseMatchesOs(t *testing.T) {
	for _, lower := range []bool{false, true} {
		root := t.TempDir()
		name := filepath.Join(root, "f")
		if lower {
			must(t, os.WriteFile(name, []byte("lower content"), 0o644))
		}
		c := newCow(t, root)
		got := truncSeq(t, c, name)
		want := truncSeq(t, afero.NewOsFs(), filepath.Join(t.TempDir(), "f"))
		if !slices.Equal(got, want) {
			t.Errorf("lower=%v: handle and ReadFile saw\n%q\nos saw\n%q", lower, got, want)
		}
	}
}

// TestTruncReuseKeepsFrozenCopies: overwriting a file with O_TRUNC reuses
// its buffer only while nothing else holds it: a snapshot, a fork and a
// Layer listing taken before keep the old bytes.
func TestTruncReuseKeepsFrozenCopies(t *testing.T) {
	root := t.TempDir()
	name := filepath.Join(root, "f")
	c := newCow(t, root)
	old := []byte("0123456789abcdef, the old content")
	must(t, afero.WriteFile(c, name, old, 0o644))
	s := c.Snapshot()
	fork := c.Fork()
	layer := c.Layer()

	// Same length, shorter, longer: each rewrite may land in the old buffer.
	for _, content := range []string{"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefg", "short", "a longer content than the old one was"} {
		must(t, afero.WriteFile(c, name, []byte(content), 0o644))
		if got, err := afero.ReadFile(c, name); err != nil || string(got) != content {
			t.Fatalf("ReadFile after rewrite = %q, %v; want %q", got, err, content)
		}
	}
	if got, err := afero.ReadFile(fork, name); err != nil || !bytes.Equal(got, old) {
		t.Errorf("fork reads %q, %v; want the content at Fork %q", got, err, old)
	}
	for _, e := range layer {
		if e.Path != "f" {
			continue
		}
		r, err := e.Open()
		must(t, err)
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, old) {
			t.Errorf("Layer entry reads %q, %v; want %q", got, err, old)
		}
	}
	c.Restore(s)
	if got, err := afero.ReadFile(c, name); err != nil || !bytes.Equal(got, old) {
		t.Errorf("after Restore ReadFile = %q, %v; want %q", got, err, old)
	}
	// The restored content is shared with the snapshot again: rewriting it
	// must not reach the snapshot.
	must(t, afero.WriteFile(c, name, []byte("XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"), 0o644))
	c.Restore(s)
	if got, err := afero.ReadFile(c, name); err != nil || !bytes.Equal(got, old) {
		t.Errorf("after a second Restore ReadFile = %q, %v; want %q", got, err, old)
	}
}
