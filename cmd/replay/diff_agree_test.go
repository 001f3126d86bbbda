package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/tape"
)

// TestDiffAgreesWithCompare: for random pairs of tapes, made by mutating
// recorded ones (records inserted, deleted, changed, swapped), replay diff
// -json reports in every mode the first divergence tape.Compare finds (with
// -all, every one CompareAll finds), and both agree with a naive oracle
// written here from the definitions: whether the tapes are equal in the
// mode (canonical lines in order, per path, as a multiset, end states),
// the class, and in global mode where the first divergence starts (after
// the common prefix).
func TestDiffAgreesWithCompare(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 15))
	var bases [][]string // header line, then record lines
	var pool []string    // every record line of every base
	for range 4 {
		b := recordRandomTape(t, rng)
		bases = append(bases, b)
		pool = append(pool, b[1:]...)
	}
	trials := 150
	if testing.Short() {
		trials = 30
	}
	dir := t.TempDir()
	var differing int
	for trial := range trials {
		base := bases[rng.IntN(len(bases))]
		var la, lb []string
		switch trial % 3 {
		case 0: // a recorded tape against a mutation of it
			la, lb = base, mutateTape(base, pool, rng)
		case 1: // two mutations of one tape
			la, lb = mutateTape(base, pool, rng), mutateTape(base, pool, rng)
		default: // two recorded tapes (sometimes the same one)
			la, lb = base, bases[rng.IntN(len(bases))]
		}
		fa, fb := filepath.Join(dir, fmt.Sprintf("%d-a.tape", trial)), filepath.Join(dir, fmt.Sprintf("%d-b.tape", trial))
		ta, tb := writeSealed(t, fa, la), writeSealed(t, fb, lb)
		all := trial%2 == 1
		for _, mode := range []tape.Mode{tape.ModePath, tape.ModeGlobal, tape.ModeSet, tape.ModeFinal} {
			if !checkDiffAgrees(t, fa, fb, ta, tb, mode, all) {
				differing++
			}
			if t.Failed() {
				t.Fatalf("trial %d, mode %s, -all %v:\nA:\n%s\nB:\n%s", trial, mode, all, strings.Join(la, "\n"), strings.Join(lb, "\n"))
			}
		}
	}
	t.Logf("%d trials, %d comparisons, %d differing", trials, 4*trials, differing)
	if differing == 0 || differing == 4*trials {
		t.Errorf("%d of %d comparisons differ: the trials test only one side", differing, 4*trials)
	}
}

// checkDiffAgrees runs replay diff on fa and fb in mode and checks it
// against tape.Compare and the naive oracle; it reports whether the tapes
// are equal in mode.
func checkDiffAgrees(t *testing.T, fa, fb string, ta, tb *tape.Tape, mode tape.Mode, all bool) bool {
	t.Helper()
	args := []string{"diff", "-json", "-order", mode.String()}
	if all {
		args = append(args, "-all")
	}
	var stdout, stderr bytes.Buffer
	e := &env{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
	code := e.main(append(args, fa, fb))
	var rep diffReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("replay %v: exit %d, %v\nstdout %s\nstderr %s", args, code, err, stdout.String(), stderr.String())
	}

	d := tape.Compare(ta, tb, mode)
	equal := naiveEqual(ta, tb, mode)
	if (d == nil) != equal || rep.Equal != equal || code != map[bool]int{true: exitSame, false: exitDiffers}[equal] {
		t.Errorf("equal: oracle %v, tape.Compare %v, replay diff %v (exit %d)", equal, d, rep.Equal, code)
		return equal
	}
	if want := naiveClass(ta, tb); rep.Class != want {
		t.Errorf("class: replay diff %q, oracle %q", rep.Class, want)
	}
	if equal {
		return true
	}
	if rep.Hunks != d.Hunks || len(rep.Shown) == 0 {
		t.Errorf("hunks: replay diff %d (%d shown), tape.Compare %d", rep.Hunks, len(rep.Shown), d.Hunks)
		return false
	}
	sh := rep.Shown[0]
	if mode == tape.ModeSet {
		// One hunk lists every unmatched record; Compare pairs the first
		// of each side.
		if len(sh.A) > 0 != (len(d.A) > 0) || len(d.A) > 0 && sh.A[0] != d.A[0].String() ||
			len(sh.B) > 0 != (len(d.B) > 0) || len(d.B) > 0 && sh.B[0] != d.B[0].String() {
			t.Errorf("set: replay diff shows %q / %q, tape.Compare %v / %v", sh.A, sh.B, d.A, d.B)
		}
		return false
	}
	wantA, wantB := d.ALines, d.BLines
	if mode != tape.ModeFinal {
		wantA, wantB = recLinesOf(d.A), recLinesOf(d.B)
	}
	if sh.Path != d.Path || sh.AIndex != d.AIndex || sh.BIndex != d.BIndex || !slices.Equal(sh.A, wantA) || !slices.Equal(sh.B, wantB) {
		t.Errorf("first divergence: replay diff %+v\ntape.Compare %v", sh, d)
	}
	if mode == tape.ModeGlobal {
		p := commonPrefix(canonsOf(ta.Records), canonsOf(tb.Records))
		if d.AIndex != p || d.BIndex != p {
			t.Errorf("global: divergence at a#%d b#%d, common prefix %d", d.AIndex, d.BIndex, p)
		}
	}
	if all {
		ds := tape.CompareAll(ta, tb, mode)
		if len(rep.Shown) != len(ds) {
			t.Errorf("-all: replay diff shows %d hunks, tape.CompareAll %d", len(rep.Shown), len(ds))
		}
	} else if len(rep.Shown) != 1 {
		t.Errorf("without -all: %d hunks shown", len(rep.Shown))
	}
	return false
}

var seqPrefix = regexp.MustCompile(`^\{"seq":\d+,`)

// recordRandomTape records random operations on a small tree and returns
// the tape's header and record lines.
func recordRandomTape(t *testing.T, rng *rand.Rand) []string {
	t.Helper()
	var buf bytes.Buffer
	rec := tape.NewRecorder(&buf, tape.WithTest("p", "T"))
	mem := afero.NewMemMapFs()
	if err := mem.MkdirAll("/r", 0o755); err != nil {
		t.Fatal(err)
	}
	fsys := rec.Wrap(mem, "/r")
	names := []string{"a", "b", "d/x", "d/y"}
	verbs := []string{"write", "append", "read", "stat", "rm", "rename", "open", "mkdir"}
	for range 8 + rng.IntN(16) {
		name := names[rng.IntN(len(names))]
		op := verbs[rng.IntN(len(verbs))] + ":" + name
		switch {
		case strings.HasPrefix(op, "mkdir"):
			op = "mkdir:d"
		case strings.HasPrefix(op, "rename"):
			op += "=" + names[rng.IntN(len(names))]
		case strings.HasPrefix(op, "write"), strings.HasPrefix(op, "append"):
			op += "=" + fmt.Sprint(rng.IntN(3))
		}
		_ = mktapeOp(fsys, op) // a failing operation is recorded, which is what we want
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	return lines[:len(lines)-1] // without the trailer
}

// mutateTape applies one to three random edits to the records of tape
// (header and record lines): insert a record from pool, delete, change
// (replace with one from pool) or swap two neighbours. Sequence numbers
// are renumbered.
func mutateTape(tp, pool []string, rng *rand.Rand) []string {
	recs := slices.Clone(tp[1:])
	for range 1 + rng.IntN(3) {
		i := rng.IntN(len(recs) + 1)
		switch rng.IntN(4) {
		case 0:
			recs = slices.Insert(recs, i, pool[rng.IntN(len(pool))])
		case 1:
			if i < len(recs) {
				recs = slices.Delete(recs, i, i+1)
			}
		case 2:
			if i < len(recs) {
				recs[i] = pool[rng.IntN(len(pool))]
			}
		default:
			if i+1 < len(recs) {
				recs[i], recs[i+1] = recs[i+1], recs[i]
			}
		}
	}
	for k := range recs {
		recs[k] = seqPrefix.ReplaceAllString(recs[k], fmt.Sprintf(`{"seq":%d,`, k+1))
	}
	return append([]string{tp[0]}, recs...)
}

// writeSealed seals the tape lines, writes them to name and reads the tape
// back.
func writeSealed(t *testing.T, name string, lines []string) *tape.Tape {
	t.Helper()
	sealed, err := seal(strings.Join(lines, "\n") + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(sealed), 0o644); err != nil {
		t.Fatal(err)
	}
	tp, err := tape.Read(strings.NewReader(sealed))
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func canonsOf(rs []tape.Record) []string {
	out := make([]string, len(rs))
	for i := range rs {
		out[i] = rs[i].Canon()
	}
	return out
}

func recLinesOf(rs []tape.Record) []string {
	out := make([]string, len(rs))
	for i := range rs {
		out[i] = rs[i].String()
	}
	return out
}

func commonPrefix(a, b []string) int {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	return p
}

// perPath groups canonical lines by the paths each record touches.
func perPath(rs []tape.Record) map[string][]string {
	m := map[string][]string{}
	for i := range rs {
		for _, p := range rs[i].Paths() {
			m[p] = append(m[p], rs[i].Canon())
		}
	}
	return m
}

// naiveEqual says from the definitions whether a and b are equal in mode.
func naiveEqual(a, b *tape.Tape, mode tape.Mode) bool {
	switch mode {
	case tape.ModeGlobal:
		return slices.Equal(canonsOf(a.Records), canonsOf(b.Records))
	case tape.ModeSet:
		ca, cb := canonsOf(a.Records), canonsOf(b.Records)
		slices.Sort(ca)
		slices.Sort(cb)
		return slices.Equal(ca, cb)
	case tape.ModeFinal:
		return slices.Equal(a.Final(), b.Final())
	default:
		pa, pb := perPath(a.Records), perPath(b.Records)
		if len(pa) != len(pb) {
			return false
		}
		for p, la := range pa {
			if lb, ok := pb[p]; !ok || !slices.Equal(la, lb) {
				return false
			}
		}
		return true
	}
}

func naiveClass(a, b *tape.Tape) string {
	switch {
	case naiveEqual(a, b, tape.ModeGlobal):
		return "identical"
	case naiveEqual(a, b, tape.ModePath):
		return "interleaving-only"
	}
	return "data"
}
