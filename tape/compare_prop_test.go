package tape

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cowfs/cowfs/internal/longtest"
)

// propRecords returns n records over a few paths, some of them renames
// that belong to two paths.
func propRecords(rng *rand.Rand, n int) []Record {
	paths := []string{"a", "b", "c/d", "e", "f"}
	ops := []string{OpStat, OpOpen, OpRemove, OpChmod, OpMkdir}
	out := make([]Record, n)
	for i := range out {
		r := Record{Op: ops[rng.IntN(len(ops))], Path: paths[rng.IntN(len(paths))]}
		if rng.IntN(6) == 0 {
			r.Op, r.To = OpRename, paths[rng.IntN(len(paths))]
		}
		if rng.IntN(4) == 0 {
			r.Err = OutcomeNotExist
		}
		out[i] = r
	}
	return out
}

// interleave returns rs in a random order that keeps the order of any two
// records sharing a path (Record.Paths): what goroutines working on
// independent paths may produce.
func interleave(rng *rand.Rand, rs []Record) []Record {
	placed := make([]bool, len(rs))
	var out []Record
	for len(out) < len(rs) {
		var ready []int
		for i := range rs {
			if placed[i] {
				continue
			}
			ok := true
			for j := range i {
				if !placed[j] && sharePath(&rs[i], &rs[j]) {
					ok = false
					break
				}
			}
			if ok {
				ready = append(ready, i)
			}
		}
		i := ready[rng.IntN(len(ready))]
		placed[i] = true
		out = append(out, rs[i])
	}
	return out
}

func sharePath(a, b *Record) bool {
	for _, p := range a.Paths() {
		if slices.Contains(b.Paths(), p) {
			return true
		}
	}
	return false
}

func tapeOfRecords(rs []Record) *Tape {
	t := &Tape{Records: slices.Clone(rs)}
	for i := range t.Records {
		t.Records[i].Seq = int64(i + 1)
	}
	return t
}

// TestCompareModesProperty checks each mode's equivalence as the package
// doc states it, on random tapes: an interleaving that keeps every path's
// order is equal in ModePath and InterleavingOnly (or Identical) for
// Classify, and unequal in ModeGlobal exactly when the order of the lines
// changed; any shuffle is equal in ModeSet; one changed record is a Data
// divergence on its path naming it on both sides; one extra record makes
// one hunk, whatever follows it. 150 random tapes, 5000 with COWFS_LONG=1.
func TestCompareModesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for iter := range longtest.N(150, 5000) {
		rs := propRecords(rng, 2+rng.IntN(30))
		a := tapeOfRecords(rs)
		b := tapeOfRecords(interleave(rng, rs))
		sameOrder := slices.Equal(a.Canon(ModeGlobal), b.Canon(ModeGlobal))
		if d := Compare(a, b, ModePath); d != nil {
			t.Fatalf("#%d: interleaving differs in path mode: %v", iter, d)
		}
		if d := Compare(a, b, ModeGlobal); (d == nil) != sameOrder {
			t.Fatalf("#%d: global mode says %v for an interleaving (same order: %v)", iter, d, sameOrder)
		}
		want := InterleavingOnly
		if sameOrder {
			want = Identical
		}
		if c, _ := Classify(a, b); c != want {
			t.Fatalf("#%d: Classify = %v, want %v", iter, c, want)
		}
		shuffled := slices.Clone(rs)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if d := Compare(a, tapeOfRecords(shuffled), ModeSet); d != nil {
			t.Fatalf("#%d: shuffle differs in set mode: %v", iter, d)
		}

		// One record changed.
		c := tapeOfRecords(b.Records)
		k := rng.IntN(len(c.Records))
		c.Records[k].Err = "loop"
		d := Compare(b, c, ModePath)
		if d == nil || d.Class != Data || !slices.Contains(c.Records[k].Paths(), d.Path) ||
			len(d.A) != 1 || len(d.B) != 1 || d.A[0].Seq != int64(k+1) || d.B[0].Err != "loop" {
			t.Fatalf("#%d: changed record %d: %v", iter, k+1, d)
		}
		if cl, _ := Classify(b, c); cl != Data {
			t.Fatalf("#%d: changed record: Classify = %v", iter, cl)
		}

		// One record inserted: one hunk in global mode, holding it alone.
		extra := Record{Op: OpStat, Path: "a", Err: "loop"}
		k = rng.IntN(len(b.Records) + 1)
		ins := tapeOfRecords(slices.Insert(slices.Clone(b.Records), k, extra))
		ds := CompareAll(b, ins, ModeGlobal)
		if len(ds) != 1 || len(ds[0].A) != 0 || len(ds[0].B) != 1 || ds[0].B[0].Seq != int64(k+1) {
			t.Fatalf("#%d: one record inserted at %d: %d hunks, first %v", iter, k+1, len(ds), first(ds))
		}
		ds = CompareAll(b, ins, ModePath)
		if len(ds) != 1 || ds[0].Path != "a" || len(ds[0].B) != 1 {
			t.Fatalf("#%d: one record inserted at %d: path mode %d hunks, first %v", iter, k+1, len(ds), first(ds))
		}
	}
}
