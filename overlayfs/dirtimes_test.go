//go:build unix

package overlayfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
)

// TestPutDirTime: PutDirTime refuses what is no directory with the
// errno open(2) with O_DIRECTORY gives on the real tree (the oracle), and
// a time it keeps shows in Stat and the parent's Readdir as os.Chtimes
// on a real copy shows it, without a layer entry or a change.
func TestPutDirTime(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"d/e"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f := newCow(t, root)
	for _, rel := range []string{"missing", "missing/x", "file", "file/x", "d/missing"} {
		_, oerr := syscall.Open(filepath.Join(root, rel), syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		err := f.PutDirTime(rel, time.Unix(1e9, 0))
		var pe *fs.PathError
		if !errors.As(err, &pe) || !errors.Is(err, oerr) {
			t.Errorf("PutDirTime(%q) = %v, want a *fs.PathError wrapping %v", rel, err, oerr)
		}
	}
	for _, rel := range []string{"", "/abs", "../up", "d/../d"} {
		if err := f.PutDirTime(rel, time.Unix(1e9, 0)); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("PutDirTime(%q) = %v, want fs.ErrInvalid", rel, err)
		}
	}
	want := time.Unix(1e9, 7)
	for _, rel := range []string{"d/e", "."} {
		if err := f.PutDirTime(rel, want); err != nil {
			t.Fatal(err)
		}
	}
	real := t.TempDir()
	if err := os.MkdirAll(filepath.Join(real, "d/e"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(real, "d/e"), time.Time{}, want); err != nil {
		t.Fatal(err)
	}
	ofi, err := os.Stat(filepath.Join(real, "d/e"))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat(filepath.Join(root, "d/e"))
	if err != nil || !fi.ModTime().Equal(ofi.ModTime()) {
		t.Errorf("Stat d/e: %v %v, want mtime %v as os", fi, err, ofi.ModTime())
	}
	if fi, err := f.Stat(root); err != nil || !fi.ModTime().Equal(want) {
		t.Errorf("Stat of the root: %v %v, want mtime %v", fi, err, want)
	}
	d, err := f.Open(filepath.Join(root, "d"))
	if err != nil {
		t.Fatal(err)
	}
	fis, err := d.Readdir(-1)
	d.Close()
	if err != nil || len(fis) != 1 || !fis[0].ModTime().Equal(ofi.ModTime()) {
		t.Errorf("Readdir of d: %v %v, want e with mtime %v", fis, err, ofi.ModTime())
	}
	if l, c := f.Layer(), f.Changes(); len(l) != 0 || len(c) != 0 {
		t.Errorf("PutDirTime made layer entries %v or changes %v", l, c)
	}
	var got []string
	for rel := range f.DirTimes() {
		got = append(got, rel)
	}
	if len(got) != 2 || got[0] != "." || got[1] != "d/e" {
		t.Errorf("DirTimes paths %q, want . and d/e", got)
	}
}

// TestDirTimesAfterCommit: after a Commit the view's directory times are
// the real directories' (os.Stat is the oracle), also those of
// directories the Commit wrote nothing in (an entry made and removed
// again, a PutDirTime): the layer is empty, the view is the real tree.
func TestDirTimesAfterCommit(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"d", "e", "p"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := newCow(t, root)
	if err := f.Mkdir(filepath.Join(root, "d/tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(filepath.Join(root, "d/tmp")); err != nil {
		t.Fatal(err)
	}
	if err := f.PutDirTime("p", time.Unix(1e9, 0)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "e/new"), []byte("n"), 0o644); err != nil {
		t.Fatal(err) // a change of the real tree the layer did not make
	}
	if err := afero.WriteFile(f, filepath.Join(root, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{".", "d", "e", "p"} {
		ofi, err := os.Stat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		fi, err := f.Stat(filepath.Join(root, rel))
		if err != nil || !fi.ModTime().Equal(ofi.ModTime()) {
			t.Errorf("after Commit, %s: the view says %v (%v), the real directory %v", rel, fi.ModTime(), err, ofi.ModTime())
		}
	}
}
