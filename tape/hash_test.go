package tape

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/spf13/afero"
)

// TestHashVector pins HashBytes to the published BLAKE3 test vector of the
// empty input, so the hex form is the one other tools compute.
func TestHashVector(t *testing.T) {
	const want = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
	if got := HashBytes(nil); got != want {
		t.Fatalf("HashBytes(nil) = %s, want %s", got, want)
	}
	if emptyHash != want {
		t.Fatalf("emptyHash = %s, want %s", emptyHash, want)
	}
}

// contentCase runs ops on a real temp dir through the recorder, then
// checks the handle record of path against BLAKE3 of what os holds.
type contentCase struct {
	name  string
	setup map[string][]byte // files before the run
	run   func(t *testing.T, fsys afero.Fs, dir string)
	// path of the handle record to check, and where os holds its result
	path, final string
	// wantRead is the content version read (nil: no read hash expected)
	wantRead  []byte
	wantSpans []Span
	// written: a result hash expected (of final's bytes)
	written bool
	// maxInnerRead bounds the bytes the recorder+caller may read through
	// the inner fs: proof that nothing is read twice (-1: no bound)
	maxInnerRead int64
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func contentCases() []contentCase {
	big := pattern(300<<10, 1)
	small := pattern(1000, 2)
	return []contentCase{
		{
			name: "full read with afero.ReadFile", setup: map[string][]byte{"a": big},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				_, err := afero.ReadFile(fsys, filepath.Join(dir, "a"))
				must(t, err)
			},
			path: "a", wantRead: big, wantSpans: []Span{{0, int64(len(big))}}, maxInnerRead: int64(len(big)),
		},
		{
			name: "partial read hashes the whole version once", setup: map[string][]byte{"a": big},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.Open(filepath.Join(dir, "a"))
				must(t, err)
				_, err = io.ReadFull(f, make([]byte, 100))
				must(t, err)
				must(t, f.Close())
			},
			path: "a", wantRead: big, wantSpans: []Span{{0, 100}}, maxInnerRead: int64(len(big)),
		},
		{
			name: "ReadAt tail then head", setup: map[string][]byte{"a": big},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.Open(filepath.Join(dir, "a"))
				must(t, err)
				p := make([]byte, 4096)
				_, err = f.ReadAt(p, int64(len(big))-4096)
				must(t, err)
				_, err = f.ReadAt(p, 0)
				must(t, err)
				must(t, f.Close())
			},
			path: "a", wantRead: big, wantSpans: []Span{{0, 4096}, {int64(len(big)) - 4096, 4096}},
			maxInnerRead: int64(len(big)) + 4096,
		},
		{
			name: "seek past a gap and read to the end", setup: map[string][]byte{"a": big},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.Open(filepath.Join(dir, "a"))
				must(t, err)
				_, err = f.Read(make([]byte, 10))
				must(t, err)
				_, err = f.Seek(1000, io.SeekStart)
				must(t, err)
				_, err = io.Copy(io.Discard, f)
				must(t, err)
				must(t, f.Close())
			},
			path: "a", wantRead: big, wantSpans: []Span{{0, 10}, {1000, int64(len(big)) - 1000}},
			maxInnerRead: int64(len(big)),
		},
		{
			name: "create and write sequentially", setup: map[string][]byte{},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.Create(filepath.Join(dir, "n"))
				must(t, err)
				w := bufio.NewWriterSize(f, 4096)
				for i := 0; i < 100; i++ {
					_, err = w.Write(small)
					must(t, err)
				}
				must(t, w.Flush())
				must(t, f.Close())
			},
			path: "n", final: "n", written: true, maxInnerRead: 0,
		},
		{
			name: "append write-only to an existing file", setup: map[string][]byte{"log": big},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.OpenFile(filepath.Join(dir, "log"), os.O_WRONLY|os.O_APPEND, 0)
				must(t, err)
				_, err = f.Write([]byte("line one\n"))
				must(t, err)
				_, err = f.WriteString("line two\n")
				must(t, err)
				must(t, f.Close())
			},
			path: "log", final: "log", written: true, maxInnerRead: int64(len(big)),
		},
		{
			name: "read all then append through one rdwr handle", setup: map[string][]byte{"a": small},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_RDWR, 0)
				must(t, err)
				_, err = io.ReadAll(f)
				must(t, err)
				_, err = f.Write([]byte("tail"))
				must(t, err)
				must(t, f.Close())
			},
			path: "a", final: "a", wantRead: small, wantSpans: []Span{{0, int64(len(small))}}, written: true,
			maxInnerRead: int64(len(small)),
		},
		{
			name: "WriteAt in the middle, rdwr: one read-back", setup: map[string][]byte{"a": big},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_RDWR, 0)
				must(t, err)
				_, err = f.WriteAt([]byte("MIDDLE"), 5000)
				must(t, err)
				_, err = f.WriteAt([]byte("EARLIER"), 10)
				must(t, err)
				must(t, f.Close())
			},
			// 5000 bytes hashed before the first patch, then one read-back.
			path: "a", final: "a", written: true, maxInnerRead: 5000 + int64(len(big)),
		},
		{
			name: "WriteAt in the middle, write-only: read-back by name", setup: map[string][]byte{"a": big},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_WRONLY, 0)
				must(t, err)
				_, err = f.WriteAt([]byte("MIDDLE"), 5000)
				must(t, err)
				_, err = f.WriteAt([]byte("EARLY"), 3)
				must(t, err)
				must(t, f.Close())
			},
			path: "a", final: "a", written: true, maxInnerRead: 5000 + int64(len(big)),
		},
		{
			name: "overwrite the head of a longer file keeps its tail", setup: map[string][]byte{"a": big},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_WRONLY, 0)
				must(t, err)
				_, err = f.Write(small)
				must(t, err)
				must(t, f.Close())
			},
			path: "a", final: "a", written: true, maxInnerRead: int64(len(big)) - int64(len(small)),
		},
		{
			name: "write past the end leaves a hole of zeros", setup: map[string][]byte{"a": small},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_WRONLY, 0)
				must(t, err)
				_, err = f.Seek(100000, io.SeekStart)
				must(t, err)
				_, err = f.Write([]byte("after the hole"))
				must(t, err)
				must(t, f.Close())
			},
			path: "a", final: "a", written: true, maxInnerRead: int64(len(small)),
		},
		{
			name: "truncate shorter then write at the end", setup: map[string][]byte{"a": big},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_RDWR, 0)
				must(t, err)
				must(t, f.Truncate(5000))
				_, err = f.WriteAt([]byte("end"), 5000)
				must(t, err)
				must(t, f.Close())
			},
			path: "a", final: "a", written: true, maxInnerRead: 5000,
		},
		{
			name: "truncate longer", setup: map[string][]byte{"a": small},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_RDWR, 0)
				must(t, err)
				must(t, f.Truncate(70000))
				must(t, f.Close())
			},
			path: "a", final: "a", written: true, maxInnerRead: 70000,
		},
		{
			name: "truncate to zero then rewrite", setup: map[string][]byte{"a": big},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_RDWR, 0)
				must(t, err)
				_, err = f.Write([]byte("first draft"))
				must(t, err)
				must(t, f.Truncate(0))
				_, err = f.Seek(0, io.SeekStart)
				must(t, err)
				_, err = f.Write(small)
				must(t, err)
				must(t, f.Close())
			},
			path: "a", final: "a", written: true, maxInnerRead: 0,
		},
		{
			name: "truncate shorter below what was hashed", setup: map[string][]byte{"a": small},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_RDWR|os.O_TRUNC, 0)
				must(t, err)
				_, err = f.Write(big)
				must(t, err)
				must(t, f.Truncate(1234))
				must(t, f.Close())
			},
			path: "a", final: "a", written: true, maxInnerRead: 1234,
		},
		{
			name: "rename of an open file, sequential writes", setup: map[string][]byte{},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.Create(filepath.Join(dir, "old"))
				must(t, err)
				_, err = f.Write(small)
				must(t, err)
				must(t, fsys.Rename(filepath.Join(dir, "old"), filepath.Join(dir, "new")))
				_, err = f.Write(small)
				must(t, err)
				must(t, f.Close())
			},
			path: "old", final: "new", written: true, maxInnerRead: 0,
		},
		{
			name:  "rename of an open write-only file, then WriteAt: read-back follows the rename",
			setup: map[string][]byte{"d/old": big},
			run: func(t *testing.T, fsys afero.Fs, dir string) {
				f, err := fsys.OpenFile(filepath.Join(dir, "d/old"), os.O_WRONLY, 0)
				must(t, err)
				must(t, fsys.Rename(filepath.Join(dir, "d"), filepath.Join(dir, "e")))
				_, err = f.WriteAt([]byte("patched"), 100)
				must(t, err)
				must(t, f.Close())
			},
			path: "d/old", final: "e/old", written: true, maxInnerRead: int64(len(big)),
		},
	}
}

func TestContentHashesMatchOS(t *testing.T) {
	for _, c := range contentCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for p, b := range c.setup {
				mustWrite(t, filepath.Join(dir, p), b)
			}
			cfs := newCountingFs(afero.NewOsFs())
			tp, _ := tapeOf(t, cfs, dir, func(fsys afero.Fs) { c.run(t, fsys, dir) })
			recs := only(tp, OpOpen, c.path)
			if len(recs) != 1 {
				t.Fatalf("%d open records for %s, want 1: %+v", len(recs), c.path, tp.Records)
			}
			r := recs[0]
			if r.Err != "" || r.Unhashed != "" || len(r.Fails) > 0 {
				t.Fatalf("record %s: unexpected failure", r.String())
			}
			if c.wantRead != nil {
				if want := sum(c.wantRead); r.RHash != want || r.RSize != int64(len(c.wantRead)) {
					t.Errorf("read version: got %s size %d, want %s size %d", r.RHash, r.RSize, want, len(c.wantRead))
				}
				if !slices.Equal(r.Spans, c.wantSpans) {
					t.Errorf("spans %v, want %v", r.Spans, c.wantSpans)
				}
			} else if r.RHash != "" {
				t.Errorf("read hash %s recorded for a handle that read nothing", r.RHash)
			}
			if c.written {
				want, size := oracleHash(t, filepath.Join(dir, c.final))
				if r.Hash != want || r.Size != size {
					t.Errorf("result: got %s size %d, os holds %s size %d", r.Hash, r.Size, want, size)
				}
				wantTo := c.final
				if c.final == c.path {
					wantTo = ""
				}
				if r.To != wantTo {
					t.Errorf("To = %q, want %q", r.To, wantTo)
				}
			} else if r.Hash != "" {
				t.Errorf("result hash %s recorded for a handle that changed nothing", r.Hash)
			}
			if got := cfs.read.Load(); c.maxInnerRead >= 0 && got > c.maxInnerRead {
				t.Errorf("caller and recorder read %d bytes, more than %d: something was read twice", got, c.maxInnerRead)
			}
		})
	}
}

// TestContentHashesMemMapFs runs the same cases on afero's in-memory fs:
// the oracle is the bytes that fs holds afterwards.
func TestContentHashesMemMapFs(t *testing.T) {
	for _, c := range contentCases() {
		t.Run(c.name, func(t *testing.T) {
			mem := afero.NewMemMapFs()
			dir := "/root"
			must(t, mem.MkdirAll(dir, 0o755))
			for p, b := range c.setup {
				must(t, mem.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
				must(t, afero.WriteFile(mem, filepath.Join(dir, p), b, 0o644))
			}
			tp, _ := tapeOf(t, mem, dir, func(fsys afero.Fs) { c.run(t, fsys, dir) })
			r := only(tp, OpOpen, c.path)[0]
			if c.wantRead != nil && r.RHash != sum(c.wantRead) {
				t.Errorf("read version %s, want %s", r.RHash, sum(c.wantRead))
			}
			if c.written {
				b, err := afero.ReadFile(mem, filepath.Join(dir, c.final))
				must(t, err)
				if r.Hash != sum(b) || r.Size != int64(len(b)) {
					t.Errorf("result: got %s size %d, fs holds %s size %d", r.Hash, r.Size, sum(b), len(b))
				}
			}
		})
	}
}

// TestBufferSizesDoNotShow copies a file with different buffer sizes: the
// tapes are identical because a handle is one record.
func TestBufferSizesDoNotShow(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "in"), pattern(100<<10, 3))
	var tapes []*Tape
	for _, size := range []int{512, 4096, 32 << 10, 1 << 20} {
		tp, _ := tapeOf(t, afero.NewOsFs(), dir, func(fsys afero.Fs) {
			in, err := fsys.Open(filepath.Join(dir, "in"))
			must(t, err)
			out, err := fsys.Create(filepath.Join(dir, "out"))
			must(t, err)
			_, err = io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, make([]byte, size))
			must(t, err)
			must(t, in.Close())
			must(t, out.Close())
		})
		tapes = append(tapes, tp)
	}
	for i := 1; i < len(tapes); i++ {
		if c, d := Classify(tapes[0], tapes[i]); c != Identical {
			t.Errorf("buffer size %d: %v\n%v", i, c, d)
		}
	}
}

// TestRemovedWhileOpen: the bytes of a write-only handle whose file was
// removed cannot be read back; the record says why instead of lying.
func TestRemovedWhileOpen(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a"), pattern(5000, 4))
	tp, _ := tapeOf(t, afero.NewOsFs(), dir, func(fsys afero.Fs) {
		f, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_WRONLY, 0)
		must(t, err)
		_, err = f.WriteAt([]byte("x"), 10)
		must(t, err)
		must(t, fsys.Remove(filepath.Join(dir, "a")))
		must(t, f.Close())
	})
	r := only(tp, OpOpen, "a")[0]
	if r.Hash != "" || r.Unhashed != OutcomeNotExist {
		t.Fatalf("record %s: want no hash and unhashed=%s", r.String(), OutcomeNotExist)
	}
}

// TestRenamedOverWhileOpen: nor those of one whose name another file was
// renamed over: reading the name back would hash that other file.
func TestRenamedOverWhileOpen(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a"), pattern(5000, 4))
	mustWrite(t, filepath.Join(dir, "b"), pattern(5000, 5))
	tp, _ := tapeOf(t, afero.NewOsFs(), dir, func(fsys afero.Fs) {
		f, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_WRONLY, 0)
		must(t, err)
		_, err = f.WriteAt([]byte("x"), 10)
		must(t, err)
		must(t, fsys.Rename(filepath.Join(dir, "b"), filepath.Join(dir, "a")))
		must(t, f.Close())
	})
	r := only(tp, OpOpen, "a")[0]
	if r.Hash != "" || r.Unhashed != OutcomeNotExist || r.To != OutsidePath {
		t.Fatalf("record %s: want no hash, unhashed=%s and to=%s", r.String(), OutcomeNotExist, OutsidePath)
	}
}

// TestUnclosedFlushed: handles never closed appear at Recorder.Close, in
// open order, with their content hashed.
func TestUnclosedFlushed(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "r"), pattern(9000, 5))
	var keep []afero.File
	tp, _ := tapeOf(t, afero.NewOsFs(), dir, func(fsys afero.Fs) {
		f, err := fsys.Create(filepath.Join(dir, "w"))
		must(t, err)
		_, err = f.Write([]byte("never closed"))
		must(t, err)
		g, err := fsys.Open(filepath.Join(dir, "r"))
		must(t, err)
		_, err = g.Read(make([]byte, 10))
		must(t, err)
		keep = append(keep, f, g)
	})
	defer func() {
		for _, f := range keep {
			f.Close()
		}
	}()
	opens := only(tp, OpOpen, "")
	if len(opens) != 2 || opens[0].Path != "w" || opens[1].Path != "r" {
		t.Fatalf("want unclosed w then r, got %v", tp.Canon(ModeGlobal))
	}
	for _, r := range opens {
		if r.End != "unclosed" {
			t.Errorf("%s: End = %q, want unclosed", r.String(), r.End)
		}
	}
	if want, _ := oracleHash(t, filepath.Join(dir, "w")); opens[0].Hash != want {
		t.Errorf("unclosed writer hash %s, os holds %s", opens[0].Hash, want)
	}
	if want, _ := oracleHash(t, filepath.Join(dir, "r")); opens[1].RHash != want {
		t.Errorf("unclosed reader hash %s, os holds %s", opens[1].RHash, want)
	}
	// Closing after the recorder closed still closes the inner handle:
	// a second Close then fails as os's does.
	for _, f := range keep {
		if err := f.Close(); err != nil {
			t.Errorf("late Close: %v", err)
		}
		if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
			t.Errorf("second late Close: %v, want fs.ErrClosed", err)
		}
	}
	keep = nil
}

func TestMergeSpans(t *testing.T) {
	got := mergeSpans([]Span{{100, 10}, {0, 50}, {40, 20}, {60, 5}, {200, 0}, {300, 1}})
	want := []Span{{0, 65}, {100, 10}, {200, 0}, {300, 1}}
	if !slices.Equal(got, want) {
		t.Errorf("mergeSpans = %v, want %v", got, want)
	}
}

// TestConcurrentReadAt: goroutines reading one handle with ReadAt in any
// order record the same spans and the whole-file hash.
func TestConcurrentReadAt(t *testing.T) {
	dir := t.TempDir()
	data := pattern(256<<10, 11)
	mustWrite(t, filepath.Join(dir, "f"), data)
	tp, _ := tapeOf(t, afero.NewOsFs(), dir, func(fsys afero.Fs) {
		f, err := fsys.Open(filepath.Join(dir, "f"))
		must(t, err)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				p := make([]byte, 8<<10)
				f.ReadAt(p, int64(i)*(32<<10))
			})
		}
		wg.Wait()
		must(t, f.Close())
	})
	r := only(tp, OpOpen, "f")[0]
	var want []Span
	for i := range 8 {
		want = append(want, Span{int64(i) * (32 << 10), 8 << 10})
	}
	if !slices.Equal(r.Spans, want) || r.RHash != sum(data) {
		t.Errorf("record %s", r.String())
	}
}

// TestUnclosedAmongClosed: of many handles closed in random order, those
// never closed (first, last and in between of the open list) are flushed
// by Recorder.Close once each, in open order, after every closed one; a
// closed handle makes one record.
func TestUnclosedAmongClosed(t *testing.T) {
	const n = 60
	mem := afero.NewMemMapFs()
	for i := range n {
		must(t, afero.WriteFile(mem, fmt.Sprintf("/r/f%02d", i), []byte{byte(i)}, 0o644))
	}
	rng := rand.New(rand.NewPCG(14, 4))
	var keep []afero.File
	tp, _ := tapeOf(t, mem, "/r", func(fsys afero.Fs) {
		hs := make([]afero.File, n)
		for i := range hs {
			h, err := fsys.Open(fmt.Sprintf("/r/f%02d", i))
			must(t, err)
			hs[i] = h
		}
		for _, i := range rng.Perm(n) {
			if i%3 == 0 || i == n-1 {
				keep = append(keep, hs[i])
				continue
			}
			must(t, hs[i].Close())
		}
	})
	var closed, unclosed []string
	for _, r := range only(tp, OpOpen, "") {
		if r.End == "unclosed" {
			unclosed = append(unclosed, r.Path)
		} else {
			if len(unclosed) > 0 {
				t.Fatalf("closed %s recorded after an unclosed handle", r.Path)
			}
			closed = append(closed, r.Path)
		}
	}
	var want []string
	for i := range n {
		if i%3 == 0 || i == n-1 {
			want = append(want, fmt.Sprintf("f%02d", i))
		}
	}
	if !slices.Equal(unclosed, want) {
		t.Errorf("unclosed handles flushed as %v, want %v", unclosed, want)
	}
	if len(closed)+len(unclosed) != n || len(closed) != len(slices.Compact(slices.Sorted(slices.Values(closed)))) {
		t.Errorf("%d closed and %d unclosed records, want %d in all, each once", len(closed), len(unclosed), n)
	}
	for _, f := range keep {
		must(t, f.Close())
	}
}

// TestCloseRacesRecorderClose: handles closed while Recorder.Close runs
// (run with -race) are each recorded at most once, either as closed or as
// unclosed; every Close of a handle succeeds once, as os's does; and the
// tape is whole and verifies.
func TestCloseRacesRecorderClose(t *testing.T) {
	mem := afero.NewMemMapFs()
	const G, N = 4, 50
	for i := range G * N {
		must(t, afero.WriteFile(mem, fmt.Sprintf("/r/f%03d", i), []byte{byte(i)}, 0o644))
	}
	for round := range 20 {
		var buf bytes.Buffer
		rec := NewRecorder(&buf)
		fsys := rec.Wrap(mem, "/r")
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range G {
			wg.Go(func() {
				<-start
				for i := range N {
					h, err := fsys.Open(fmt.Sprintf("/r/f%03d", g*N+i))
					if err != nil {
						t.Error(err)
						return
					}
					h.Read(make([]byte, 4))
					if err := h.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				}
			})
		}
		close(start)
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		tp, err := Read(&buf)
		if err != nil || tp.Truncated {
			t.Fatalf("round %d: Read: %v (truncated %v)", round, err, tp != nil && tp.Truncated)
		}
		seen := map[string]bool{}
		for _, r := range tp.Records {
			if seen[r.Path] {
				t.Fatalf("round %d: %s recorded twice", round, r.Path)
			}
			seen[r.Path] = true
		}
	}
}

// TestRenamedWhileOpenOtherSpelling: a write-only handle opened by a
// relative name follows a rename spelled with absolute names: its record
// names the new path and hashes what os left there (the oracle: the file
// read back after the run).
func TestRenamedWhileOpenOtherSpelling(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a"), pattern(5000, 4))
	t.Chdir(dir)
	tp, _ := tapeOf(t, afero.NewOsFs(), dir, func(fsys afero.Fs) {
		f, err := fsys.OpenFile("a", os.O_WRONLY, 0)
		must(t, err)
		_, err = f.WriteAt([]byte("x"), 10)
		must(t, err)
		must(t, fsys.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")))
		must(t, f.Close())
	})
	want, err := os.ReadFile(filepath.Join(dir, "b"))
	must(t, err)
	r := only(tp, OpOpen, "a")[0]
	if r.To != "b" || r.Hash != HashBytes(want) {
		t.Fatalf("record %s: want to=b and the hash of b's %d bytes", r.String(), len(want))
	}
}
