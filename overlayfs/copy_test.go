//go:build linux

package overlayfs_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"
)

// copyHandle is one way to hold a handle for a copy: how it is opened and
// whether it is closed before the copy.
type copyHandle struct {
	name   string
	file   string // "src", "dst", "layer" (written through the Fs first) or "d"
	flag   int
	closed bool
	seek   int64
}

var copyHandles = []copyHandle{
	{"rdonly", "src", os.O_RDONLY, false, 2},
	{"wronly", "dst", os.O_WRONLY, false, 1},
	{"rdwr", "dst", os.O_RDWR, false, 1},
	{"append", "dst", os.O_WRONLY | os.O_APPEND, false, 0},
	{"rdwr-append", "dst", os.O_RDWR | os.O_APPEND, false, 0},
	{"layer-rdwr", "layer", os.O_RDWR, false, 1},
	{"layer-rdonly", "layer", os.O_RDONLY, false, 1},
	{"layer-wronly", "layer", os.O_WRONLY, false, 1},
	{"dir", "d", os.O_RDONLY, false, 0},
	{"closed-rdwr", "dst", os.O_RDWR, true, 0},
	{"closed-rdonly", "src", os.O_RDONLY, true, 0},
	{"closed-dir", "d", os.O_RDONLY, true, 0},
	{"closed-append", "dst", os.O_WRONLY | os.O_APPEND, true, 0},
}

// copyModes are the ways a program copies between handles.
var copyModes = []struct {
	name string
	run  func(dst, src afero.File, buf *bytes.Buffer) (int64, int, error)
}{
	{"io.Copy", func(dst, src afero.File, _ *bytes.Buffer) (int64, int, error) {
		n, err := io.Copy(dst, src)
		return n, -1, err
	}},
	{"io.CopyN", func(dst, src afero.File, _ *bytes.Buffer) (int64, int, error) {
		n, err := io.CopyN(dst, src, 4)
		return n, -1, err
	}},
	{"ReadFrom(LimitReader)", func(dst, src afero.File, _ *bytes.Buffer) (int64, int, error) {
		lr := &io.LimitedReader{R: src, N: 3}
		n, err := dst.(io.ReaderFrom).ReadFrom(lr)
		return n, int(lr.N), err
	}},
	{"ReadFrom(LimitReader 0)", func(dst, src afero.File, _ *bytes.Buffer) (int64, int, error) {
		lr := &io.LimitedReader{R: src, N: 0}
		n, err := dst.(io.ReaderFrom).ReadFrom(lr)
		return n, int(lr.N), err
	}},
	{"ReadFrom(strings.Reader)", func(dst, _ afero.File, _ *bytes.Buffer) (int64, int, error) {
		r := strings.NewReader("XYZ")
		n, err := dst.(io.ReaderFrom).ReadFrom(r)
		return n, r.Len(), err
	}},
	{"io.Copy(strings.Reader)", func(dst, _ afero.File, _ *bytes.Buffer) (int64, int, error) {
		r := strings.NewReader("XYZ")
		n, err := io.Copy(dst, r)
		return n, r.Len(), err
	}},
	{"io.Copy(Buffer)", func(_, src afero.File, buf *bytes.Buffer) (int64, int, error) {
		n, err := io.Copy(buf, src)
		return n, -1, err
	}},
	{"WriteTo(Buffer)", func(_, src afero.File, buf *bytes.Buffer) (int64, int, error) {
		n, err := src.(io.WriterTo).WriteTo(buf)
		return n, -1, err
	}},
}

// copyRun sets up root (src, dst, d, layer) on fsys, opens the two
// handles, copies, and renders everything a program could see after.
func copyRun(t *testing.T, fsys target, root string, dh, sh copyHandle, mode int) string {
	t.Helper()
	if err := afero.WriteFile(fsys, filepath.Join(root, "layer"), []byte("layer-bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	open := func(h copyHandle) afero.File {
		f, err := fsys.OpenFile(filepath.Join(root, h.file), h.flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		if h.seek != 0 {
			if _, err := f.Seek(h.seek, io.SeekStart); err != nil {
				t.Fatal(err)
			}
		}
		if h.closed {
			f.Close()
		}
		return f
	}
	dst, src := open(dh), open(sh)
	defer dst.Close()
	defer src.Close()
	var buf bytes.Buffer
	n, left, err := copyModes[mode].run(dst, src, &buf)
	s := fmt.Sprintf("n=%d err=%s left=%d buf=%q", n, describeErr(err, root), left, buf.String())
	for _, f := range []afero.File{dst, src} {
		off, err := f.Seek(0, io.SeekCurrent)
		if fi, serr := f.Stat(); serr == nil && fi.IsDir() {
			off = 0 // a directory's offset is the file system's cookie
		}
		s += fmt.Sprintf(" off=%d,%s", off, describeErr(err, root))
	}
	for _, name := range []string{"src", "dst", "layer"} {
		b, err := afero.ReadFile(fsys, filepath.Join(root, name))
		s += fmt.Sprintf(" %s=%q,%v", name, b, err)
	}
	return s
}

// TestCopyBetweenHandles copies between every pair of handle kinds in every
// way a program does (io.Copy, io.CopyN, ReadFrom of a LimitedReader or
// another reader, WriteTo) on os and on the overlay, and compares what the
// copy returns, where both offsets end and the files after: os checks the
// destination (closed, read-only, a directory) before it reads a byte of
// the source.
func TestCopyBetweenHandles(t *testing.T) {
	base := t.TempDir()
	orig := filepath.Join(base, "orig")
	if err := os.MkdirAll(filepath.Join(orig, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"src": "0123456789", "dst": "abcdef", "layer": "old"}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(orig, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	osRoot, cowRoot := filepath.Join(base, "os"), filepath.Join(base, "cow")
	for _, r := range []string{osRoot, cowRoot} {
		if err := copyTree(orig, r); err != nil {
			t.Fatal(err)
		}
	}
	cow := newCow(t, cowRoot)
	diverged, total := 0, 0
	for mode := range copyModes {
		for _, dh := range copyHandles {
			for _, sh := range copyHandles {
				if dh.file == sh.file && dh.file != "d" {
					continue // a copy of a file into itself
				}
				total++
				for name, data := range files {
					if err := os.WriteFile(filepath.Join(osRoot, name), []byte(data), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				cow.Reset()
				want := copyRun(t, osTarget{}, osRoot, dh, sh, mode)
				got := copyRun(t, cow, cowRoot, dh, sh, mode)
				want = strings.ReplaceAll(want, osRoot, "$ROOT")
				got = strings.ReplaceAll(got, cowRoot, "$ROOT")
				if want != got {
					diverged++
					t.Errorf("%s(dst %s, src %s):\n os:  %s\n cow: %s", copyModes[mode].name, dh.name, sh.name, want, got)
				}
			}
		}
	}
	t.Logf("%d of %d copies diverged", diverged, total)
}
