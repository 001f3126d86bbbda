//go:build linux

package overlayfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openDirFd opens dir for reading its entries, closed at the test's end.
func openDirFd(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// listedDir makes a directory of n files, with a subdirectory and a
// symlink, and returns its path.
func listedDir(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), make([]byte, i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f001", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLstatAtSkipsRemoved: entries removed between getdents and their
// lstat are left out of a listing with infos, as os's Readdir leaves out
// an entry whose lstat fails with ENOENT; the others carry what os.Lstat
// says of them now.
func TestLstatAtSkipsRemoved(t *testing.T) {
	dir := listedDir(t, 50)
	fd := openDirFd(t, dir)
	le, err := readDirents(fd, dir)
	if err != nil {
		t.Fatal(err)
	}
	removed := []string{"f000", "f025", "f049", "link"}
	for _, name := range removed {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := le.lstatAt(fd, dir); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range le.len() {
		name := le.name(i)
		got = append(got, name)
		want, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		fi := le.info(i)
		if fi.Name() != name || fi.Size() != want.Size() || fi.Mode() != want.Mode() || !fi.ModTime().Equal(want.ModTime()) ||
			*fi.Sys().(*syscall.Stat_t) != *want.Sys().(*syscall.Stat_t) {
			t.Errorf("%q: info %v %d %v, os %v %d %v", name, fi.Name(), fi.Size(), fi.Mode(), want.Name(), want.Size(), want.Mode())
		}
	}
	des, err := os.ReadDir(dir) // sorted, after the removals
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, de := range des {
		want = append(want, de.Name())
	}
	if !slices.Equal(got, want) {
		t.Errorf("after removals: got %q\n\twant %q", got, want)
	}
}

// TestLstatUnknownTypes: entries whose type getdents did not give (as
// some file systems do not) get the type os's ReadDir finds for them, an
// lstat's; one removed in between is left out, as os leaves it out; the
// entries with types are kept as listed even when removed, as os keeps
// them.
func TestLstatUnknownTypes(t *testing.T) {
	dir := listedDir(t, 5)
	fd := openDirFd(t, dir)
	le, err := readDirents(fd, dir)
	if err != nil {
		t.Fatal(err)
	}
	unknown := map[string]bool{"f001": true, "f003": true, "sub": true, "link": true}
	text := []byte(le.text)
	for i := range le.len() {
		if unknown[le.name(i)] {
			text[le.ks[i].idx-1] = syscall.DT_UNKNOWN
		}
	}
	le.text = string(text)
	for _, name := range []string{"f003", "f004"} { // f004's type is known
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := le.lstatUnknown(dir); err != nil {
		t.Fatal(err)
	}
	got := map[string]fs.FileMode{}
	for i := range le.len() {
		got[le.name(i)] = le.typ(i)
	}
	want := map[string]fs.FileMode{"f000": 0, "f001": 0, "f002": 0, "f004": 0, "sub": fs.ModeDir, "link": fs.ModeSymlink}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("types: got %v\n\twant %v", got, want)
	}
}
