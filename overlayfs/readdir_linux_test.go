//go:build linux

package overlayfs_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReaddirInfosAreOsInfos: the FileInfos Readdir gives for lower
// entries, whole and by pages, and those of ReadDir's entries, are what
// os's Readdir gives on the same directory: Name, Size, Mode (type,
// permissions, setuid, setgid, sticky), ModTime to the nanosecond, IsDir,
// and a *syscall.Stat_t from Sys() equal field for field (inode, links,
// owner, device numbers, blocks, times), for every file type, with more
// entries than one getdents call returns.
func TestReaddirInfosAreOsInfos(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		must(os.WriteFile(p(fmt.Sprintf("file-%03d-%s", i, strings.Repeat("x", i%40))), make([]byte, i*37), 0o644))
	}
	must(os.Mkdir(p("sub"), 0o750))
	must(os.Symlink("file-001-x", p("link")))
	must(os.Symlink("nowhere", p("dangling")))
	must(unix.Mkfifo(p("fifo"), 0o640))
	must(unix.Mknod(p("sock"), unix.S_IFSOCK|0o600, 0))
	must(os.WriteFile(p("setid"), []byte("s"), 0o755))
	must(os.Chmod(p("setid"), 0o755|fs.ModeSetuid|fs.ModeSetgid))
	must(os.Mkdir(p("sticky"), 0o777))
	must(os.Chmod(p("sticky"), 0o777|fs.ModeSticky))
	must(os.Link(p("file-002-xx"), p("hardlink")))
	must(os.Chtimes(p("file-003-xxx"), time.Unix(1, 2), time.Unix(1_000_000_000, 123_456_789)))
	must(os.Chmod(p("file-004-xxxx"), 0o000))
	if err := unix.Mknod(p("null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Logf("no character device: %v", err)
	}
	if err := os.Lchown(p("file-005-xxxxx"), 12345, 23456); err != nil {
		t.Logf("no other owner: %v", err)
	}
	c := newCow(t, dir)
	if err := writeAfero(c, p("layer-file"), "l"); err != nil {
		t.Fatal(err)
	}
	h, err := os.Open(dir)
	must(err)
	fis, err := h.Readdir(-1)
	must(err)
	h.Close()
	want := map[string]fs.FileInfo{}
	for _, fi := range fis {
		want[fi.Name()] = fi
	}
	for _, n := range []int{-1, 7} {
		for _, kind := range []string{"Readdir", "ReadDir"} {
			h, err := c.Open(dir)
			must(err)
			var got []fs.FileInfo
			for {
				if kind == "Readdir" {
					fis, err = h.Readdir(n)
					got = append(got, fis...)
				} else {
					var des []fs.DirEntry
					des, err = h.(fs.ReadDirFile).ReadDir(n)
					for _, de := range des {
						fi, ierr := de.Info()
						must(ierr)
						if de.Type() != fi.Mode().Type() {
							t.Errorf("ReadDir(%d): %q: type %v, info's mode %v", n, de.Name(), de.Type(), fi.Mode())
						}
						got = append(got, fi)
					}
				}
				if err != nil || n <= 0 {
					break
				}
			}
			h.Close()
			var names []string
			for _, fi := range got {
				names = append(names, fi.Name())
				if fi.Name() == "layer-file" {
					continue
				}
				if w, ok := want[fi.Name()]; !ok {
					t.Errorf("%s(%d): %q, which os does not list", kind, n, fi.Name())
				} else if diff := infoDiff(fi, w); diff != "" {
					t.Errorf("%s(%d): %q: %s", kind, n, fi.Name(), diff)
				}
			}
			if len(names) != len(want)+1 || !slices.IsSorted(names) || !slices.Contains(names, "layer-file") {
				t.Errorf("%s(%d): %d names, sorted %v; want os's %d and layer-file, sorted", kind, n, len(names), slices.IsSorted(names), len(want))
			}
		}
	}
}

// infoDiff describes how got differs from os's want, or returns "".
func infoDiff(got, want fs.FileInfo) string {
	var d []string
	if got.Name() != want.Name() || got.Size() != want.Size() || got.Mode() != want.Mode() || got.IsDir() != want.IsDir() {
		d = append(d, fmt.Sprintf("name, size, mode, dir %q %d %v %v, os %q %d %v %v",
			got.Name(), got.Size(), got.Mode(), got.IsDir(), want.Name(), want.Size(), want.Mode(), want.IsDir()))
	}
	if !got.ModTime().Equal(want.ModTime()) || got.ModTime().Location() != want.ModTime().Location() {
		d = append(d, fmt.Sprintf("mtime %v, os %v", got.ModTime(), want.ModTime()))
	}
	gs, ok := got.Sys().(*syscall.Stat_t)
	ws := want.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		d = append(d, fmt.Sprintf("Sys() is %T, os's *syscall.Stat_t", got.Sys()))
	case *gs != *ws:
		d = append(d, fmt.Sprintf("Sys() %+v, os %+v", *gs, *ws))
	}
	return strings.Join(d, "; ")
}

// TestListingRemovedOutsideDir: a directory outside the root removed
// after it was opened lists as os's handle on it does: each listing call
// fails as os's does (the same op, path and errno) and returns as many
// entries (none).
func TestListingRemovedOutsideDir(t *testing.T) {
	base := t.TempDir()
	c := newCow(t, t.TempDir())
	for _, kind := range []string{"Readdir", "Readdirnames", "ReadDir"} {
		for _, n := range []int{-1, 2} {
			var out [2]string
			for i, side := range []target{osTarget{}, c} {
				dir := filepath.Join(base, fmt.Sprintf("gone-%s-%d-%d", kind, n, i))
				if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
					t.Fatal(err)
				}
				h, err := side.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				var count int
				switch kind {
				case "Readdir":
					var fis []fs.FileInfo
					fis, err = h.Readdir(n)
					count = len(fis)
				case "Readdirnames":
					var names []string
					names, err = h.Readdirnames(n)
					count = len(names)
				default:
					var des []fs.DirEntry
					des, err = h.(fs.ReadDirFile).ReadDir(n)
					count = len(des)
				}
				h.Close()
				var pe *fs.PathError
				if !errors.As(err, &pe) {
					out[i] = fmt.Sprintf("%d entries, %T %v", count, err, err)
					continue
				}
				out[i] = fmt.Sprintf("%d entries, %s %s: %v", count, pe.Op, strings.Replace(pe.Path, dir, "$DIR", 1), pe.Err)
			}
			if out[0] != out[1] {
				t.Errorf("%s(%d) of a removed directory:\n\tos    %s\n\tcowfs %s", kind, n, out[0], out[1])
			}
		}
	}
}

// sysFloorOp is the least the system calls of a sorted listing cost:
// open, getdents into one buffer with no allocation per name (buffers
// sized exactly, from a listing made beforehand), an fstatat per entry
// into one slice when infos are asked for, close, and the package's sort
// and one merge with the layer's names. Nothing of an afero.File or the
// overlay.
func sysFloorOp(b *testing.B, dir string, names bool, layer []string) func(int) {
	before, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	size := 0
	for _, de := range before {
		size += len(de.Name())
	}
	return func(int) {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		var buf [8192]byte
		text := make([]byte, 0, size)
		ends := make([]int, 0, len(before))
		for {
			n, err := unix.Getdents(fd, buf[:])
			if err != nil {
				b.Fatal(err)
			}
			if n <= 0 {
				break
			}
			for rest := buf[:n]; len(rest) > 0; {
				reclen := int(binary.NativeEndian.Uint16(rest[16:]))
				name := rest[19:reclen]
				name = name[:slices.Index(name, 0)]
				rest = rest[reclen:]
				if string(name) != "." && string(name) != ".." {
					text = append(text, name...)
					ends = append(ends, len(text))
				}
			}
		}
		all := string(text)
		ns := make([]string, len(ends))
		start := 0
		for i, end := range ends {
			ns[i], start = all[start:end], end
		}
		if !names {
			sts := make([]unix.Stat_t, len(ns))
			for i, n := range ns {
				if err := unix.Fstatat(fd, n, &sts[i], unix.AT_SYMLINK_NOFOLLOW); err != nil {
					b.Fatal(err)
				}
			}
		}
		floorMerge(ns, ns, layer, layer)
		unix.Close(fd)
	}
}

// BenchmarkListingSysFloor: the listing rows of the performance table
// against the least their system calls and sort cost (sysFloorOp), and
// that floor against os.
func BenchmarkListingSysFloor(b *testing.B) {
	root := tableRoot(b, true)
	for _, r := range listingRows {
		dir := filepath.Join(root, r.dir)
		b.Run(r.name, func(b *testing.B) {
			c := listingCow(b, root, dir)
			interleave(b, side{op: readdirOp(b, c.Open, dir, r.names)}, side{op: sysFloorOp(b, dir, r.names, []string{"layer-file"})})
		})
		b.Run("floor-vs-os/"+r.name, func(b *testing.B) {
			interleave(b, side{op: sysFloorOp(b, dir, r.names, []string{"layer-file"})}, side{op: readdirOp(b, osOpen, dir, r.names)})
		})
	}
}
