package overlayfs_test

// WithFaults: for every operation name, an injected error comes back in
// the shape os gives for that call (the oracle: the same call failing for
// real on os, whose *fs.PathError / *os.LinkError Op and names must be
// ours), errors.Is the injected errno, and the operation has no effect on
// the layer, the view or the tape (which records the failure).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/cowfs/cowfs/tape"
	"github.com/spf13/afero"
)

// faultCase is one operation: run does it on fsys under root (the names
// it passes are what the error must carry); osFail makes os fail the same
// call for real, to show the shape os gives it.
type faultCase struct {
	op, name string // what the injector matches
	run      func(fsys afero.Fs, root string) error
	osFail   func(root string) error
}

// faultHandle opens name (read-write, or as a directory) and runs fn on it;
// the handle is closed after, unless fn closed it.
func faultHandle(fsys afero.Fs, name string, fn func(h afero.File) error) error {
	flag := os.O_RDWR
	if fi, err := fsys.Stat(name); err == nil && fi.IsDir() {
		flag = os.O_RDONLY
	}
	h, err := fsys.OpenFile(name, flag, 0)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	defer h.Close()
	return fn(h)
}

// closedOS runs fn on an *os.File of name closed first: os's error for the
// call then has the call's Op and the handle's name.
func closedOS(name string, fn func(h *os.File) error) error {
	h, err := os.Open(name)
	if err != nil {
		return err
	}
	h.Close()
	return fn(h)
}

func faultCases() []faultCase {
	p := func(root, rel string) string { return filepath.Join(root, rel) }
	now := time.Unix(1e9, 0)
	handle := func(op, rel string, fn func(h afero.File) error, osfn func(h *os.File) error) faultCase {
		return faultCase{op: op, name: rel,
			run:    func(fsys afero.Fs, root string) error { return faultHandle(fsys, p(root, rel), fn) },
			osFail: func(root string) error { return closedOS(p(root, rel), osfn) },
		}
	}
	buf := make([]byte, 3)
	return []faultCase{
		{op: "open", name: "f", run: func(fsys afero.Fs, root string) error {
			_, err := fsys.OpenFile(p(root, "f"), os.O_RDWR|os.O_TRUNC, 0)
			return err
		}, osFail: func(root string) error { _, err := os.Open(p(root, "nope")); return err }},
		{op: "open", name: "new", run: func(fsys afero.Fs, root string) error {
			_, err := fsys.Create(p(root, "new"))
			return err
		}, osFail: func(root string) error { _, err := os.Open(p(root, "nope")); return err }},
		{op: "stat", name: "f", run: func(fsys afero.Fs, root string) error { _, err := fsys.Stat(p(root, "f")); return err },
			osFail: func(root string) error { _, err := os.Stat(p(root, "nope")); return err }},
		{op: "lstat", name: "l", run: func(fsys afero.Fs, root string) error {
			_, _, err := fsys.(afero.Lstater).LstatIfPossible(p(root, "l"))
			return err
		}, osFail: func(root string) error { _, err := os.Lstat(p(root, "nope")); return err }},
		{op: "remove", name: "f", run: func(fsys afero.Fs, root string) error { return fsys.Remove(p(root, "f")) },
			osFail: func(root string) error { return os.Remove(p(root, "nope")) }},
		{op: "remove", name: "d", run: func(fsys afero.Fs, root string) error { return fsys.RemoveAll(p(root, "d")) },
			osFail: func(root string) error { return os.Remove(p(root, "nope")) }},
		{op: "rename", name: "g", run: func(fsys afero.Fs, root string) error { return fsys.Rename(p(root, "f"), p(root, "g")) },
			osFail: func(root string) error { return os.Rename(p(root, "nope"), p(root, "g")) }},
		{op: "mkdir", name: "e", run: func(fsys afero.Fs, root string) error { return fsys.Mkdir(p(root, "e"), 0o755) },
			osFail: func(root string) error { return os.Mkdir(p(root, "d"), 0o755) }},
		{op: "mkdir", name: "e", run: func(fsys afero.Fs, root string) error { return fsys.MkdirAll(p(root, "e/x"), 0o755) },
			osFail: func(root string) error { return os.MkdirAll(p(root, "f/x"), 0o755) }},
		{op: "chmod", name: "f", run: func(fsys afero.Fs, root string) error { return fsys.Chmod(p(root, "f"), 0o600) },
			osFail: func(root string) error { return os.Chmod(p(root, "nope"), 0o600) }},
		{op: "chtimes", name: "f", run: func(fsys afero.Fs, root string) error { return fsys.Chtimes(p(root, "f"), now, now) },
			osFail: func(root string) error { return os.Chtimes(p(root, "nope"), now, now) }},
		{op: "chown", name: "f", run: func(fsys afero.Fs, root string) error { return fsys.Chown(p(root, "f"), 1, 1) },
			osFail: func(root string) error { return os.Chown(p(root, "nope"), 1, 1) }},
		{op: "symlink", name: "s", run: func(fsys afero.Fs, root string) error {
			return fsys.(afero.Linker).SymlinkIfPossible("f", p(root, "s"))
		}, osFail: func(root string) error { return os.Symlink("f", p(root, "f")) }},
		{op: "link", name: "h", run: func(fsys afero.Fs, root string) error {
			return fsys.(interface{ Link(string, string) error }).Link(p(root, "f"), p(root, "h"))
		}, osFail: func(root string) error { return os.Link(p(root, "nope"), p(root, "h")) }},
		{op: "readlink", name: "l", run: func(fsys afero.Fs, root string) error {
			_, err := fsys.(afero.LinkReader).ReadlinkIfPossible(p(root, "l"))
			return err
		}, osFail: func(root string) error { _, err := os.Readlink(p(root, "nope")); return err }},
		handle("read", "f", func(h afero.File) error { _, err := h.Read(buf); return err }, func(h *os.File) error { _, err := h.Read(buf); return err }),
		handle("read", "f", func(h afero.File) error { _, err := h.ReadAt(buf, 1); return err }, func(h *os.File) error { _, err := h.ReadAt(buf, 1); return err }),
		handle("write", "f", func(h afero.File) error { _, err := h.Write([]byte("XYZ")); return err }, func(h *os.File) error { _, err := h.Write(buf); return err }),
		handle("write", "f", func(h afero.File) error { _, err := h.WriteAt([]byte("XYZ"), 1); return err }, func(h *os.File) error { _, err := h.WriteAt(buf, 1); return err }),
		handle("write", "f", func(h afero.File) error { _, err := h.WriteString("XYZ"); return err }, func(h *os.File) error { _, err := h.WriteString("XYZ"); return err }),
		handle("write", "f", func(h afero.File) error { _, err := io.Copy(h, strings.NewReader("XYZ")); return err }, func(h *os.File) error { _, err := h.Write(buf); return err }),
		handle("seek", "f", func(h afero.File) error { _, err := h.Seek(1, io.SeekStart); return err }, func(h *os.File) error { _, err := h.Seek(1, io.SeekStart); return err }),
		handle("stat", "f", func(h afero.File) error { _, err := h.Stat(); return err }, func(h *os.File) error { _, err := h.Stat(); return err }),
		handle("sync", "f", func(h afero.File) error { return h.Sync() }, func(h *os.File) error { return h.Sync() }),
		handle("truncate", "f", func(h afero.File) error { return h.Truncate(1) }, func(h *os.File) error { return h.Truncate(1) }),
		handle("close", "f", func(h afero.File) error { return h.Close() }, func(h *os.File) error { return h.Close() }),
		{op: "readdirent", name: "d", run: func(fsys afero.Fs, root string) error {
			return faultHandle(fsys, p(root, "d"), func(h afero.File) error { _, err := h.Readdirnames(-1); return err })
		}, osFail: func(root string) error {
			h, err := os.Open(p(root, "f")) // listing a file fails in getdents
			if err != nil {
				return err
			}
			defer h.Close()
			_, err = h.Readdirnames(-1)
			return err
		}},
	}
}

// faultFixture makes a root with a file f, a directory d holding g and
// a symlink l to f.
func faultFixture(t *testing.T) string {
	root := t.TempDir()
	must(t, os.WriteFile(filepath.Join(root, "f"), []byte("hello"), 0o644))
	must(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "d", "g"), []byte("g"), 0o644))
	must(t, os.Symlink("f", filepath.Join(root, "l")))
	return root
}

// shape is the Op and names of an error, as os's error types carry them.
func shape(err error) string {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &le):
		return fmt.Sprintf("LinkError{%s %s %s}", le.Op, le.Old, le.New)
	case errors.As(err, &pe):
		return fmt.Sprintf("PathError{%s %s}", pe.Op, pe.Path)
	}
	return fmt.Sprintf("%T", err)
}

// TestFaultsEveryOp injects EROFS into each operation in turn.
func TestFaultsEveryOp(t *testing.T) {
	for i, c := range faultCases() {
		t.Run(fmt.Sprintf("%02d-%s-%s", i, c.op, c.name), func(t *testing.T) {
			root := faultFixture(t)
			var armed atomic.Bool
			var calls atomic.Int32
			ov, err := overlayfs.New(root, overlayfs.WithFaults(func(op, name string) error {
				if armed.Load() && op == c.op && name == filepath.Join(root, c.name) {
					calls.Add(1)
					return syscall.EROFS
				}
				return nil
			}))
			must(t, err)
			var tb bytes.Buffer
			rec := tape.NewRecorder(&tb)
			tfs := rec.Wrap(ov, root)
			// Handle cases open f for writing first, which copies it up:
			// every case starts from that layer.
			h, err := ov.OpenFile(filepath.Join(root, "f"), os.O_RDWR, 0)
			must(t, err)
			must(t, h.Close())
			before, layer := treeOf(t, ov, root), fmt.Sprint(ov.Layer())

			armed.Store(true)
			err = c.run(tfs, root)
			armed.Store(false)
			must(t, rec.Close())

			if calls.Load() == 0 {
				t.Fatalf("the injector never saw %s %s (err %v)", c.op, c.name, err)
			}
			if !errors.Is(err, syscall.EROFS) {
				t.Fatalf("err = %v, want one wrapping EROFS", err)
			}
			// os's shape for the same call, with os's names swapped for ours.
			want := shape(c.osFail(root))
			want = strings.NewReplacer(filepath.Join(root, "nope"), filepath.Join(root, c.name), filepath.Join(root, "d"), filepath.Join(root, c.name)).Replace(want)
			if c.op == "symlink" {
				want = shape(&os.LinkError{Op: "symlink", Old: "f", New: filepath.Join(root, c.name)})
			}
			if c.op == "rename" || c.op == "link" {
				want = shape(&os.LinkError{Op: c.op, Old: filepath.Join(root, "f"), New: filepath.Join(root, c.name)})
			}
			if c.op == "readdirent" || c.op == "mkdir" || strings.HasPrefix(want, "PathError") && c.osFail != nil && !strings.Contains(want, c.name) {
				want = strings.Replace(want, filepath.Join(root, "f"), filepath.Join(root, c.name), 1)
			}
			if got := shape(err); got != want {
				t.Errorf("shape: got %s, os gives %s", got, want)
			}
			if got := treeOf(t, ov, root); got != before {
				t.Errorf("the view changed:\nbefore:\n%s\nafter:\n%s", before, got)
			}
			if got := fmt.Sprint(ov.Layer()); got != layer {
				t.Errorf("the layer changed: %s, was %s", got, layer)
			}
			tp, err := tape.Read(&tb)
			must(t, err)
			found := false
			for _, r := range tp.Records {
				if r.Err == tape.OutcomeReadOnly || slicesContainsSuffix(r.Fails, ":"+tape.OutcomeReadOnly) {
					found = true
				}
				if r.Hash != "" && r.Hash != tape.HashBytes([]byte("hello")) {
					t.Errorf("the tape records a change of content: %v", r.String())
				}
			}
			if !found {
				t.Errorf("the tape does not record the failure: %+v", tp.Records)
			}
		})
	}
}

func slicesContainsSuffix(s []string, suffix string) bool {
	for _, x := range s {
		if strings.HasSuffix(x, suffix) {
			return true
		}
	}
	return false
}

// treeOf describes the tree under dir as fsys shows it.
func treeOf(t testing.TB, fsys afero.Fs, dir string) string {
	t.Helper()
	var sb strings.Builder
	err := afero.Walk(fsys, dir, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := fsys.(afero.LinkReader).ReadlinkIfPossible(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&sb, "%s -> %s\n", rel, target)
		case fi.IsDir():
			fmt.Fprintf(&sb, "%s/\n", rel)
		default:
			data, err := afero.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&sb, "%s %d %x\n", rel, fi.Size(), crc(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

func crc(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}
