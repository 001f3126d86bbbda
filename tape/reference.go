package tape

// onlineCheck compares records against a reference tape as they are made.
// Called with the recorder's lock held.
type onlineCheck struct {
	ref    *Tape
	mode   Mode
	done   bool
	idx    int              // ModeGlobal: next reference record
	refBy  map[string][]int // ModePath: reference indexes per path
	pos    map[string]int   // ModePath: next reference record per path
	canons []Record         // ModeSet: what was recorded
}

func newOnlineCheck(ref *Tape, mode Mode) *onlineCheck {
	c := &onlineCheck{ref: ref, mode: mode}
	if mode == ModePath {
		c.refBy, c.pos = byPath(ref), map[string]int{}
	}
	return c
}

func (c *onlineCheck) add(rec *Record) *Divergence {
	if c.done {
		return nil
	}
	switch c.mode {
	case ModeGlobal:
		i := c.idx
		c.idx++
		if i < len(c.ref.Records) && c.ref.Records[i].Canon() == rec.Canon() {
			return nil
		}
		return c.diverged("", allIndexes(c.ref), i, i, rec)
	case ModePath:
		for _, p := range rec.Paths() {
			i := c.pos[p]
			c.pos[p] = i + 1
			idx := c.refBy[p]
			if i < len(idx) && c.ref.Records[idx[i]].Canon() == rec.Canon() {
				continue
			}
			return c.diverged(p, idx, i, i, rec)
		}
	case ModeSet:
		c.canons = append(c.canons, *rec)
	}
	return nil
}

// diverged builds the report for rec, which differs from (or is missing
// in) the reference sequence idx at position i.
func (c *onlineCheck) diverged(path string, idx []int, ai, bi int, rec *Record) *Divergence {
	c.done = true
	// Online, the class cannot be known (a global mismatch may be mere
	// interleaving): it says Data; Classify the finished tapes to know.
	d := &Divergence{Mode: c.mode, Class: Data, Path: path, AIndex: ai, BIndex: bi, Hunks: 1}
	if ai < len(idx) {
		r := c.ref.Records[idx[ai]]
		d.A, d.ALines = []Record{r}, []string{r.Canon()}
	}
	if rec != nil {
		d.B, d.BLines = []Record{*rec}, []string{rec.Canon()}
	}
	for _, k := range idx[max(0, min(ai, len(idx))-ContextLen):min(ai, len(idx))] {
		d.Context = append(d.Context, c.ref.Records[k])
		d.ContextLines = append(d.ContextLines, c.ref.Records[k].Canon())
	}
	return d
}

// finish reports what the reference has beyond the recording (ModePath,
// ModeGlobal) or the set/final difference.
func (c *onlineCheck) finish(final *finalState) *Divergence {
	if c.done {
		return nil
	}
	switch c.mode {
	case ModeGlobal:
		if c.idx < len(c.ref.Records) {
			return c.diverged("", allIndexes(c.ref), c.idx, c.idx, nil)
		}
	case ModePath:
		var best string
		bestSeq := int64(-1)
		for p, idx := range c.refBy {
			if i := c.pos[p]; i < len(idx) {
				if s := c.ref.Records[idx[i]].Seq; bestSeq < 0 || s < bestSeq {
					best, bestSeq = p, s
				}
			}
		}
		if bestSeq >= 0 {
			return c.diverged(best, c.refBy[best], c.pos[best], c.pos[best], nil)
		}
	case ModeSet:
		d := first(setAll(c.ref, &Tape{Records: c.canons}))
		c.done = d != nil
		return d
	case ModeFinal:
		d := first(finalAll(c.ref.Final(), final.lines(), newCompareConfig(nil)))
		c.done = d != nil
		return d
	}
	return nil
}
