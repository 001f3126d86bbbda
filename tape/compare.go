package tape

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Mode selects what Compare holds equal.
type Mode int

const (
	// ModePath compares, per path, the sequence of operations and outcomes
	// on that path; interleaving between different paths is ignored.
	ModePath Mode = iota
	// ModeGlobal compares all records in order.
	ModeGlobal
	// ModeSet compares the multisets of records, order ignored.
	ModeSet
	// ModeFinal compares the end state the records leave (Tape.Final).
	ModeFinal
)

var modeNames = [...]string{"path", "global", "set", "final"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses "path", "global", "set" or "final".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("tape: unknown comparison mode %q (want path, global, set or final)", s)
}

// Class says how two tapes differ.
type Class int

const (
	// Identical: equal in ModeGlobal, hence in every mode.
	Identical Class = iota
	// InterleavingOnly: equal per path (ModePath) but not in global order:
	// independent paths were touched in a different order, as goroutines
	// racing on different files do.
	InterleavingOnly
	// Data: some path saw different operations, outcomes or bytes.
	Data
)

func (c Class) String() string {
	switch c {
	case Identical:
		return "identical"
	case InterleavingOnly:
		return "interleaving-only"
	case Data:
		return "data"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// ContextLen is how many equal records before a divergence it shows.
const ContextLen = 3

// Divergence describes the first difference between two tapes in a mode.
// "First" is by alignment: the sequences are diffed (patience anchors, then
// Myers), so one extra record is one hunk and what follows it still
// matches. Side A is the first tape (or the reference of an online check),
// side B the second (or the recording).
type Divergence struct {
	Mode  Mode
	Class Class
	// Path is the path whose sequence differs (ModePath, ModeFinal; for
	// the online check in ModePath too). Empty otherwise.
	Path string
	// AIndex and BIndex are where the hunk starts in the compared
	// sequence (the path's records in ModePath, all records in
	// ModeGlobal, Final lines in ModeFinal).
	AIndex, BIndex int
	// A and B are the differing records; one side is empty when the
	// other has extra records. Nil in ModeFinal.
	A, B []Record
	// ALines and BLines are the canonical lines of the hunk.
	ALines, BLines []string
	// Context holds up to ContextLen records equal on both sides just
	// before the hunk, taken from A.
	Context []Record
	// Hunks counts differing hunks in this mode (unmatched records in
	// ModeSet), at least 1. The online check reports 1.
	Hunks int
	// Stack is the Go stack of the offending call (online check only).
	Stack string
}

// Compare returns the first divergence between a and b in mode, or nil
// when they are equal in that mode. Only records are compared: headers
// (package, test, info) and whether a tape was truncated are not; check
// Tape.Truncated apart.
func Compare(a, b *Tape, mode Mode) *Divergence {
	switch mode {
	case ModeGlobal:
		d := compareSeq(a.Records, b.Records, allIndexes(a), allIndexes(b))
		if d == nil {
			return nil
		}
		d.Mode, d.Class = ModeGlobal, InterleavingOnly
		if Compare(a, b, ModePath) != nil {
			d.Class = Data
		}
		return d
	case ModeSet:
		return compareSet(a, b)
	case ModeFinal:
		return compareFinal(a, b)
	default:
		return comparePath(a, b)
	}
}

// Classify compares a and b once per needed mode and returns how they
// differ, with the divergence that shows it: the ModePath one for Data,
// the ModeGlobal one for InterleavingOnly, nil for Identical.
func Classify(a, b *Tape) (Class, *Divergence) {
	if d := comparePath(a, b); d != nil {
		return Data, d
	}
	if d := Compare(a, b, ModeGlobal); d != nil {
		return InterleavingOnly, d
	}
	return Identical, nil
}

func allIndexes(t *Tape) []int {
	idx := make([]int, len(t.Records))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// compareSeq aligns the records at indexes ia of ra with those at ib of rb
// and returns the first hunk.
func compareSeq(ra, rb []Record, ia, ib []int) *Divergence {
	ds := compareSeqAll(ra, rb, ia, ib)
	if len(ds) == 0 {
		return nil
	}
	return ds[0]
}

// compareSeqAll returns one Divergence per hunk, in order.
func compareSeqAll(ra, rb []Record, ia, ib []int) []*Divergence {
	la, lb := canonAt(ra, ia), canonAt(rb, ib)
	hs := align(la, lb)
	if len(hs) == 0 {
		return nil
	}
	ds := make([]*Divergence, len(hs))
	for k, h := range hs {
		d := &Divergence{AIndex: h.A0, BIndex: h.B0, Hunks: len(hs),
			ALines: la[h.A0:h.A1], BLines: lb[h.B0:h.B1]}
		for _, i := range ia[h.A0:h.A1] {
			d.A = append(d.A, ra[i])
		}
		for _, i := range ib[h.B0:h.B1] {
			d.B = append(d.B, rb[i])
		}
		for _, i := range ia[max(0, h.A0-ContextLen):h.A0] {
			d.Context = append(d.Context, ra[i])
		}
		ds[k] = d
	}
	return ds
}

// CompareAll returns every divergence between a and b in mode, each hunk
// of the alignment as one Divergence (with Hunks the total), nil when they
// are equal. Order: ModePath, by the earliest Seq involved; ModeGlobal and
// ModeFinal, by position; ModeSet, one Divergence per unmatched record, A's
// then B's, each by Seq. The first element is what Compare returns, except
// in ModeSet, where Compare pairs the first unmatched record of each side.
func CompareAll(a, b *Tape, mode Mode) []*Divergence {
	var ds []*Divergence
	switch mode {
	case ModeGlobal:
		ds = compareSeqAll(a.Records, b.Records, allIndexes(a), allIndexes(b))
		if len(ds) > 0 {
			class := InterleavingOnly
			if comparePath(a, b) != nil {
				class = Data
			}
			for _, d := range ds {
				d.Mode, d.Class = ModeGlobal, class
			}
		}
	case ModeSet:
		ua, ub := unmatched(a, b), unmatched(b, a)
		for _, r := range ua {
			ds = append(ds, &Divergence{A: []Record{r}, ALines: []string{r.Canon()}, AIndex: int(r.Seq - 1), BIndex: -1})
		}
		for _, r := range ub {
			ds = append(ds, &Divergence{B: []Record{r}, BLines: []string{r.Canon()}, AIndex: -1, BIndex: int(r.Seq - 1)})
		}
		for _, d := range ds {
			d.Mode, d.Class, d.Hunks = ModeSet, Data, len(ds)
		}
	case ModeFinal:
		ds = finalAll(a.Final(), b.Final())
	default:
		ds = pathAll(a, b)
	}
	return ds
}

func canonAt(rs []Record, idx []int) []string {
	out := make([]string, len(idx))
	for i, k := range idx {
		out[i] = rs[k].Canon()
	}
	return out
}

// byPath maps each path to the indexes of its records, in order.
func byPath(t *Tape) map[string][]int {
	m := map[string][]int{}
	for i := range t.Records {
		for _, p := range t.Records[i].Paths() {
			m[p] = append(m[p], i)
		}
	}
	return m
}

func comparePath(a, b *Tape) *Divergence {
	ds := pathAll(a, b)
	if len(ds) == 0 {
		return nil
	}
	return ds[0]
}

// pathAll returns the hunks of every path, earliest first.
func pathAll(a, b *Tape) []*Divergence {
	pa, pb := byPath(a), byPath(b)
	paths := make([]string, 0, len(pa)+len(pb))
	for p := range pa {
		paths = append(paths, p)
	}
	for p := range pb {
		if _, ok := pa[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var all []*Divergence
	for _, p := range paths {
		for _, d := range compareSeqAll(a.Records, b.Records, pa[p], pb[p]) {
			d.Path = p
			all = append(all, d)
		}
	}
	slices.SortStableFunc(all, func(x, y *Divergence) int { return cmp.Compare(x.seq(), y.seq()) })
	for _, d := range all {
		d.Mode, d.Class, d.Hunks = ModePath, Data, len(all)
	}
	return all
}

// seq is the earliest Seq among the differing records: when it happened.
func (d *Divergence) seq() int64 {
	s := int64(-1)
	for _, rs := range [][]Record{d.A, d.B} {
		if len(rs) > 0 && (s < 0 || rs[0].Seq < s) {
			s = rs[0].Seq
		}
	}
	return s
}

// unmatched returns the records of x whose canonical lines y lacks (as a
// multiset), in order.
func unmatched(x, y *Tape) []Record {
	n := map[string]int{}
	for i := range y.Records {
		n[y.Records[i].Canon()]++
	}
	var out []Record
	for i := range x.Records {
		c := x.Records[i].Canon()
		if n[c] > 0 {
			n[c]--
		} else {
			out = append(out, x.Records[i])
		}
	}
	return out
}

func compareSet(a, b *Tape) *Divergence {
	ua, ub := unmatched(a, b), unmatched(b, a)
	if len(ua) == 0 && len(ub) == 0 {
		return nil
	}
	d := &Divergence{Mode: ModeSet, Class: Data, Hunks: len(ua) + len(ub), AIndex: -1, BIndex: -1}
	if len(ua) > 0 {
		d.A = ua[:1]
		d.ALines = []string{ua[0].Canon()}
		d.AIndex = int(ua[0].Seq - 1)
	}
	if len(ub) > 0 {
		d.B = ub[:1]
		d.BLines = []string{ub[0].Canon()}
		d.BIndex = int(ub[0].Seq - 1)
	}
	return d
}

func compareFinal(a, b *Tape) *Divergence {
	return compareFinalLines(a.Final(), b.Final())
}

func compareFinalLines(la, lb []string) *Divergence {
	ds := finalAll(la, lb)
	if len(ds) == 0 {
		return nil
	}
	return ds[0]
}

func finalAll(la, lb []string) []*Divergence {
	hs := align(la, lb)
	if len(hs) == 0 {
		return nil
	}
	ds := make([]*Divergence, len(hs))
	for k, h := range hs {
		d := &Divergence{Mode: ModeFinal, Class: Data, AIndex: h.A0, BIndex: h.B0, Hunks: len(hs),
			ALines: la[h.A0:h.A1], BLines: lb[h.B0:h.B1]}
		if len(d.ALines) > 0 {
			d.Path = finalPath(d.ALines[0])
		} else {
			d.Path = finalPath(d.BLines[0])
		}
		ds[k] = d
	}
	return ds
}

// finalPath returns the path at the start of a Final line.
func finalPath(l string) string {
	if strings.HasPrefix(l, `"`) {
		for i := 1; i < len(l); i++ {
			if l[i] == '\\' {
				i++
				continue
			}
			if l[i] == '"' {
				if p, err := strconv.Unquote(l[:i+1]); err == nil {
					return p
				}
				return l[:i+1]
			}
		}
	}
	p, _, _ := strings.Cut(l, " ")
	return p
}

// Canon returns the tape in the canonical form a mode compares, one line
// per element: ModeGlobal, every record's canonical line in order;
// ModePath, "<path> | <line>" grouped by path in path order; ModeSet, the
// global lines sorted; ModeFinal, Final().
func (t *Tape) Canon(mode Mode) []string {
	switch mode {
	case ModeGlobal:
		return canonAt(t.Records, allIndexes(t))
	case ModeSet:
		l := canonAt(t.Records, allIndexes(t))
		slices.Sort(l)
		return l
	case ModeFinal:
		return t.Final()
	default:
		m := byPath(t)
		paths := make([]string, 0, len(m))
		for p := range m {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		var out []string
		for _, p := range paths {
			for _, i := range m[p] {
				out = append(out, quoteIfNeeded(p)+" | "+t.Records[i].Canon())
			}
		}
		return out
	}
}

// maxShown bounds the records printed per side by String.
const maxShown = 8

// String prints a report: mode and class, where, context, both sides of
// the hunk and, for the online check, the stack of the offending call.
func (d *Divergence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tape: first divergence in %s mode (class %s", d.Mode, d.Class)
	if d.Hunks > 1 {
		fmt.Fprintf(&b, ", %d hunks in all", d.Hunks)
	}
	b.WriteString(")")
	if d.Path != "" {
		fmt.Fprintf(&b, " at path %s", quoteIfNeeded(d.Path))
	}
	b.WriteString("\n")
	if len(d.Context) > 0 {
		b.WriteString("  same on both sides before it:\n")
		for i := range d.Context {
			fmt.Fprintf(&b, "      %s\n", d.Context[i].String())
		}
	}
	side := func(name string, recs []Record, lines []string) {
		if len(lines) == 0 {
			fmt.Fprintf(&b, "  %s: (nothing here)\n", name)
			return
		}
		for i, l := range lines {
			if i == maxShown {
				fmt.Fprintf(&b, "  %s: ... %d more\n", name, len(lines)-maxShown)
				break
			}
			if i < len(recs) {
				l = recs[i].String()
			}
			fmt.Fprintf(&b, "  %s: %s\n", name, l)
		}
	}
	side("a", d.A, d.ALines)
	side("b", d.B, d.BLines)
	if d.Stack != "" {
		b.WriteString("  stack of the offending call:\n")
		for _, l := range strings.Split(strings.TrimRight(d.Stack, "\n"), "\n") {
			b.WriteString("    " + l + "\n")
		}
	}
	return b.String()
}
