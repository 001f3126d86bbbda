//go:build unix

package unixmode_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cowfs/cowfs/internal/unixmode"
)

// TestAgainstOS: a file of each type, chmod-ed with Perm of every special
// bit combination, reads back through FileMode as os.Lstat reads it.
func TestAgainstOS(t *testing.T) {
	dir := t.TempDir()
	mk := map[string]func(p string) error{
		"file": func(p string) error { return os.WriteFile(p, nil, 0o644) },
		"dir":  func(p string) error { return os.Mkdir(p, 0o755) },
		"fifo": func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"sock": func(p string) error { return syscall.Mknod(p, syscall.S_IFSOCK|0o644, 0) },
	}
	specials := []fs.FileMode{0, fs.ModeSetuid, fs.ModeSetgid, fs.ModeSticky, fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky}
	n := 0
	for kind, make := range mk {
		for i, sp := range specials {
			for _, perm := range []fs.FileMode{0, 0o754, 0o777, 0o4} {
				p := filepath.Join(dir, kind+string(rune('a'+i))+perm.String())
				if err := make(p); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Chmod(p, unixmode.Perm(perm|sp)); err != nil {
					t.Fatal(err)
				}
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				var st syscall.Stat_t
				if err := syscall.Lstat(p, &st); err != nil {
					t.Fatal(err)
				}
				if got := unixmode.FileMode(uint32(st.Mode)); got != fi.Mode() {
					t.Errorf("%s: FileMode = %v, os says %v", p, got, fi.Mode())
				}
				if got := unixmode.Mode(fi.Mode()); got != uint32(st.Mode) {
					t.Errorf("%s: Mode(%v) = %o, st_mode %o", p, fi.Mode(), got, st.Mode)
				}
				n++
			}
		}
	}
	for _, dev := range []string{"/dev/null", "/dev/loop0"} {
		fi, err := os.Lstat(dev)
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(dev, &st); err != nil {
			t.Fatal(err)
		}
		if got := unixmode.FileMode(uint32(st.Mode)); got != fi.Mode() {
			t.Errorf("%s: FileMode = %v, os says %v", dev, got, fi.Mode())
		}
		if got := unixmode.Mode(fi.Mode()); got != uint32(st.Mode) {
			t.Errorf("%s: Mode(%v) = %o, st_mode %o", dev, fi.Mode(), got, st.Mode)
		}
	}
	if n != 80 {
		t.Fatalf("%d cases", n)
	}
}
