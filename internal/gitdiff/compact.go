package gitdiff

// This file reproduces how git's xdiff positions groups of changed lines
// when a group can slide (its first line equals the line after it, or its
// last line equals the line before it): a minimal diff is not unique, and
// without this step hunks would have the right sizes in the wrong places.
// It follows xdl_change_compact in git's xdiff/xdiffi.c with
// XDF_INDENT_HEURISTIC, git's default since 2.14.

// group is a run of changed lines [start, end) of one side; an empty group
// (start == end) sits just above the unchanged line start.
type group struct{ start, end int }

type chgFile struct {
	recs []string
	chg  []bool
}

func (f *chgFile) changed(i int) bool { return i >= 0 && i < len(f.chg) && f.chg[i] }

func (f *chgFile) first() group {
	g := group{}
	for f.changed(g.end) {
		g.end++
	}
	return g
}

func (f *chgFile) next(g *group) bool {
	if g.end == len(f.chg) {
		return false
	}
	g.start = g.end + 1
	g.end = g.start
	for f.changed(g.end) {
		g.end++
	}
	return true
}

func (f *chgFile) previous(g *group) bool {
	if g.start == 0 {
		return false
	}
	g.end = g.start - 1
	g.start = g.end
	for f.changed(g.start - 1) {
		g.start--
	}
	return true
}

// slideDown moves g one line toward the end, merging with a group it meets.
func (f *chgFile) slideDown(g *group) bool {
	if g.end >= len(f.chg) || f.recs[g.start] != f.recs[g.end] {
		return false
	}
	f.chg[g.start] = false
	f.chg[g.end] = true
	g.start++
	g.end++
	for f.changed(g.end) {
		g.end++
	}
	return true
}

// slideUp moves g one line toward the start, merging with a group it meets.
func (f *chgFile) slideUp(g *group) bool {
	if g.start == 0 || f.recs[g.start-1] != f.recs[g.end-1] {
		return false
	}
	g.start--
	g.end--
	f.chg[g.start] = true
	f.chg[g.end] = false
	for f.changed(g.start - 1) {
		g.start--
	}
	return true
}

// compact slides the changed groups of one side (recs, chg) while walking
// the matching groups of the other side (other), as xdl_change_compact.
func compact(recs []string, chg, other []bool) {
	f := &chgFile{recs: recs, chg: chg}
	o := &chgFile{chg: other}
	g, og := f.first(), o.first()
	for {
		if g.end != g.start {
			var groupSize, earliestEnd int
			endMatchingOther := -1
			for {
				groupSize = g.end - g.start
				endMatchingOther = -1
				for f.slideUp(&g) {
					if !o.previous(&og) {
						return // cannot happen: the sides are in step
					}
				}
				earliestEnd = g.end
				if og.end > og.start {
					endMatchingOther = g.end
				}
				for f.slideDown(&g) {
					if !o.next(&og) {
						return
					}
					if og.end > og.start {
						endMatchingOther = g.end
					}
				}
				if groupSize == g.end-g.start {
					break
				}
			}
			switch {
			case g.end == earliestEnd:
				// It cannot slide.
			case endMatchingOther != -1:
				// Line it up with the last group of the other side it
				// can face.
				for og.end == og.start {
					if !f.slideUp(&g) || !o.previous(&og) {
						return
					}
				}
			default:
				best := bestShift(recs, g, groupSize, earliestEnd)
				for g.end > best {
					if !f.slideUp(&g) || !o.previous(&og) {
						return
					}
				}
			}
		}
		if !f.next(&g) || !o.next(&og) {
			return
		}
	}
}

// The indent heuristic's weights, from git's xdiffi.c (found empirically
// by Michael Haggerty's diff-slider-tools).
const (
	maxIndent  = 200
	maxBlanks  = 20
	maxSliding = 100

	startOfFilePenalty              = 1
	endOfFilePenalty                = 21
	totalBlankWeight                = -30
	postBlankWeight                 = 6
	relativeIndentPenalty           = -4
	relativeIndentWithBlankPenalty  = 10
	relativeOutdentPenalty          = 24
	relativeOutdentWithBlankPenalty = 17
	relativeDedentPenalty           = 23
	relativeDedentWithBlankPenalty  = 17
	indentWeight                    = 60
)

// bestShift returns the end the group g (slid down as far as it goes)
// should have, scoring each position by the indentation around its two
// edges; the lowest score wins, the latest on ties.
func bestShift(recs []string, g group, groupSize, earliestEnd int) int {
	shift := max(earliestEnd, g.end-groupSize-1, g.end-maxSliding)
	best := -1
	var bestScore score
	for ; shift <= g.end; shift++ {
		var s score
		s.add(measure(recs, shift))
		s.add(measure(recs, shift-groupSize))
		if best == -1 || s.cmp(bestScore) <= 0 {
			bestScore = s
			best = shift
		}
	}
	return best
}

// indent is the width of l's leading blanks (a tab advances to the next
// multiple of 8), capped at maxIndent; -1 for a line of only whitespace.
// Whitespace is git's: space, tab, CR and LF.
func indent(l string) int {
	n := 0
	for i := 0; i < len(l); i++ {
		switch l[i] {
		case ' ':
			n++
		case '\t':
			n += 8 - n%8
		case '\n', '\r':
		default:
			return n
		}
		if n >= maxIndent {
			return maxIndent
		}
	}
	return -1
}

type split struct {
	endOfFile             bool
	indent                int
	preBlank, preIndent   int
	postBlank, postIndent int
}

// measure describes a split of recs just above line at.
func measure(recs []string, at int) split {
	var m split
	if at >= len(recs) {
		m.endOfFile = true
		m.indent = -1
	} else {
		m.indent = indent(recs[at])
	}
	m.preIndent = -1
	for i := at - 1; i >= 0; i-- {
		m.preIndent = indent(recs[i])
		if m.preIndent != -1 {
			break
		}
		m.preBlank++
		if m.preBlank == maxBlanks {
			m.preIndent = 0
			break
		}
	}
	m.postIndent = -1
	for i := at + 1; i < len(recs); i++ {
		m.postIndent = indent(recs[i])
		if m.postIndent != -1 {
			break
		}
		m.postBlank++
		if m.postBlank == maxBlanks {
			m.postIndent = 0
			break
		}
	}
	return m
}

type score struct{ effectiveIndent, penalty int }

func (s *score) add(m split) {
	if m.preIndent == -1 && m.preBlank == 0 {
		s.penalty += startOfFilePenalty
	}
	if m.endOfFile {
		s.penalty += endOfFilePenalty
	}
	postBlank := 0
	if m.indent == -1 {
		postBlank = 1 + m.postBlank
	}
	totalBlank := m.preBlank + postBlank
	s.penalty += totalBlankWeight*totalBlank + postBlankWeight*postBlank
	ind := m.indent
	if ind == -1 {
		ind = m.postIndent
	}
	anyBlanks := totalBlank != 0
	s.effectiveIndent += ind
	switch {
	case ind == -1, m.preIndent == -1, ind == m.preIndent:
	case ind > m.preIndent:
		s.penalty += pick(anyBlanks, relativeIndentWithBlankPenalty, relativeIndentPenalty)
	case m.postIndent != -1 && m.postIndent > ind:
		// Less indented than the line before, more than the line after:
		// likely the start of a block.
		s.penalty += pick(anyBlanks, relativeOutdentWithBlankPenalty, relativeOutdentPenalty)
	default:
		// Likely the end of a block.
		s.penalty += pick(anyBlanks, relativeDedentWithBlankPenalty, relativeDedentPenalty)
	}
}

func pick(c bool, yes, no int) int {
	if c {
		return yes
	}
	return no
}

func (s score) cmp(t score) int {
	c := 0
	if s.effectiveIndent > t.effectiveIndent {
		c = 1
	} else if s.effectiveIndent < t.effectiveIndent {
		c = -1
	}
	return indentWeight*c + s.penalty - t.penalty
}
