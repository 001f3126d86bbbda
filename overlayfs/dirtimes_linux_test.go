package overlayfs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
)

// TestDirTimeInSys: a lower directory whose time the layer moved (a file
// made in it) reports that time in Sys()'s Stat_t as in ModTime, as os's
// FileInfo does for the same change on a real copy (the oracle: both agree
// there), through Stat, Lstat and the parent's Readdir.
func TestDirTimeInSys(t *testing.T) {
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	fixture := func(root string) {
		if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(root, "d"), old, old); err != nil {
			t.Fatal(err)
		}
	}
	oracle, lower := t.TempDir(), t.TempDir()
	fixture(oracle)
	fixture(lower)
	if err := os.WriteFile(filepath.Join(oracle, "d", "new"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCow(t, lower)
	if err := afero.WriteFile(c, filepath.Join(lower, "d", "new"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	agree := func(fi fs.FileInfo) bool {
		st, ok := fi.Sys().(*syscall.Stat_t)
		return ok && time.Unix(st.Mtim.Unix()).Equal(fi.ModTime()) && !fi.ModTime().Equal(old)
	}
	osFi, err := os.Stat(filepath.Join(oracle, "d"))
	if err != nil || !agree(osFi) {
		t.Fatalf("the oracle: os.Stat = %v, %v", osFi, err)
	}
	stat := func(f func(string) (fs.FileInfo, error)) fs.FileInfo {
		fi, err := f(filepath.Join(lower, "d"))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	lstat := func(n string) (fs.FileInfo, error) { fi, _, err := c.LstatIfPossible(n); return fi, err }
	listed := func(string) (fs.FileInfo, error) {
		fis, err := afero.ReadDir(c, lower)
		for _, fi := range fis {
			if fi.Name() == "d" {
				return fi, err
			}
		}
		return nil, err
	}
	for what, fi := range map[string]fs.FileInfo{"Stat": stat(c.Stat), "Lstat": stat(lstat), "Readdir": stat(listed)} {
		if !agree(fi) {
			st, _ := fi.Sys().(*syscall.Stat_t)
			t.Errorf("%s: ModTime %v, Sys() %+v", what, fi.ModTime(), st)
		}
	}
}

// sysMtime renders whether fi's Stat_t (Sys()) holds the time ModTime
// reports, as os's FileInfo always does: the differentials' info() shows
// it, so that a time kept beside the lower's Stat_t shows when it is not
// in it.
func sysMtime(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		return ""
	case time.Unix(st.Mtim.Unix()).Equal(fi.ModTime()):
		return " sys-mtime=agrees"
	}
	return " sys-mtime=differs"
}
