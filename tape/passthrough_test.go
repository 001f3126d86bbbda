package tape

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
)

func descErr(err error) string {
	if err == nil {
		return "ok"
	}
	return fmt.Sprintf("%T %v", err, err)
}

func descFI(fi os.FileInfo) string {
	if fi == nil {
		return "nil"
	}
	sz := fi.Size()
	if fi.IsDir() {
		sz = -1
	}
	return fmt.Sprintf("%s %v %d", fi.Name(), fi.Mode(), sz)
}

func ifaces(v any) string {
	var s []string
	if _, ok := v.(io.ReaderFrom); ok {
		s = append(s, "ReaderFrom")
	}
	if _, ok := v.(io.WriterTo); ok {
		s = append(s, "WriterTo")
	}
	if _, ok := v.(fs.ReadDirFile); ok {
		s = append(s, "ReadDirFile")
	}
	if _, ok := v.(afero.Lstater); ok {
		s = append(s, "Lstater")
	}
	if _, ok := v.(afero.Symlinker); ok {
		s = append(s, "Symlinker")
	}
	return strings.Join(s, ",")
}

func passHandle(out *[]string, tag string, f afero.File) {
	p := func(format string, a ...any) { *out = append(*out, tag+": "+fmt.Sprintf(format, a...)) }
	p("ifaces %s", ifaces(f))
	buf := make([]byte, 3)
	n, err := f.Read(buf)
	p("read %d %q %s", n, buf[:n], descErr(err))
	n, err = f.ReadAt(buf, 1)
	p("readat %d %q %s", n, buf[:n], descErr(err))
	func() {
		defer func() {
			if r := recover(); r != nil {
				p("readat- panic")
			}
		}()
		n, err = f.ReadAt(buf, -1)
		p("readat- %d %s", n, descErr(err))
	}()
	off, err := f.Seek(0, io.SeekEnd)
	p("seek %d %s", off, descErr(err))
	off, err = f.Seek(-100, io.SeekStart)
	p("seek- %d %s", off, descErr(err))
	f.Seek(0, io.SeekStart)
	n, err = f.Write([]byte("WW"))
	p("write %d %s", n, descErr(err))
	n, err = f.WriteAt([]byte("AT"), 1)
	p("writeat %d %s", n, descErr(err))
	n, err = f.WriteString("ss")
	p("writestring %d %s", n, descErr(err))
	passCopy(p, f, "")
	err = f.Truncate(4)
	p("truncate %s", descErr(err))
	err = f.Truncate(-1)
	p("truncate- %s", descErr(err))
	fi, err := f.Stat()
	p("stat %s %s", descFI(fi), descErr(err))
	fis, err := f.Readdir(-1)
	var names []string
	for _, fi := range fis {
		names = append(names, fi.Name())
	}
	sort.Strings(names)
	p("readdir %v %s", names, descErr(err))
	nn, err := f.Readdirnames(1)
	p("readdirnames %d %s", len(nn), descErr(err)) // a UnionFile lists in map order
	if rd, ok := f.(fs.ReadDirFile); ok {
		es, err := rd.ReadDir(-1)
		p("readdir2 %d %s", len(es), descErr(err))
	}
	p("sync %s", descErr(f.Sync()))
	p("name %s", filepath.Base(f.Name()))
	p("close %s", descErr(f.Close()))
	p("close2 %s", descErr(f.Close()))
	n, err = f.Read(buf)
	p("readclosed %d %s", n, descErr(err))
	n, err = f.Write(buf)
	p("writeclosed %d %s", n, descErr(err))
	passCopy(p, f, "closed")
	_, err = f.Stat()
	p("statclosed %s", descErr(err))
}

// passCopy calls ReadFrom and WriteTo, where f has them, from offset 0.
func passCopy(p func(string, ...any), f afero.File, tag string) {
	if rf, ok := f.(io.ReaderFrom); ok {
		f.Seek(0, io.SeekStart)
		n, err := rf.ReadFrom(strings.NewReader("from"))
		p("readfrom%s %d %s", tag, n, descErr(err))
		n, err = rf.ReadFrom(strings.NewReader(""))
		p("readfrom-empty%s %d %s", tag, n, descErr(err))
	}
	if wt, ok := f.(io.WriterTo); ok {
		f.Seek(0, io.SeekStart)
		var b strings.Builder
		n, err := wt.WriteTo(&b)
		p("writeto%s %d %q %s", tag, n, b.String(), descErr(err))
	}
}

func passProgram(fsys, ref afero.Fs, j func(string) string) []string {
	var out []string
	p := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	p("fs ifaces %s", ifaces(fsys))
	flags := []int{os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_RDWR | os.O_APPEND, os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_TRUNC, os.O_RDONLY | os.O_TRUNC, os.O_WRONLY | os.O_CREATE | os.O_EXCL}
	for _, name := range []string{"f", "d", "missing", "f/x", "link"} {
		for _, fl := range flags {
			// fresh content each time
			if w, err := fsys.OpenFile(j("f"), os.O_WRONLY|os.O_TRUNC, 0); err == nil {
				w.Write([]byte("hello"))
				w.Close()
			}
			f, err := fsys.OpenFile(j(name), fl, 0o644)
			p("openfile %s %x %s", name, fl, descErr(err))
			if err == nil {
				passHandle(&out, fmt.Sprintf("%s/%x", name, fl), f)
			}
			fsys.Remove(j("missing"))
		}
		f, err := fsys.Open(j(name))
		p("open %s %s", name, descErr(err))
		if err == nil {
			passHandle(&out, name+"/open", f)
		}
		f, err = fsys.Create(j(name + "c"))
		p("create %s %s", name, descErr(err))
		if err == nil {
			passHandle(&out, name+"/create", f)
		}
		fi, err := fsys.Stat(j(name))
		p("stat %s %s %s", name, descFI(fi), descErr(err))
		if l, ok := fsys.(afero.Lstater); ok {
			fi, used, err := l.LstatIfPossible(j(name))
			p("lstat %s %s %v %s", name, descFI(fi), used, descErr(err))
		}
		if _, ok := ref.(afero.LinkReader); ok {
			l := fsys.(afero.LinkReader)
			t, err := l.ReadlinkIfPossible(j(name))
			p("readlink %s %q %s", name, t, descErr(err))
		}
		p("chmod %s %s", name, descErr(fsys.Chmod(j(name), 0o640)))
		p("chtimes %s %s", name, descErr(fsys.Chtimes(j(name), time.Unix(5, 0), time.Unix(6, 0))))
		p("mkdir %s %s", name, descErr(fsys.Mkdir(j(name), 0o755)))
		p("mkdirall %s %s", name, descErr(fsys.MkdirAll(j(name+"/q"), 0o755)))
	}
	if _, ok := ref.(afero.Linker); ok {
		l := fsys.(afero.Linker)
		p("symlink %s", descErr(l.SymlinkIfPossible("f", j("newlink"))))
		p("symlink2 %s", descErr(l.SymlinkIfPossible("f", j("newlink"))))
	}
	p("rename %s", descErr(fsys.Rename(j("fc"), j("g"))))
	p("rename2 %s", descErr(fsys.Rename(j("nothere"), j("g"))))
	p("rename3 %s", descErr(fsys.Rename(j("d"), j("d/sub"))))
	p("remove %s", descErr(fsys.Remove(j("d"))))
	p("removeall %s", descErr(fsys.RemoveAll(j("d"))))
	p("remove2 %s", descErr(fsys.Remove(j("g"))))
	p("chown %s", descErr(fsys.Chown(j("f"), os.Getuid(), os.Getgid())))
	return out
}

type passKind struct {
	name string
	make func(t *testing.T) (afero.Fs, string, func(string) string)
}

func passKinds() []passKind {
	osTree := func(t *testing.T) string {
		d := t.TempDir()
		mustWrite(t, filepath.Join(d, "f"), []byte("hello"))
		mustWrite(t, filepath.Join(d, "d/x"), []byte("x"))
		must(t, os.Symlink("f", filepath.Join(d, "link")))
		return d
	}
	return []passKind{
		{"os", func(t *testing.T) (afero.Fs, string, func(string) string) {
			d := osTree(t)
			return afero.NewOsFs(), d, func(s string) string { return filepath.Join(d, s) }
		}},
		{"mem", func(t *testing.T) (afero.Fs, string, func(string) string) {
			m := afero.NewMemMapFs()
			afero.WriteFile(m, "/r/f", []byte("hello"), 0o644)
			afero.WriteFile(m, "/r/d/x", []byte("x"), 0o644)
			return m, "/r", func(s string) string { return "/r/" + s }
		}},
		{"basepath", func(t *testing.T) (afero.Fs, string, func(string) string) {
			d := osTree(t)
			return afero.NewBasePathFs(afero.NewOsFs(), d), "/", func(s string) string { return "/" + s }
		}},
		{"readonly", func(t *testing.T) (afero.Fs, string, func(string) string) {
			d := osTree(t)
			return afero.NewReadOnlyFs(afero.NewOsFs()), d, func(s string) string { return filepath.Join(d, s) }
		}},
		{"cow", func(t *testing.T) (afero.Fs, string, func(string) string) {
			d := osTree(t)
			// d is a directory in both layers: its Open is a UnionFile,
			// its OpenFile(O_RDONLY) the layer's directory alone.
			cow := afero.NewCopyOnWriteFs(afero.NewReadOnlyFs(afero.NewOsFs()), afero.NewMemMapFs())
			must(t, afero.WriteFile(cow, filepath.Join(d, "d/y"), []byte("y"), 0o644))
			return cow, d, func(s string) string { return filepath.Join(d, s) }
		}},
	}
}

// TestWrapPassesThrough runs one program of every Fs and handle call
// (flags, failing calls, calls after Close) on a bare afero.Fs, the
// oracle, and on a recorder's wrap of another copy of it: each result,
// error (type and text) and optional interface of the handles must be the
// same. The Fs-level Lstater, Linker and LinkReader are the exception the
// package doc names: the wrap always has them, as afero's own wrappers do.
// Found: Create and Open called the inner OpenFile (afero.MemMapFs's
// Create gives mode 0, its Open a handle that writes where
// OpenFile(O_RDONLY) refuses), and handles of an *os.File lacked
// ReadFrom and WriteTo.
// tempDirs matches the names t.TempDir gives under this test.
var tempDirs = regexp.MustCompile(regexp.QuoteMeta(os.TempDir()) + `/TestWrapPassesThrough[^/]*/[0-9]+`)

// scrub replaces the temporary directory in s: the two copies have two.
func scrub(s string) string { return tempDirs.ReplaceAllString(s, "ROOT") }

func TestWrapPassesThrough(t *testing.T) {
	for _, k := range passKinds() {
		t.Run(k.name, func(t *testing.T) {
			bare, _, bj := k.make(t)
			want := passProgram(bare, bare, bj)
			inner, root, wj := k.make(t)
			rec := NewRecorder(io.Discard)
			got := passProgram(rec.Wrap(inner, root), inner, wj)
			must(t, rec.Close())
			bad := 0
			for i := range max(len(want), len(got)) {
				var w, g string
				if i < len(want) {
					w = scrub(want[i])
				}
				if i < len(got) {
					g = scrub(got[i])
				}
				if strings.HasPrefix(w, "fs ifaces ") && strings.HasPrefix(g, "fs ifaces ") {
					continue // see the doc comment
				}
				if w != g {
					t.Errorf("bare:    %s\nwrapped: %s", w, g)
					if bad++; bad == 5 {
						t.FailNow()
					}
				}
			}
		})
	}
}

// copyProgram copies with io.Copy in every direction a handle can take
// part in: into a new file from a reader without WriteTo (the handle's
// ReadFrom when it has one), out of a file into a bytes.Buffer (its
// WriteTo), and from one handle to another.
func copyProgram(t *testing.T, fsys afero.Fs, j func(string) string, data []byte) {
	out, err := fsys.Create(j("out"))
	must(t, err)
	if _, err := io.Copy(out, io.LimitReader(bytes.NewReader(data), int64(len(data)))); err != nil {
		t.Fatal(err)
	}
	must(t, out.Close())
	in, err := fsys.Open(j("out"))
	must(t, err)
	var buf bytes.Buffer
	if n, err := io.Copy(&buf, in); err != nil || n != int64(len(data)) {
		t.Fatalf("io.Copy out of a handle: %d, %v", n, err)
	}
	must(t, in.Close())
	in, err = fsys.Open(j("out"))
	must(t, err)
	cp, err := fsys.OpenFile(j("copy"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	must(t, err)
	if _, err := io.Copy(cp, in); err != nil {
		t.Fatal(err)
	}
	must(t, in.Close())
	must(t, cp.Close())
}

// TestCopyTapeSameAcrossFs: io.Copy through handles of an *os.File (which
// have ReadFrom and WriteTo) and of afero.MemMapFs (which have neither)
// records the same tape in every mode, with the BLAKE3 of the bytes os
// holds afterwards.
func TestCopyTapeSameAcrossFs(t *testing.T) {
	data := pattern(100_000, 7)
	dir := t.TempDir()
	osTape, _ := tapeOf(t, afero.NewOsFs(), dir, func(fsys afero.Fs) {
		copyProgram(t, fsys, func(s string) string { return filepath.Join(dir, s) }, data)
	})
	memTape, _ := tapeOf(t, afero.NewMemMapFs(), "/r", func(fsys afero.Fs) {
		must(t, fsys.MkdirAll("/r", 0o755))
		copyProgram(t, fsys, func(s string) string { return "/r/" + s }, data)
	})
	memTape.Records = memTape.Records[1:] // the MkdirAll of the root
	for _, m := range []Mode{ModePath, ModeGlobal, ModeSet, ModeFinal} {
		if d := Compare(osTape, memTape, m); d != nil {
			t.Errorf("%v", d)
		}
	}
	want, size := oracleHash(t, filepath.Join(dir, "copy"))
	for _, name := range []string{"out", "copy"} {
		var hashes []string
		for _, r := range only(osTape, OpOpen, name) {
			if r.Hash != "" && (r.Hash != want || r.Size != size) {
				t.Errorf("%s: hash %s size %d, os holds %s size %d", name, r.Hash, r.Size, want, size)
			}
			hashes = append(hashes, r.Hash+r.RHash)
		}
		if len(hashes) == 0 || slices.Contains(hashes, "") {
			t.Errorf("%s: a handle without a hash: %q", name, hashes)
		}
	}
}

// TestErrorClassSameAcrossFs: a handle misused the same way on os and on
// afero.MemMapFs fails with the same class, where MemMapFs's error is an
// exported sentinel (its file package has its own ErrFileClosed and
// ErrOutOfRange, not afero's, not os's).
func TestErrorClassSameAcrossFs(t *testing.T) {
	dir := t.TempDir()
	mem := afero.NewMemMapFs()
	must(t, afero.WriteFile(mem, "/f", []byte("hello"), 0o644))
	mustWrite(t, filepath.Join(dir, "f"), []byte("hello"))
	for _, c := range []struct {
		name string
		call func(f afero.File) error
	}{
		{"truncate negative", func(f afero.File) error { return f.Truncate(-1) }},
		{"read after close", func(f afero.File) error { f.Close(); _, err := f.Read(make([]byte, 1)); return err }},
		{"write after close", func(f afero.File) error { f.Close(); _, err := f.Write([]byte("x")); return err }},
		{"seek after close", func(f afero.File) error { f.Close(); _, err := f.Seek(0, io.SeekStart); return err }},
		{"truncate after close", func(f afero.File) error { f.Close(); return f.Truncate(0) }},
	} {
		osf, err := os.OpenFile(filepath.Join(dir, "f"), os.O_RDWR, 0)
		must(t, err)
		memf, err := mem.OpenFile("/f", os.O_RDWR, 0)
		must(t, err)
		oerr, merr := c.call(osf), c.call(memf)
		osf.Close()
		memf.Close()
		if oerr == nil || ErrorOutcome(oerr) != ErrorOutcome(merr) {
			t.Errorf("%s: os %v (%q), MemMapFs %v (%q)", c.name, oerr, ErrorOutcome(oerr), merr, ErrorOutcome(merr))
		}
	}
}
