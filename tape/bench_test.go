package tape

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/zeebo/blake3"
)

// readFixture writes 100 files of sizes spread log-uniformly over
// 4 KiB–1 MiB and returns their names and total size.
func readFixture(b *testing.B) ([]string, int64) {
	dir := b.TempDir()
	var names []string
	var total int64
	for i := range 100 {
		size := int(4096 * math.Pow(256, float64(i)/99)) // 4 KiB .. 1 MiB
		name := filepath.Join(dir, fmt.Sprintf("f%03d", i))
		if err := os.WriteFile(name, pattern(size, byte(i)), 0o644); err != nil {
			b.Fatal(err)
		}
		names = append(names, name)
		total += int64(size)
	}
	return names, total
}

// BenchmarkReadHeavy: 1,000 whole-file reads (afero.ReadFile) of 4 KiB–1 MiB
// files per op, with recording off and on. The ratio recorded/OsFs is the
// cost of recording, hashing included; the goal is ≤ 1.3×.
func BenchmarkReadHeavy(b *testing.B) {
	names, total := readFixture(b)
	dir := filepath.Dir(names[0])
	const reads = 1000
	perOp := total * reads / int64(len(names))
	run := func(b *testing.B, fsys func() (afero.Fs, func())) {
		b.ReportAllocs()
		defer reportCPU(b)()
		b.SetBytes(perOp)
		for b.Loop() {
			f, done := fsys()
			for i := range reads {
				if _, err := afero.ReadFile(f, names[i%len(names)]); err != nil {
					b.Fatal(err)
				}
			}
			done()
		}
	}
	b.Run("os.ReadFile", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		b.SetBytes(perOp)
		for b.Loop() {
			for i := range reads {
				if _, err := os.ReadFile(names[i%len(names)]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("OsFs", func(b *testing.B) {
		run(b, func() (afero.Fs, func()) { return afero.NewOsFs(), func() {} })
	})
	b.Run("MemMapFs", func(b *testing.B) {
		mem := afero.NewMemMapFs()
		for _, n := range names {
			data, _ := os.ReadFile(n)
			afero.WriteFile(mem, n, data, 0o644)
		}
		run(b, func() (afero.Fs, func()) { return mem, func() {} })
	})
	b.Run("recorded-OsFs", func(b *testing.B) {
		run(b, func() (afero.Fs, func()) {
			rec := NewRecorder(io.Discard)
			return rec.Wrap(afero.NewOsFs(), dir), func() { rec.Close() }
		})
	})
	b.Run("recorded-OsFs-to-file", func(b *testing.B) {
		tapeFile := filepath.Join(b.TempDir(), "bench.tape")
		run(b, func() (afero.Fs, func()) {
			f, err := os.Create(tapeFile)
			if err != nil {
				b.Fatal(err)
			}
			rec := NewRecorder(f)
			return rec.Wrap(afero.NewOsFs(), dir), func() { rec.Close(); f.Close() }
		})
	})
}

// BenchmarkHash1MiB: raw blake3.Sum256 against the recorder's streaming
// hasher fed in 32 KiB pieces (what io.Copy hands it), and against a whole
// recorded read from memory, where hashing is the only extra work. Goal:
// streaming at ≥ 80% of raw throughput.
func BenchmarkHash1MiB(b *testing.B) {
	data := pattern(1<<20, 1)
	b.Run("blake3.Sum256", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			blake3.Sum256(data)
		}
	})
	b.Run("stream-32KiB", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		b.SetBytes(int64(len(data)))
		p := newPools()
		for b.Loop() {
			s := stream{p: p}
			for off := 0; off < len(data); off += 32 << 10 {
				s.feed(data[off : off+32<<10])
			}
			s.sum()
			s.release()
		}
	})
	mem := afero.NewMemMapFs()
	afero.WriteFile(mem, "/r/f", data, 0o644)
	buf := make([]byte, len(data))
	read := func(b *testing.B, fsys afero.Fs) {
		b.ReportAllocs()
		defer reportCPU(b)()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			f, err := fsys.Open("/r/f")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(f, buf); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	}
	b.Run("MemMapFs-read", func(b *testing.B) { read(b, mem) })
	b.Run("recorded-MemMapFs-read", func(b *testing.B) {
		rec := NewRecorder(io.Discard)
		read(b, rec.Wrap(mem, "/r"))
		rec.Close()
	})
}

// BenchmarkWrite1MiB: writing a 1 MiB file sequentially (hashed as it
// flows) and patching 16 bytes in its middle with WriteAt (which forces a
// read-back of the whole file at Close: the unavoidable case).
func BenchmarkWrite1MiB(b *testing.B) {
	dir := b.TempDir()
	data := pattern(1<<20, 2)
	name := filepath.Join(dir, "f")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		b.Fatal(err)
	}
	seq := func(b *testing.B, fsys afero.Fs) {
		b.ReportAllocs()
		defer reportCPU(b)()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := afero.WriteFile(fsys, name, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	patch := func(b *testing.B, fsys afero.Fs) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			f, err := fsys.OpenFile(name, os.O_RDWR, 0)
			if err != nil {
				b.Fatal(err)
			}
			f.WriteAt([]byte("0123456789abcdef"), 1<<19)
			f.Close()
		}
	}
	recorded := func() afero.Fs { return NewRecorder(io.Discard).Wrap(afero.NewOsFs(), dir) }
	b.Run("sequential/OsFs", func(b *testing.B) { seq(b, afero.NewOsFs()) })
	b.Run("sequential/recorded", func(b *testing.B) { seq(b, recorded()) })
	b.Run("patch-middle/OsFs", func(b *testing.B) { patch(b, afero.NewOsFs()) })
	b.Run("patch-middle/recorded", func(b *testing.B) { patch(b, recorded()) })
}

// BenchmarkCompare: classifying two 20,000-record tapes that differ by one
// record in the middle.
func BenchmarkCompare(b *testing.B) {
	mk := func(extra bool) *Tape {
		t := &Tape{}
		for i := range 20000 {
			if extra && i == 10000 {
				t.Records = append(t.Records, Record{Op: OpStat, Path: "extra", Err: OutcomeNotExist})
			}
			t.Records = append(t.Records, Record{Op: OpOpen, Path: fmt.Sprintf("d%d/f%d", i%50, i), Flag: "r",
				RHash: HashBytes([]byte{byte(i)}), RSize: int64(i)})
		}
		for i := range t.Records {
			t.Records[i].Seq = int64(i + 1)
		}
		return t
	}
	x, y := mk(false), mk(true)
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		if c, _ := Classify(x, y); c != Data {
			b.Fatal(c)
		}
	}
}

// statStub is an afero.Fs whose Stat returns one FileInfo at no cost, so
// BenchmarkRecordStat measures what recording adds to a Stat and nothing
// else.
type statStub struct {
	afero.Fs
	fi os.FileInfo
}

func (s statStub) Stat(string) (os.FileInfo, error) { return s.fi, nil }

// BenchmarkRecordStat: the cost of recording one successful Stat of a
// regular file (path mapping, encoding, chain hash, lock, write to
// io.Discard), over an inner Fs that costs nothing.
func BenchmarkRecordStat(b *testing.B) {
	dir := b.TempDir()
	name := filepath.Join(dir, "file4k")
	if err := os.WriteFile(name, make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(name)
	if err != nil {
		b.Fatal(err)
	}
	rec := NewRecorder(io.Discard)
	defer rec.Close()
	fsys := rec.Wrap(statStub{fi: fi}, dir)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fsys.Stat(name); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordReadFile4K: afero.ReadFile of one 4 KiB file on OsFs,
// bare and recorded: the difference is what recording adds to a whole
// open, fstat, read and close of a file whose version hash is cached.
func BenchmarkRecordReadFile4K(b *testing.B) {
	dir := b.TempDir()
	name := filepath.Join(dir, "file4k")
	if err := os.WriteFile(name, pattern(4096, 1), 0o644); err != nil {
		b.Fatal(err)
	}
	// Old enough that its version key is not racy: the hash is reused.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(name, old, old); err != nil {
		b.Fatal(err)
	}
	rec := NewRecorder(io.Discard)
	defer rec.Close()
	for _, c := range []struct {
		name string
		fsys afero.Fs
	}{{"bare", afero.NewOsFs()}, {"recorded", rec.Wrap(afero.NewOsFs(), dir)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := afero.ReadFile(c.fsys, name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
