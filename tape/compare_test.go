package tape

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/afero"
)

// fixture writes the input tree of the scenario programs.
func fixture(t *testing.T, root string) {
	t.Helper()
	mustWrite(t, filepath.Join(root, "config.txt"), []byte("mode=fast\n"))
	for i := range 6 {
		mustWrite(t, filepath.Join(root, "in", fmt.Sprintf("item-%d.txt", i)), pattern(1000+i*3000, byte(i)))
	}
	must(t, os.MkdirAll(filepath.Join(root, "out"), 0o755))
}

type progOpts struct {
	sortListing bool // sort the directory listing before using it
	mapOrder    bool // write a summary by ranging over a map
	extraStat   bool // one extra Stat in the middle
}

// program is the code under test of the scenarios: it reads a config,
// lists its inputs, copies each to out/ and writes an index.
func program(t *testing.T, fsys afero.Fs, root string, o progOpts) {
	p := func(n string) string { return filepath.Join(root, n) }
	if _, err := afero.ReadFile(fsys, p("config.txt")); err != nil {
		t.Fatal(err)
	}
	d, err := fsys.Open(p("in"))
	must(t, err)
	names, err := d.Readdirnames(-1)
	must(t, err)
	must(t, d.Close())
	if o.sortListing {
		slices.Sort(names)
	}
	sizes := map[string]int{}
	for i, n := range names {
		if o.extraStat && i == len(names)/2 {
			fsys.Stat(p("in/" + n + ".bak"))
		}
		b, err := afero.ReadFile(fsys, p("in/"+n))
		must(t, err)
		sizes[n] = len(b)
		must(t, afero.WriteFile(fsys, p("out/"+n), bytes.ToUpper(b), 0o644))
	}
	must(t, afero.WriteFile(fsys, p("out/index.txt"), []byte(strings.Join(names, "\n")), 0o644))
	if o.mapOrder {
		var b strings.Builder
		for n, s := range sizes {
			fmt.Fprintf(&b, "%s %d\n", n, s)
		}
		must(t, afero.WriteFile(fsys, p("out/summary.txt"), []byte(b.String()), 0o644))
	}
}

func runProgram(t *testing.T, fsys afero.Fs, o progOpts) *Tape {
	root := t.TempDir()
	fixture(t, root)
	tp, _ := tapeOf(t, fsys, root, func(w afero.Fs) { program(t, w, root, o) })
	return tp
}

var allModes = []Mode{ModePath, ModeGlobal, ModeSet, ModeFinal}

// TestTwoRootsIdentical: the same deterministic program over two
// different temporary roots records tapes equal in every mode.
func TestTwoRootsIdentical(t *testing.T) {
	o := progOpts{sortListing: true}
	a, b := runProgram(t, afero.NewOsFs(), o), runProgram(t, afero.NewOsFs(), o)
	if len(a.Records) < 20 {
		t.Fatalf("scenario too small: %d records", len(a.Records))
	}
	for _, m := range allModes {
		if d := Compare(a, b, m); d != nil {
			t.Errorf("mode %s: %v", m, d)
		}
	}
	if c, d := Classify(a, b); c != Identical || d != nil {
		t.Errorf("Classify = %v, %v", c, d)
	}
	if a.Trailer.Final != b.Trailer.Final {
		t.Errorf("final digests differ: %s vs %s", a.Trailer.Final, b.Trailer.Final)
	}
	if len(a.Final()) != 7 { // 6 copies and the index
		t.Errorf("final state %q", a.Final())
	}
	// The final state names what os holds.
	root := t.TempDir()
	fixture(t, root)
	c, _ := tapeOf(t, afero.NewOsFs(), root, func(w afero.Fs) { program(t, w, root, o) })
	for _, l := range c.Final() {
		// Nothing proved out/* absent: each is the root's entry
		// written through (lower) with the perm of a file made.
		f := strings.Fields(l)
		want, size := oracleHash(t, filepath.Join(root, f[0]))
		if f[1] != "lower" || f[2] != fmt.Sprintf("size=%d", size) || f[3] != "hash="+want || f[4] != "perm=-rw-r--r--" {
			t.Errorf("final line %q; os holds size %d hash %s", l, size, want)
		}
	}
}

// indexOf returns the position of the first record with op and path.
func seqOf(t *testing.T, tp *Tape, op, path string) int64 {
	t.Helper()
	for _, r := range tp.Records {
		if r.Op == op && r.Path == path {
			return r.Seq
		}
	}
	t.Fatalf("no %s %s record", op, path)
	return 0
}

// TestMapOrderCaught: bytes that depend on map iteration order are a data
// divergence at the write of that file, in every mode.
func TestMapOrderCaught(t *testing.T) {
	o := progOpts{sortListing: true, mapOrder: true}
	a := runProgram(t, afero.NewOsFs(), o)
	var b *Tape
	sumA := only(a, OpOpen, "out/summary.txt")[0].Hash
	for range 100 {
		b = runProgram(t, afero.NewOsFs(), o)
		if only(b, OpOpen, "out/summary.txt")[0].Hash != sumA {
			break
		}
	}
	if only(b, OpOpen, "out/summary.txt")[0].Hash == sumA {
		t.Skip("map iteration gave the same order 100 times")
	}
	for _, m := range allModes {
		d := Compare(a, b, m)
		if d == nil {
			t.Fatalf("mode %s: no divergence", m)
		}
		if d.Class != Data {
			t.Errorf("mode %s: class %v", m, d.Class)
		}
		switch m {
		case ModeFinal:
			if d.Path != "out/summary.txt" || d.Hunks != 1 {
				t.Errorf("final: %v", d)
			}
		default:
			if len(d.A) != 1 || len(d.B) != 1 || d.A[0].Path != "out/summary.txt" || d.B[0].Path != "out/summary.txt" {
				t.Fatalf("mode %s: wrong place:\n%v", m, d)
			}
			if want := seqOf(t, a, OpOpen, "out/summary.txt"); d.A[0].Seq != want {
				t.Errorf("mode %s: record #%d, want #%d", m, d.A[0].Seq, want)
			}
			if d.Hunks != 1 && m != ModeSet || m == ModeSet && d.Hunks != 2 {
				t.Errorf("mode %s: %d hunks", m, d.Hunks)
			}
		}
	}
	if c, _ := Classify(a, b); c != Data {
		t.Errorf("Classify: %v", c)
	}
	s := Compare(a, b, ModePath).String()
	for _, want := range []string{"out/summary.txt", only(a, OpOpen, "out/summary.txt")[0].Hash, only(b, OpOpen, "out/summary.txt")[0].Hash, "class data"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}

// reversedFs lists directories in reverse order: another file system's
// directory order, as ext4 and tmpfs differ.
type reversedFs struct{ afero.Fs }

func (r reversedFs) Open(name string) (afero.File, error) {
	f, err := r.Fs.Open(name)
	if err != nil {
		return nil, err
	}
	return reversedFile{f}, nil
}

type reversedFile struct{ afero.File }

func (f reversedFile) Readdirnames(n int) ([]string, error) {
	names, err := f.File.Readdirnames(n)
	slices.Reverse(names)
	return names, err
}

// TestUnsortedReaddirCaught: the listing itself is recorded sorted, so two
// directory orders give equal listing records; a program that uses the
// order unsorted diverges at the file it writes with it, and one that
// sorts does not diverge at all.
func TestUnsortedReaddirCaught(t *testing.T) {
	a := runProgram(t, afero.NewOsFs(), progOpts{})
	b := runProgram(t, reversedFs{afero.NewOsFs()}, progOpts{})
	la, lb := only(a, OpOpen, "in")[0], only(b, OpOpen, "in")[0]
	if la.Canon() != lb.Canon() || la.N != 6 {
		t.Fatalf("listing records differ or wrong: %s vs %s", la.String(), lb.String())
	}
	d := Compare(a, b, ModePath)
	if d == nil || d.Path != "out/index.txt" || len(d.A) != 1 || len(d.B) != 1 || d.Hunks != 1 {
		t.Fatalf("want one divergence at out/index.txt, got %v", d)
	}
	if want := seqOf(t, a, OpOpen, "out/index.txt"); d.A[0].Seq != want {
		t.Errorf("record #%d, want #%d", d.A[0].Seq, want)
	}
	if c, _ := Classify(a, b); c != Data {
		t.Errorf("Classify: %v", c)
	}

	sorted := progOpts{sortListing: true}
	a, b = runProgram(t, afero.NewOsFs(), sorted), runProgram(t, reversedFs{afero.NewOsFs()}, sorted)
	if c, d := Classify(a, b); c != Identical {
		t.Errorf("sorted program: %v %v", c, d)
	}
}

// racers writes two files from two goroutines; first chooses which runs
// first, so the two runs interleave differently but do the same per file.
func racers(t *testing.T, fsys afero.Fs, root string, first int) {
	var wg sync.WaitGroup
	turn := []chan struct{}{make(chan struct{}), make(chan struct{})}
	for g := range 2 {
		wg.Go(func() {
			<-turn[g]
			name := filepath.Join(root, fmt.Sprintf("g%d.txt", g))
			for i := range 3 {
				must(t, afero.WriteFile(fsys, name, fmt.Appendf(nil, "goroutine %d pass %d", g, i), 0o644))
				fsys.Stat(name)
			}
			if g == first {
				close(turn[1-g])
			}
		})
	}
	close(turn[first])
	wg.Wait()
}

// TestGoroutineRaceInterleavingOnly: two goroutines on two files in a
// different order: equal per path, set and final; different globally.
func TestGoroutineRaceInterleavingOnly(t *testing.T) {
	run := func(first int) *Tape {
		root := t.TempDir()
		tp, _ := tapeOf(t, afero.NewOsFs(), root, func(w afero.Fs) { racers(t, w, root, first) })
		return tp
	}
	a, b := run(0), run(1)
	for _, m := range []Mode{ModePath, ModeSet, ModeFinal} {
		if d := Compare(a, b, m); d != nil {
			t.Errorf("mode %s: %v", m, d)
		}
	}
	d := Compare(a, b, ModeGlobal)
	if d == nil || d.Class != InterleavingOnly {
		t.Fatalf("global: %v", d)
	}
	if c, cd := Classify(a, b); c != InterleavingOnly || cd == nil || cd.Mode != ModeGlobal {
		t.Errorf("Classify: %v %v", c, cd)
	}
}

// TestConcurrentRecording hammers one recorder from many goroutines (run
// with -race): every record is there once, in Seq order, and the tape
// verifies.
func TestConcurrentRecording(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "shared"), pattern(50000, 7))
	const G, N = 8, 20
	tp, _ := tapeOf(t, afero.NewOsFs(), root, func(w afero.Fs) {
		var wg sync.WaitGroup
		for g := range G {
			wg.Go(func() {
				for i := range N {
					name := filepath.Join(root, fmt.Sprintf("g%d-%d", g, i))
					afero.WriteFile(w, name, []byte(name), 0o600)
					afero.ReadFile(w, filepath.Join(root, "shared"))
				}
			})
		}
		wg.Wait()
	})
	if len(tp.Records) != G*N*3 { // write, fstat+read of shared
		t.Fatalf("%d records, want %d", len(tp.Records), G*N*3)
	}
	want, _ := oracleHash(t, filepath.Join(root, "shared"))
	for _, r := range only(tp, OpOpen, "shared") {
		if r.RHash != want {
			t.Fatalf("%s: want %s", r.String(), want)
		}
	}
}

// TestExtraOpOneDivergence: one extra record in the middle is exactly one
// divergence, located at it, with the records before it as context, and
// no cascade over the records after it.
func TestExtraOpOneDivergence(t *testing.T) {
	a := runProgram(t, afero.NewOsFs(), progOpts{sortListing: true})
	b := runProgram(t, afero.NewOsFs(), progOpts{sortListing: true, extraStat: true})
	d := Compare(a, b, ModeGlobal)
	if d == nil {
		t.Fatal("no divergence")
	}
	if d.Hunks != 1 || len(d.A) != 0 || len(d.B) != 1 {
		t.Fatalf("want one extra record, got:\n%v", d)
	}
	extra := d.B[0]
	if extra.Op != OpStat || extra.Path != "in/item-3.txt.bak" || extra.Err != OutcomeNotExist {
		t.Errorf("extra record %s", extra.String())
	}
	if d.BIndex != int(extra.Seq-1) || d.AIndex != d.BIndex {
		t.Errorf("indexes a=%d b=%d, extra is record %d", d.AIndex, d.BIndex, extra.Seq)
	}
	if len(d.Context) != ContextLen || d.Context[ContextLen-1].Seq != extra.Seq-1 {
		t.Errorf("context %v", d.Context)
	}
	if len(a.Records)+1 != len(b.Records) {
		t.Fatalf("record counts %d, %d", len(a.Records), len(b.Records))
	}
	p := Compare(a, b, ModePath)
	if p == nil || p.Hunks != 1 || p.Path != "in/item-3.txt.bak" {
		t.Errorf("path mode: %v", p)
	}
	if s := Compare(a, b, ModeSet); s == nil || s.Hunks != 1 || len(s.B) != 1 || s.B[0].Seq != extra.Seq {
		t.Errorf("set mode: %v", s)
	}
	if f := Compare(a, b, ModeFinal); f != nil {
		t.Errorf("final mode: a failed stat changes nothing, got %v", f)
	}
	// A changed record in the middle is one hunk of one record per side.
	c := &Tape{Records: slices.Clone(a.Records)}
	c.Records[10].Err = OutcomePermission
	d = Compare(a, c, ModeGlobal)
	if d == nil || d.Hunks != 1 || len(d.A) != 1 || len(d.B) != 1 || d.AIndex != 10 {
		t.Errorf("changed record: %v", d)
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range allModes {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("order"); err == nil {
		t.Error("ParseMode accepted an unknown mode")
	}
}

// TestCompareAll: two separate edits are two hunks in every record mode,
// the first of which is what Compare reports.
func TestCompareAll(t *testing.T) {
	a := runProgram(t, afero.NewOsFs(), progOpts{sortListing: true})
	b := &Tape{Records: slices.Clone(a.Records)}
	b.Records[3].Err = OutcomePermission
	b.Records[len(b.Records)-2].Err = OutcomeNoSpace
	for _, m := range []Mode{ModePath, ModeGlobal, ModeSet} {
		ds := CompareAll(a, b, m)
		want := 2
		if m == ModeSet {
			want = 4 // each changed record is unmatched on both sides
		}
		if len(ds) != want {
			t.Fatalf("mode %s: %d divergences, want %d", m, len(ds), want)
		}
		for _, d := range ds {
			if d.Hunks != want || d.Mode != m || d.Class != Data {
				t.Errorf("mode %s: %+v", m, d)
			}
		}
		first := Compare(a, b, m)
		if m != ModeSet && (first.A[0].Seq != ds[0].A[0].Seq || ds[0].A[0].Seq != 4 || ds[1].A[0].Seq != int64(len(a.Records)-1)) {
			t.Errorf("mode %s: order %v, %v; Compare gave %v", m, ds[0], ds[1], first)
		}
	}
	if ds := CompareAll(a, a, ModeFinal); ds != nil {
		t.Errorf("equal tapes: %v", ds)
	}
	q := &Tape{Records: []Record{{Seq: 1, Op: OpMkdir, Path: "odd name"}}}
	if ds := CompareAll(&Tape{}, q, ModeFinal); len(ds) != 1 || ds[0].Path != "odd name" {
		t.Errorf("final path of a quoted name: %v", ds)
	}
}
