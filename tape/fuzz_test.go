package tape

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/afero"
)

func FuzzRead(f *testing.F) {
	raw := sampleTape(f)
	f.Add(raw)
	f.Add(raw[:len(raw)/2])
	f.Add(raw[:bytes.IndexByte(raw, '\n')+1])
	f.Add([]byte(`{"kind":"header","format":"cowfs-tape","version":1,"minor":9,"hash":"blake3"}` + "\n" +
		`{"seq":1,"op":"future","path":"x","extra":[1,2]}` + "\n" + `{"kind":"future-kind"}` + "\n"))
	f.Add([]byte("not a tape\n"))
	f.Add([]byte(`{"kind":"header"}`))
	var cmdTape bytes.Buffer
	rec := NewRecorder(&cmdTape)
	rec.RecordCommand("/r", []string{"sh", "-c", "date > /r/n"}, []CommandChange{
		{Op: OpCmdWrite, Path: "n", Mode: 0o644, Size: 1, Hash: emptyHash},
		{Op: OpCmdMknod, Path: "p", Mode: fs.ModeNamedPipe | 0o600},
		{Op: OpCmdRemove, Path: "old"},
	})
	rec.Close()
	f.Add(cmdTape.Bytes())
	for _, golden := range []string{"sample.tape", "sample-1.1.tape", "sample-1.2.tape", "sample-1.4.tape", "sample-1.5.tape"} {
		b, err := os.ReadFile(filepath.Join("testdata", golden))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tp, err := Read(bytes.NewReader(b))
		if err != nil {
			var re *ReadError
			if !errors.As(err, &re) {
				t.Fatalf("error %T %v is not a *ReadError", err, err)
			}
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrTrailer) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			if tp != nil {
				t.Fatal("tape returned with an error")
			}
			// A line number when there is a line; an empty input has none.
			if (re.Line > 0) != strings.HasPrefix(err.Error(), "tape: line ") || !strings.HasPrefix(err.Error(), "tape: ") {
				t.Fatalf("message %q (line %d)", err, re.Line)
			}
			return
		}
		if tp.Truncated != (tp.Trailer == nil) {
			t.Fatalf("Truncated=%v with trailer %v", tp.Truncated, tp.Trailer)
		}
		for i, r := range tp.Records {
			if r.Seq != int64(i+1) {
				t.Fatalf("record %d has seq %d", i, r.Seq)
			}
		}
		for _, m := range allModes {
			if d := Compare(tp, tp, m); d != nil {
				t.Fatalf("a tape differs from itself in %s:\n%v", m, d)
			}
			tp.Canon(m)
			if d := Compare(tp, &Tape{}, m); d != nil {
				_ = d.String()
			}
		}
	})
}

// opProgram interprets b as a program of file operations on a few names
// under root. After each operation it calls check with the operation's
// index. Every handle is closed within its operation.
func opProgram(fsys afero.Fs, root string, b []byte, check func(i int)) {
	names := []string{"a", "b", "d/c", "d"}
	p := func(n string) string { return filepath.Join(root, n) }
	for i := 0; len(b) >= 3; i++ {
		op, n, arg := b[0]%13, p(names[int(b[1])%len(names)]), int(b[2])
		b = b[3:]
		switch op {
		case 0:
			afero.WriteFile(fsys, n, pattern(arg*37, byte(arg)), 0o644)
		case 1:
			afero.ReadFile(fsys, n)
		case 2:
			if f, err := fsys.OpenFile(n, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
				f.Write(pattern(arg+1, 1))
				if rf, ok := f.(io.ReaderFrom); ok && arg%3 == 0 {
					rf.ReadFrom(bytes.NewReader(pattern(arg/2, 2))) // what io.Copy calls
				} else {
					f.Write(pattern(arg/2, 2))
				}
				f.Close()
			}
		case 3, 4:
			flag := os.O_RDWR
			if op == 4 {
				flag = os.O_WRONLY
			}
			if f, err := fsys.OpenFile(n, flag|os.O_CREATE, 0o644); err == nil {
				f.WriteAt(pattern(arg%50+1, 3), int64(arg*13))
				f.WriteAt(pattern(7, 4), int64(arg))
				f.Close()
			}
		case 5:
			if f, err := fsys.OpenFile(n, os.O_RDWR, 0); err == nil {
				f.Truncate(int64(arg * 11))
				f.Close()
			}
		case 6:
			if f, err := fsys.Open(n); err == nil {
				f.Read(make([]byte, arg))
				f.ReadAt(make([]byte, 10), int64(arg*5))
				if wt, ok := f.(io.WriterTo); ok && arg%2 == 1 {
					wt.WriteTo(io.Discard) // the rest, as io.Copy would
				}
				f.Close()
			}
		case 7:
			// afero's MemMapFs lets a name move under itself, which no
			// kernel does; keep the oracle honest by not asking.
			if to := p(names[arg%len(names)]); !strings.HasPrefix(to, n+"/") {
				fsys.Rename(n, to)
			}
		case 8:
			fsys.Remove(n)
		case 9:
			if arg%2 == 0 {
				fsys.Mkdir(n, 0o755)
			} else {
				fsys.MkdirAll(n, 0o755)
			}
		case 10:
			fsys.Stat(n)
		case 11:
			if f, err := fsys.OpenFile(n, os.O_RDWR, 0); err == nil {
				f.Read(make([]byte, arg))
				f.Write(pattern(arg%20+1, 5))
				f.Close()
			}
		case 12:
			if f, err := fsys.OpenFile(n, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err == nil {
				f.Write(pattern(arg, 6))
				if to := p(names[arg%len(names)]); !strings.HasPrefix(to, n+"/") {
					fsys.Rename(n, to)
				}
				f.Write(pattern(arg%9, 7))
				f.Close()
			}
		}
		check(i)
	}
}

// runChecked runs opProgram on fsys through a recorder and, after every
// operation, reads the tape so far and checks the newest handle record
// against the bytes fsys holds: a record with a result hash must equal
// them, and so must a read version when the handle changed nothing.
func runChecked(t *testing.T, fsys afero.Fs, root string, prog []byte) *Tape {
	defer func() {
		// afero.MemMapFs itself panics on some sequences ("parent of X is
		// nil" after a rename under a renamed directory): its bug, not the
		// recorder's, and no oracle to compare with.
		if r := recover(); r != nil {
			if msg, ok := r.(string); ok && strings.HasPrefix(msg, "parent of ") {
				t.Skipf("afero.MemMapFs panicked on this program: %v", r)
			}
			panic(r)
		}
	}()
	var buf bytes.Buffer
	rec := NewRecorder(&buf)
	w := rec.Wrap(fsys, root)
	seen := 0
	opProgram(w, root, prog, func(i int) {
		tp, err := Read(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("op %d: reading the tape so far: %v", i, err)
		}
		for _, r := range tp.Records[seen:] {
			if r.Op != OpOpen || r.Err != "" || r.Unhashed != "" {
				continue
			}
			path := r.Path
			if r.To != "" {
				path = r.To
			}
			if path == OutsidePath {
				continue
			}
			got, err := afero.ReadFile(fsys, filepath.Join(root, path))
			if err != nil {
				continue // renamed or removed by a later step of the same op
			}
			if r.Hash != "" && (r.Hash != sum(got) || r.Size != int64(len(got))) {
				t.Fatalf("op %d: %s\nfs holds size %d hash %s", i, r.String(), len(got), sum(got))
			}
			if r.Hash == "" && r.RHash != "" && r.To == "" && r.RHash != sum(got) {
				t.Fatalf("op %d: read version %s, fs holds %s", i, r.String(), sum(got))
			}
		}
		seen = len(tp.Records)
	})
	must(t, rec.Close())
	ls := lines(buf.Bytes())
	tp, err := Read(&buf)
	must(t, err)
	if want := specChain(t, ls[:len(ls)-1]); tp.Trailer == nil || tp.Trailer.Chain != want {
		t.Fatalf("trailer %+v, chain by FORMAT.md %s", tp.Trailer, want)
	}
	return tp
}

// memFs is afero's MemMapFs with Remove and Rename refusing what every
// kernel refuses: removing a directory that holds entries, renaming over a
// directory (unless a directory over an empty one), renaming a name whose
// parent is not a directory. MemMapFs does the first two, leaving entries
// without a parent or under a file; a later Rename of one of them panics
// inside afero while it holds a lock, a fatal error no recover can catch.
type memFs struct{ *afero.MemMapFs }

func (m memFs) Remove(name string) error {
	if m.nonEmptyDir(name) {
		return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	return m.MemMapFs.Remove(name)
}

func (m memFs) Rename(oldname, newname string) error {
	fail := func(errno syscall.Errno) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errno}
	}
	from, err := m.MemMapFs.Stat(oldname)
	if err != nil {
		return fail(syscall.ENOENT)
	}
	for _, n := range []string{oldname, newname} {
		if dir, err := m.MemMapFs.Stat(filepath.Dir(n)); err != nil || !dir.IsDir() {
			return fail(syscall.ENOTDIR)
		}
	}
	if to, err := m.MemMapFs.Stat(newname); err == nil && to.IsDir() {
		switch {
		case !from.IsDir():
			return fail(syscall.EISDIR)
		case m.nonEmptyDir(newname):
			return fail(syscall.ENOTEMPTY)
		}
	}
	return m.MemMapFs.Rename(oldname, newname)
}

func (m memFs) nonEmptyDir(name string) bool {
	fi, err := m.MemMapFs.Stat(name)
	if err != nil || !fi.IsDir() {
		return false
	}
	names, err := afero.ReadDir(m.MemMapFs, name)
	return err == nil && len(names) > 0
}

// FuzzRoundTrip runs random operation programs on afero's in-memory fs:
// every handle record matches the bytes the fs holds, the tape reads back
// complete, and a second run of the same program gives an identical tape.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{0, 0, 40, 1, 0, 0, 7, 0, 1, 6, 1, 3})
	f.Add([]byte{2, 0, 100, 2, 0, 3, 3, 0, 9, 4, 0, 200, 5, 0, 20, 11, 0, 5, 12, 0, 1})
	f.Add([]byte{9, 3, 0, 0, 2, 77, 7, 3, 1, 8, 3, 0, 10, 2, 0})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 300 {
			prog = prog[:300]
		}
		var tapes []*Tape
		for range 2 {
			mem := memFs{&afero.MemMapFs{}}
			mem.MkdirAll("/r", 0o755)
			tp := runChecked(t, mem, "/r", prog)
			if tp.Truncated {
				t.Fatal("complete tape reads as truncated")
			}
			tapes = append(tapes, tp)
		}
		if c, d := Classify(tapes[0], tapes[1]); c != Identical {
			t.Fatalf("same program, different tapes: %v\n%v", c, d)
		}
	})
}

// TestRandomOpsOS runs seeded random programs on a real temp dir, with os
// as the oracle of every recorded hash, and checks the final state against
// the files os holds.
func TestRandomOpsOS(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 40 {
		prog := make([]byte, 3*30)
		for i := range prog {
			prog[i] = byte(rng.UintN(256))
		}
		root := t.TempDir()
		tp := runChecked(t, afero.NewOsFs(), root, prog)
		for _, l := range tp.Final() {
			f := strings.Fields(l)
			if f[1] != "file" {
				continue
			}
			want, size := oracleHash(t, filepath.Join(root, f[0]))
			if !strings.Contains(l, "hash="+want) || !strings.Contains(l, " size="+itoa(int(size))+" ") {
				t.Errorf("program %d: final line %q, os holds size %d hash %s", n, l, size, want)
			}
		}
	}
}
