//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x)

package overlayfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// TestLstatHostIsOsLstat checks lstatHost against os.Lstat, the oracle,
// on every kind of file, on names that fail, and on paths longer than its
// stack buffer: the same name, mode, size, time and Stat_t, or the same
// error.
func TestLstatHostIsOsLstat(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "f"), []byte("hello"), 0o640))
	must(os.Mkdir(filepath.Join(root, "d"), 0o750))
	must(os.Chmod(filepath.Join(root, "d"), 0o750|fs.ModeSetgid|fs.ModeSticky))
	must(os.Symlink("f", filepath.Join(root, "l")))
	must(os.Symlink("missing", filepath.Join(root, "dangling")))
	must(syscall.Mkfifo(filepath.Join(root, "p"), 0o600))
	if ln, err := net.Listen("unix", filepath.Join(root, "s")); err == nil {
		defer ln.Close()
	}
	long := root
	for len(long) < 2*lstatBuf {
		long = filepath.Join(long, strings.Repeat("x", 60))
	}
	must(os.MkdirAll(long, 0o755))
	must(os.WriteFile(filepath.Join(long, "f"), nil, 0o600))
	names := []string{"f", "d", "d/", "l", "dangling", "p", "s", "missing", "f/x", "f/", "d/../f", "/", ".",
		long, long + "/f", long + "/missing", strings.Repeat("y", 300), "f\x00x"}
	for i := 1; i < 12; i++ {
		// Around the buffer's end: the NUL must fit.
		n := lstatBuf - i
		names = append(names, root+"/"+strings.Repeat("z", n-len(root)-1))
	}
	var st syscall.Stat_t
	for n := int(unsafe.Sizeof(st)) - 4; n <= int(unsafe.Sizeof(st))+1; n++ {
		// Around the end of the stat buffer the path goes in: the NUL
		// must fit; a file there and a missing name.
		p := root + "/" + strings.Repeat("s", n-len(root)-1)
		must(os.WriteFile(p, []byte(p), 0o600))
		names = append(names, p, p[:len(p)-1]+"-")
	}
	for _, name := range names {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, name)
			if strings.HasSuffix(name, "/") {
				p += "/"
			}
			if name == "f\x00x" {
				p = root + "/" + name
			}
		}
		want, werr := os.Lstat(p)
		got, gerr := lstatHost(p)
		if werr != nil || gerr != nil {
			var wp, gp *fs.PathError
			if !errors.As(werr, &wp) || !errors.As(gerr, &gp) || *wp != *gp {
				t.Errorf("lstat %q: error %#v, os.Lstat's %#v", name, gerr, werr)
			}
			continue
		}
		if got.Name() != want.Name() || got.Mode() != want.Mode() || got.Size() != want.Size() ||
			!got.ModTime().Equal(want.ModTime()) || got.IsDir() != want.IsDir() ||
			!reflect.DeepEqual(got.Sys(), want.Sys()) {
			t.Errorf("lstat %q: %s %v %d %v %+v, os.Lstat: %s %v %d %v %+v", name,
				got.Name(), got.Mode(), got.Size(), got.ModTime(), got.Sys(),
				want.Name(), want.Mode(), want.Size(), want.ModTime(), want.Sys())
		}
		if !sameLower(got, want) || !os.SameFile(want, want) {
			t.Errorf("lstat %q: sameLower says the info is not os's file", name)
		}
	}
	a, _ := lstatHost(filepath.Join(root, "f"))
	b, _ := lstatHost(filepath.Join(root, "d"))
	if sameLower(a, b) {
		t.Errorf("sameLower: f and d are one file")
	}
}

// TestOpenLowerIsOsOpenFile checks openLower against os.OpenFile, the
// oracle: the same content, Stat and listing, or the same error, for
// every kind of file and the flags reads use.
func TestOpenLowerIsOsOpenFile(t *testing.T) {
	root := t.TempDir()
	for _, err := range []error{
		os.WriteFile(filepath.Join(root, "f"), []byte("hello"), 0o640),
		os.Mkdir(filepath.Join(root, "d"), 0o750),
		os.WriteFile(filepath.Join(root, "d", "x"), nil, 0o600),
		os.Symlink("f", filepath.Join(root, "l")),
		syscall.Mkfifo(filepath.Join(root, "p"), 0o600),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		data  string
		names []string
		fi    string
		err   string
	}
	open := func(fn func(string, int) (*os.File, error), name string, flag int) (r result) {
		f, err := fn(filepath.Join(root, name), flag)
		if err != nil {
			return result{err: fmt.Sprintf("%#v", err)}
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		st := *fi.Sys().(*syscall.Stat_t)
		st.Atim = syscall.Timespec{} // the first read of each moves it
		r.fi = fmt.Sprint(fi.Name(), fi.Mode(), fi.Size(), fi.ModTime(), st, f.Name())
		if fi.IsDir() {
			r.names, err = f.Readdirnames(-1)
		} else if fi.Mode().IsRegular() {
			var b []byte
			b, err = io.ReadAll(f)
			r.data = string(b)
		}
		if err != nil {
			r.err = err.Error()
		}
		return r
	}
	osOpen := func(name string, flag int) (*os.File, error) { return os.OpenFile(name, flag, 0) }
	for _, name := range []string{"f", "d", "d/", "d/x", "l", "p", "missing", "f/x", "f/"} {
		for _, flag := range []int{os.O_RDONLY, os.O_RDONLY | syscall.O_NOFOLLOW, os.O_RDONLY | syscall.O_NONBLOCK, os.O_RDWR} {
			if name == "p" && flag&syscall.O_NONBLOCK == 0 {
				continue // blocks until a writer comes, in both
			}
			got, want := open(openLower, name, flag), open(osOpen, name, flag)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("open %q flag %#x: %+v, os.OpenFile: %+v", name, flag, got, want)
			}
		}
	}
}
