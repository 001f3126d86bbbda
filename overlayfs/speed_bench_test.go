package overlayfs_test

// The performance table of issue 14: every row runs cowfs and its peer in the
// same benchmark, interleaved in rounds, and reports the median over the
// rounds. `go run ./internal/perftable` runs these and prints the README's
// table:
//
//	go test -run '^$' -bench '^BenchmarkTable' -count 3 ./overlayfs/
//
// Metrics per row (b.ReportMetric):
//
//	ns/cowfs, ns/peer  median of the rounds' per-operation times
//	ratio              median of the rounds' cowfs/peer ratios
//	allocs/cowfs, allocs/peer, B/cowfs, B/peer
//	                   heap allocations and bytes per operation, each side
//	                   measured alone
//
// Rows marked "friendly" are the cases the README's first table measured
// (an empty layer, Reset instead of New, new names); they are kept for
// comparison and labelled as such in the table.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cowfs/cowfs/tape"
	"github.com/spf13/afero"
)

// side is one half of a row: op(i) is the i-th operation; prepare, when set,
// runs untimed before every round (a fresh layer for "new files").
type side struct {
	prepare func()
	op      func(i int)
}

// batchFor picks a round size so a round of the cheaper side takes about
// 100 µs: long enough that the clock's cost vanishes, short enough for many
// rounds.
func batchFor(op func(int)) int {
	start := time.Now()
	n := 0
	for time.Since(start) < 200*time.Microsecond {
		op(n)
		n++
	}
	return max(1, n/2)
}

// interleave runs ours and peer alternately in rounds of the same number of
// operations (which side goes first alternates too) until b.Loop ends, and
// reports the medians. Allocations are measured per side, outside the timed
// rounds.
func interleave(b *testing.B, ours, peer side) {
	b.Helper()
	// Warm both sides (page cache, pools, lazy initialisation).
	for _, s := range []side{ours, peer} {
		if s.prepare != nil {
			s.prepare()
		}
		for i := range 8 {
			s.op(i)
		}
	}
	oa, ob := allocsPer(ours)
	pa, pb := allocsPer(peer)
	batch := min(batchFor(ours.op), batchFor(peer.op))
	var tOurs, tPeer, ratios []float64
	next := 0
	round := func(s side) float64 {
		if s.prepare != nil {
			s.prepare()
		}
		start := time.Now()
		for i := range batch {
			s.op(next + i)
		}
		return float64(time.Since(start).Nanoseconds()) / float64(batch)
	}
	k := 0
	for b.Loop() {
		var a, p float64
		if k%2 == 0 {
			a = round(ours)
			p = round(peer)
		} else {
			p = round(peer)
			a = round(ours)
		}
		next += batch
		k++
		tOurs, tPeer, ratios = append(tOurs, a), append(tPeer, p), append(ratios, a/p)
	}
	b.ReportMetric(median(tOurs), "ns/cowfs")
	b.ReportMetric(median(tPeer), "ns/peer")
	b.ReportMetric(median(ratios), "ratio")
	b.ReportMetric(oa, "allocs/cowfs")
	b.ReportMetric(pa, "allocs/peer")
	b.ReportMetric(ob, "B/cowfs")
	b.ReportMetric(pb, "B/peer")
	b.ReportMetric(float64(batch), "ops/round")
}

// allocsPer is the mean number and bytes of heap allocations of one op.
func allocsPer(s side) (allocs, bytes float64) {
	const n = 64
	if s.prepare != nil {
		s.prepare()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		s.op(1<<20 + i)
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / n, float64(after.TotalAlloc-before.TotalAlloc) / n
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func must(b testing.TB, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

var data4K = bytes.Repeat([]byte("0123456789abcdef"), size4K/16)

// tableRoot is a lower tree with the files the rows read:
//
//	file4k                 4 KiB
//	deep/d01/.../d32/f     a file 32 directories deep
//	dir1k/                 1,000 files
//	dir10k/                10,000 files
//	tree/                  10,000 files in 100 directories
//
// The big directories are made only when big is set.
func tableRoot(b *testing.B, big bool) string {
	b.Helper()
	root := b.TempDir()
	must(b, os.WriteFile(filepath.Join(root, "file4k"), data4K, 0o644))
	deep := filepath.Join(root, "deep")
	for i := 1; i <= 32; i++ {
		deep = filepath.Join(deep, fmt.Sprintf("d%02d", i))
	}
	must(b, os.MkdirAll(deep, 0o755))
	must(b, os.WriteFile(filepath.Join(deep, "f"), []byte("deep"), 0o644))
	fill := func(dir string, n int) {
		must(b, os.MkdirAll(dir, 0o755))
		for i := range n {
			must(b, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), []byte("x"), 0o644))
		}
	}
	fill(filepath.Join(root, "dir1k"), 1000)
	if big {
		fill(filepath.Join(root, "dir10k"), 10000)
		for d := range 100 {
			fill(filepath.Join(root, "tree", fmt.Sprintf("d%03d", d)), 100)
		}
	}
	must(b, os.MkdirAll(filepath.Join(root, "layer"), 0o755))
	return root
}

// nonEmpty gives c a layer of 100 files in their own directory, so Stat
// and reads cannot take an empty layer's shortcut.
func nonEmpty(b *testing.B, c afero.Fs, root string) {
	b.Helper()
	for i := range 100 {
		must(b, afero.WriteFile(c, filepath.Join(root, "layer", fmt.Sprintf("w%03d", i)), []byte("w"), 0o644))
	}
}

func readFileOp(b *testing.B, fsys afero.Fs, name string) func(int) {
	return func(int) {
		if _, err := afero.ReadFile(fsys, name); err != nil {
			b.Fatal(err)
		}
	}
}

func statOp(b *testing.B, stat func(string) (os.FileInfo, error), name string) func(int) {
	return func(int) {
		if _, err := stat(name); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTableReadFile4K(b *testing.B) {
	root := tableRoot(b, false)
	name := filepath.Join(root, "file4k")
	osSide := side{op: func(int) {
		if _, err := os.ReadFile(name); err != nil {
			b.Fatal(err)
		}
	}}
	b.Run("layer=nonempty", func(b *testing.B) {
		c := newCow(b, root)
		nonEmpty(b, c, root)
		interleave(b, side{op: readFileOp(b, c, name)}, osSide)
	})
	b.Run("layer=empty/friendly", func(b *testing.B) {
		interleave(b, side{op: readFileOp(b, newCow(b, root), name)}, osSide)
	})
	// The floor: afero.ReadFile (a Stat, a buffer of size+512, reads until
	// EOF) over afero's plain OsFs, which any afero.Fs pays against
	// os.ReadFile.
	b.Run("floor=afero.OsFs", func(b *testing.B) {
		interleave(b, side{op: readFileOp(b, afero.NewOsFs(), name)}, osSide)
	})
}

func BenchmarkTableStat(b *testing.B) {
	root := tableRoot(b, false)
	name := filepath.Join(root, "file4k")
	b.Run("layer=nonempty", func(b *testing.B) {
		c := newCow(b, root)
		nonEmpty(b, c, root)
		interleave(b, side{op: statOp(b, c.Stat, name)}, side{op: statOp(b, os.Stat, name)})
	})
	// The realistic neighbour: the test wrote its files beside the one
	// it stats, so the directory has layer entries (not one of its name).
	b.Run("layer=samedir", func(b *testing.B) {
		c := newCow(b, root)
		for i := range 100 {
			must(b, afero.WriteFile(c, filepath.Join(root, fmt.Sprintf("w%03d", i)), []byte("w"), 0o644))
		}
		interleave(b, side{op: statOp(b, c.Stat, name)}, side{op: statOp(b, os.Stat, name)})
	})
	b.Run("depth=32", func(b *testing.B) {
		c := newCow(b, root)
		nonEmpty(b, c, root)
		deep := filepath.Join(root, "deep")
		for i := 1; i <= 32; i++ {
			deep = filepath.Join(deep, fmt.Sprintf("d%02d", i))
		}
		deep = filepath.Join(deep, "f")
		interleave(b, side{op: statOp(b, c.Stat, deep)}, side{op: statOp(b, os.Stat, deep)})
	})
	b.Run("layer=empty/friendly", func(b *testing.B) {
		c := newCow(b, root)
		interleave(b, side{op: statOp(b, c.Stat, name)}, side{op: statOp(b, os.Stat, name)})
	})
}

// writeSide writes 4 KiB files into fsys: cycling over 64 names (overwrite)
// or a new name each time; fresh makes a new, empty fsys before each round
// (untimed), which has written two files already: what a fresh file system
// does once (an overlay reads the umask at its first creation, lstats the
// names of its first two misses in a lower directory and lists that
// directory at the second, see missed) is the rows of New + first create,
// not spread over a round of a size the clock picks.
func writeSide(b *testing.B, fsys *afero.Fs, dir string, cycle int, fresh func() afero.Fs) side {
	s := side{op: func(i int) {
		if cycle > 0 {
			i %= cycle
		}
		if err := afero.WriteFile(*fsys, filepath.Join(dir, fmt.Sprintf("w%07d", i)), data4K, 0o644); err != nil {
			b.Fatal(err)
		}
	}}
	if fresh != nil {
		s.prepare = func() {
			*fsys = fresh()
			must(b, afero.WriteFile(*fsys, filepath.Join(dir, "first"), data4K, 0o644))
			must(b, afero.WriteFile(*fsys, filepath.Join(dir, "second"), data4K, 0o644))
		}
	}
	return s
}

func BenchmarkTableWriteFile4K(b *testing.B) {
	root := tableRoot(b, false)
	dir := filepath.Join(root, "layer")
	memAt := func() afero.Fs {
		m := afero.NewMemMapFs()
		must(b, m.MkdirAll(dir, 0o755))
		return m
	}
	b.Run("overwrite-64", func(b *testing.B) {
		var c, m afero.Fs = newCow(b, root), memAt()
		nonEmpty(b, c, root)
		nonEmpty(b, m, root)
		interleave(b, writeSide(b, &c, dir, 64, nil), writeSide(b, &m, dir, 64, nil))
	})
	b.Run("new", func(b *testing.B) {
		var c, m afero.Fs
		interleave(b,
			writeSide(b, &c, dir, 0, func() afero.Fs { return newCow(b, root) }),
			writeSide(b, &m, dir, 0, memAt))
	})
	// New + the first WriteFile of a new file: the once-per-overlay costs
	// (root, umask, the directory's listing) with one creation, against a
	// fresh afero CopyOnWriteFs doing the same.
	b.Run("New+first", func(b *testing.B) {
		name := filepath.Join(dir, "new-file")
		first := func(fresh func() afero.Fs) side {
			return side{op: func(int) {
				must(b, afero.WriteFile(fresh(), name, data4K, 0o644))
			}}
		}
		interleave(b, first(func() afero.Fs { return newCow(b, root) }), first(aferoCoW))
	})
	// The same in a lower directory of 1,000 files: what a fresh overlay
	// per test pays to add one file beside many.
	b.Run("New+first/dir=1000", func(b *testing.B) {
		name := filepath.Join(root, "dir1k", "new-file")
		first := func(fresh func() afero.Fs) side {
			return side{op: func(int) {
				must(b, afero.WriteFile(fresh(), name, data4K, 0o644))
			}}
		}
		interleave(b, first(func() afero.Fs { return newCow(b, root) }), first(aferoCoW))
	})
}

// appendSide opens name for append on a fresh file system per op and
// appends one line: what a test does with a fresh overlay.
func appendSide(b *testing.B, fresh func() afero.Fs, name string) side {
	return side{op: func(int) {
		fsys := fresh()
		f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write([]byte("appended line\n")); err != nil {
			b.Fatal(err)
		}
		must(b, f.Close())
	}}
}

func BenchmarkTableNewAppend(b *testing.B) {
	root := tableRoot(b, false)
	name := filepath.Join(root, "file4k")
	peer := appendSide(b, aferoCoW, name)
	b.Run("New", func(b *testing.B) {
		interleave(b, appendSide(b, func() afero.Fs { return newCow(b, root) }, name), peer)
	})
	b.Run("Reset/friendly", func(b *testing.B) {
		c := newCow(b, root)
		interleave(b, appendSide(b, func() afero.Fs { c.Reset(); return c }, name), peer)
	})
}

func readdirOp(b *testing.B, open func(string) (afero.File, error), dir string, names bool) func(int) {
	return func(int) {
		f, err := open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if names {
			_, err = f.Readdirnames(-1)
		} else {
			_, err = f.Readdir(-1)
		}
		if err != nil {
			b.Fatal(err)
		}
		must(b, f.Close())
	}
}

func osOpen(name string) (afero.File, error) { return os.Open(name) }

func BenchmarkTableReaddir(b *testing.B) {
	root := tableRoot(b, true)
	for _, r := range []struct {
		name, dir string
		names     bool
	}{
		{"Readdir/entries=1000", "dir1k", false},
		{"Readdir/entries=10000", "dir10k", false},
		{"Readdirnames/entries=10000", "dir10k", true},
	} {
		b.Run(r.name, func(b *testing.B) {
			dir := filepath.Join(root, r.dir)
			c := newCow(b, root)
			nonEmpty(b, c, root)
			// All lower but one: one name comes from the layer.
			must(b, afero.WriteFile(c, filepath.Join(dir, "layer-file"), []byte("l"), 0o644))
			interleave(b, side{op: readdirOp(b, c.Open, dir, r.names)}, side{op: readdirOp(b, osOpen, dir, r.names)})
		})
	}
}

func BenchmarkTableWalk10k(b *testing.B) {
	root := tableRoot(b, true)
	tree := filepath.Join(root, "tree")
	c := newCow(b, root)
	nonEmpty(b, c, root)
	osfs := afero.NewOsFs()
	walk := func(fsys afero.Fs) func(int) {
		return func(int) {
			n := 0
			must(b, afero.Walk(fsys, tree, func(_ string, _ os.FileInfo, err error) error {
				n++
				return err
			}))
			if n != 10101 {
				b.Fatalf("walk saw %d entries, want 10101", n)
			}
		}
	}
	interleave(b, side{op: walk(c)}, side{op: walk(osfs)})
}

// BenchmarkTableTape: recording on vs off over the same overlay: the peer
// is the bare overlay. The taped side writes its tape to a file, as
// package helpers does under COWFS_TAPE_DIR, with the same options; the
// tape=discard rows write to io.Discard (friendly: no system call).
func BenchmarkTableTape(b *testing.B) {
	root := tableRoot(b, false)
	name := filepath.Join(root, "file4k")
	c := newCow(b, root)
	nonEmpty(b, c, root)
	toFile := func(b *testing.B) afero.Fs {
		f, err := os.Create(filepath.Join(b.TempDir(), "bench.tape"))
		must(b, err)
		return tapedTo(b, c, root, f, f.Close)
	}
	toDiscard := func(b *testing.B) afero.Fs { return tapedTo(b, c, root, io.Discard, nil) }
	for _, w := range []struct {
		suffix string
		taped  func(*testing.B) afero.Fs
	}{{"", toFile}, {"/tape=discard/friendly", toDiscard}} {
		b.Run("ReadFile4K"+w.suffix, func(b *testing.B) {
			interleave(b, side{op: readFileOp(b, w.taped(b), name)}, side{op: readFileOp(b, c, name)})
		})
		b.Run("Stat"+w.suffix, func(b *testing.B) {
			interleave(b, side{op: statOp(b, w.taped(b).Stat, name)}, side{op: statOp(b, c.Stat, name)})
		})
	}
}

// tapedTo wraps c in a recorder writing to w; the recorder is closed, then
// done (when not nil) is called, when b ends.
func tapedTo(b *testing.B, c afero.Fs, root string, w io.Writer, done func() error) afero.Fs {
	rec := tape.NewRecorder(w, tape.WithBuffer(tape.DefaultBufferSize, tape.DefaultFlushInterval))
	b.Cleanup(func() {
		must(b, rec.Close())
		if done != nil {
			must(b, done())
		}
	})
	return rec.Wrap(c, root)
}

// BenchmarkTableHeapPerFile: heap held per 16-byte file in the layer vs in
// a MemMapFs, measured over 10,000 files after a GC. Not timed: the ratio
// is of bytes.
func BenchmarkTableHeapPerFile(b *testing.B) {
	root := tableRoot(b, false)
	dir := filepath.Join(root, "layer")
	const n = 10000
	payload := []byte("0123456789abcdef")
	held := func(fresh func() afero.Fs) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		fsys := fresh()
		for i := range n {
			must(b, afero.WriteFile(fsys, filepath.Join(dir, fmt.Sprintf("h%05d", i)), payload, 0o644))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(fsys)
		return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
	}
	var ours, peer []float64
	for b.Loop() {
		ours = append(ours, held(func() afero.Fs { return newCow(b, root) }))
		peer = append(peer, held(func() afero.Fs {
			m := afero.NewMemMapFs()
			must(b, m.MkdirAll(dir, 0o755))
			return m
		}))
	}
	b.ReportMetric(median(ours), "B/cowfs")
	b.ReportMetric(median(peer), "B/peer")
	b.ReportMetric(median(ours)/median(peer), "ratio")
}

// BenchmarkTableChanges: Changes of a 100,000-entry layer: 1,000 new
// directories of 99 files each, plus 1,000 modified lower files. No peer:
// the goal is absolute.
func BenchmarkTableChanges(b *testing.B) {
	root := tableRoot(b, false)
	c := newCow(b, root)
	for d := range 1000 {
		dir := filepath.Join(root, "layer", fmt.Sprintf("n%04d", d))
		must(b, c.Mkdir(dir, 0o755))
		for i := range 99 {
			must(b, afero.WriteFile(c, filepath.Join(dir, fmt.Sprintf("f%02d", i)), []byte("n"), 0o644))
		}
	}
	for i := range 1000 {
		must(b, afero.WriteFile(c, filepath.Join(root, "dir1k", fmt.Sprintf("f%05d", i)), []byte("m"), 0o644))
	}
	want := len(c.Changes())
	if want < 100000 {
		b.Fatalf("Changes listed %d entries, want at least 100,000", want)
	}
	b.ReportAllocs()
	var times []float64
	for b.Loop() {
		start := time.Now()
		if got := len(c.Changes()); got != want {
			b.Fatalf("Changes listed %d, then %d", want, got)
		}
		times = append(times, float64(time.Since(start).Nanoseconds()))
	}
	b.ReportMetric(median(times), "ns/cowfs")
}
