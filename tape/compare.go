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

// ContextLen is how many equal records around a divergence it shows,
// unless WithContext says otherwise.
const ContextLen = 3

// Divergence describes one difference between two tapes in a mode: a hunk
// of the alignment. The sequences are diffed (patience anchors, then
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
	// ModeGlobal, Final lines in ModeFinal; the record's Seq-1 in
	// ModeSet, -1 for a side without a record).
	AIndex, BIndex int
	// A and B are the differing records; one side is empty when the
	// other has extra records. Nil in ModeFinal.
	A, B []Record
	// ALines and BLines are the canonical lines of the hunk.
	ALines, BLines []string
	// Context holds up to ContextLen (see WithContext) records equal on
	// both sides just before the hunk, taken from A; After those just
	// after it, up to the next hunk. Nil in ModeFinal and ModeSet.
	Context, After []Record
	// ContextLines and AfterLines are the canonical lines of Context and
	// After; in ModeFinal, the equal Final lines around the hunk.
	ContextLines, AfterLines []string
	// Hunks counts differing hunks in this mode (unmatched records in
	// ModeSet), at least 1. The online check reports 1.
	Hunks int
	// Stack is the Go stack of the offending call (online check only).
	Stack string
}

// A CompareOption changes what Compare, CompareAll and Diff report.
type CompareOption func(*compareConfig)

type compareConfig struct {
	context int
}

// WithContext sets how many equal records (Final lines in ModeFinal) a
// Divergence carries before and after its hunk; ContextLen by default.
// Negative values count as 0.
func WithContext(n int) CompareOption {
	return func(c *compareConfig) { c.context = max(0, n) }
}

func newCompareConfig(opts []CompareOption) compareConfig {
	c := compareConfig{context: ContextLen}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// CompareAll returns every divergence between a and b in mode, each hunk
// of the alignment as one Divergence (with Hunks the total), nil when they
// are equal. Only records are compared: headers (package, test, info) and
// whether a tape was truncated are not; check Tape.Truncated apart.
// Order: ModePath, by the earliest Seq involved (ties by path); ModeGlobal
// and ModeFinal, by position; ModeSet, one Divergence per unmatched
// record, A's then B's, each by Seq. CompareAll is the one comparison
// engine: Compare, Classify and Diff are built on it.
func CompareAll(a, b *Tape, mode Mode, opts ...CompareOption) []*Divergence {
	c := newCompareConfig(opts)
	switch mode {
	case ModeGlobal:
		return globalAll(a, b, c, globalClass)
	case ModeSet:
		return setAll(a, b)
	case ModeFinal:
		return finalAll(a.Final(), b.Final(), c)
	default:
		return pathAll(a, b, c)
	}
}

// Compare returns the first divergence between a and b in mode, or nil
// when they are equal in that mode: the first of CompareAll's results,
// except that in ModeSet, where each unmatched record is a Divergence of
// its own, it pairs the first unmatched record of each side.
func Compare(a, b *Tape, mode Mode, opts ...CompareOption) *Divergence {
	return first(CompareAll(a, b, mode, opts...))
}

// first returns what Compare reports of the divergences ds.
func first(ds []*Divergence) *Divergence {
	if len(ds) == 0 {
		return nil
	}
	d := ds[0]
	if d.Mode != ModeSet || len(d.A) == 0 {
		return d
	}
	// ModeSet lists A's unmatched records before B's: pair the first of
	// each side.
	for _, e := range ds {
		if len(e.B) > 0 {
			p := *d
			p.B, p.BLines, p.BIndex = e.B, e.BLines, e.BIndex
			return &p
		}
	}
	return d
}

// Classify returns how a and b differ, with the divergence that shows it:
// the first ModePath one for Data, the first ModeGlobal one for
// InterleavingOnly, nil for Identical.
func Classify(a, b *Tape) (Class, *Divergence) {
	switch class := classOf(a, b); class {
	case Data:
		return class, Compare(a, b, ModePath)
	case InterleavingOnly:
		return class, first(globalAll(a, b, newCompareConfig(nil), func(*Tape, *Tape) Class { return class }))
	}
	return Identical, nil
}

// Diff returns how a and b differ (Classify's class) and every divergence
// between them in mode (CompareAll's result), aligning only what mode
// needs: the class comes from comparing canonical lines, not from a
// second alignment.
func Diff(a, b *Tape, mode Mode, opts ...CompareOption) (Class, []*Divergence) {
	class := classOf(a, b)
	if class == Identical {
		return class, nil // equal in every mode
	}
	if mode == ModeGlobal {
		return class, globalAll(a, b, newCompareConfig(opts), func(*Tape, *Tape) Class { return class })
	}
	return class, CompareAll(a, b, mode, opts...)
}

// classOf says how a and b differ by comparing their canonical lines, in
// order and per path, without aligning them.
func classOf(a, b *Tape) Class {
	if slices.Equal(a.Canon(ModeGlobal), b.Canon(ModeGlobal)) {
		return Identical
	}
	return globalClass(a, b)
}

// globalClass is the Class of a ModeGlobal divergence between a and b:
// InterleavingOnly when each path saw the same records in the same order
// on both sides, Data otherwise.
func globalClass(a, b *Tape) Class {
	if slices.Equal(a.Canon(ModePath), b.Canon(ModePath)) {
		return InterleavingOnly
	}
	return Data
}

func allIndexes(t *Tape) []int {
	idx := make([]int, len(t.Records))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// globalAll returns the hunks of all records in order, of the class
// classify gives (called only when there is a hunk).
func globalAll(a, b *Tape, c compareConfig, classify func(a, b *Tape) Class) []*Divergence {
	ds := seqAll(a.Records, b.Records, allIndexes(a), allIndexes(b), c)
	if len(ds) == 0 {
		return nil
	}
	class := classify(a, b)
	for _, d := range ds {
		d.Mode, d.Class = ModeGlobal, class
	}
	return ds
}

// seqAll aligns the records at indexes ia of ra with those at ib of rb and
// returns one Divergence per hunk, in order.
func seqAll(ra, rb []Record, ia, ib []int, c compareConfig) []*Divergence {
	la, lb := canonAt(ra, ia), canonAt(rb, ib)
	ds := lineHunks(la, lb, c)
	for _, d := range ds {
		d.A = recordsAt(ra, ia[d.AIndex:d.AIndex+len(d.ALines)])
		d.B = recordsAt(rb, ib[d.BIndex:d.BIndex+len(d.BLines)])
		d.Context = recordsAt(ra, ia[d.AIndex-len(d.ContextLines):d.AIndex])
		end := d.AIndex + len(d.ALines)
		d.After = recordsAt(ra, ia[end:end+len(d.AfterLines)])
	}
	return ds
}

// lineHunks aligns two line lists and returns one Divergence per hunk,
// with its lines and up to c.context equal lines around it.
func lineHunks(la, lb []string, c compareConfig) []*Divergence {
	hs := align(la, lb)
	if len(hs) == 0 {
		return nil
	}
	ds := make([]*Divergence, len(hs))
	for k, h := range hs {
		next := len(la)
		if k+1 < len(hs) {
			next = hs[k+1].A0
		}
		ds[k] = &Divergence{AIndex: h.A0, BIndex: h.B0, Hunks: len(hs),
			ALines: la[h.A0:h.A1], BLines: lb[h.B0:h.B1],
			ContextLines: la[max(0, h.A0-c.context):h.A0],
			AfterLines:   la[h.A1:min(next, h.A1+c.context)]}
	}
	return ds
}

func recordsAt(rs []Record, idx []int) []Record {
	if len(idx) == 0 {
		return nil
	}
	out := make([]Record, len(idx))
	for i, k := range idx {
		out[i] = rs[k]
	}
	return out
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

// pathAll returns the hunks of every path, earliest first.
func pathAll(a, b *Tape, c compareConfig) []*Divergence {
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
		for _, d := range seqAll(a.Records, b.Records, pa[p], pb[p], c) {
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

// setAll returns one Divergence per unmatched record, A's then B's.
func setAll(a, b *Tape) []*Divergence {
	var ds []*Divergence
	for _, r := range unmatched(a, b) {
		ds = append(ds, &Divergence{A: []Record{r}, ALines: []string{r.Canon()}, AIndex: int(r.Seq - 1), BIndex: -1})
	}
	for _, r := range unmatched(b, a) {
		ds = append(ds, &Divergence{B: []Record{r}, BLines: []string{r.Canon()}, AIndex: -1, BIndex: int(r.Seq - 1)})
	}
	for _, d := range ds {
		d.Mode, d.Class, d.Hunks = ModeSet, Data, len(ds)
	}
	return ds
}

// finalAll returns the hunks of two end states (Tape.Final lines).
func finalAll(la, lb []string, c compareConfig) []*Divergence {
	ds := lineHunks(la, lb, c)
	for _, d := range ds {
		d.Mode, d.Class = ModeFinal, Data
		if len(d.ALines) > 0 {
			d.Path = finalPath(d.ALines[0])
		} else {
			d.Path = finalPath(d.BLines[0])
		}
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
