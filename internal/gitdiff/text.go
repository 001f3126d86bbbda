package gitdiff

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// context is the number of unchanged lines around a change, git's default.
const context = 3

// maxDistinct is how many distinct lines fit in go-diff's rune encoding:
// every code point except the surrogates. Past it go-diff panics; the
// line differ falls back to replacing the whole changed region instead.
const maxDistinct = utf8.MaxRune + 1 - (0xE000 - 0xD800)

// diffBudget bounds the work of one line diff: Myers' algorithm costs
// O((N+M)·D) for N and M lines (after the cleanup) and D changed lines, and
// go-diff takes about 25 ns per unit, so this is about a second. Past it
// (say 30,000 lines drawn from ten distinct ones on each side, a 25 s
// minimal diff) the changed region is rewritten whole: still exact, not
// minimal, and deterministic. git's xdiff gives up minimality in such
// cases too.
const diffBudget = 40_000_000

// lineDiffer computes line diffs; it keeps its buffers between files.
type lineDiffer struct {
	dmp    *diffmatchpatch.DiffMatchPatch
	ids    map[string]int32
	idsCap int
	inA    []bool
	inB    []bool
	dense  []int32
	idA    []int32
	idB    []int32
	keepA  []int
	keepB  []int
	runeA  []rune
	runeB  []rune
	v      []int
	// maxDistinct and budget, when positive, override the package
	// constants so tests can reach the fallbacks with small files.
	maxDistinct int
	budget      int
}

// splitLines appends to dst the lines of s, each with its '\n'; a last
// line without one is kept.
func splitLines(dst []string, s string) []string {
	dst = slices.Grow(dst, strings.Count(s, "\n")+1)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n') + 1
		if i == 0 {
			i = len(s)
		}
		dst = append(dst, s[:i])
		s = s[i:]
	}
	return dst
}

// diff marks the lines of a that are deleted (ca) and the lines of b that
// are inserted (cb) by a minimal line diff, then slides the changed groups
// the way git's xdiff does, so that hunks come out as git's do.
func (d *lineDiffer) diff(a, b []string) (ca, cb []bool) {
	n, m := len(a), len(b)
	ca, cb = make([]bool, n), make([]bool, m)
	p := 0
	for p < n && p < m && a[p] == b[p] {
		p++
	}
	s := 0
	for s < n-p && s < m-p && a[n-1-s] == b[m-1-s] {
		s++
	}
	am, bm := a[p:n-s], b[p:m-s]
	if len(am) > 0 && len(bm) > 0 {
		d.middle(am, bm, ca[p:n-s], cb[p:m-s])
	} else {
		fill(ca[p : n-s])
		fill(cb[p : m-s])
	}
	compact(a, ca, cb)
	compact(b, cb, ca)
	return ca, cb
}

func fill(c []bool) {
	for i := range c {
		c[i] = true
	}
}

// middle diffs two regions that share no first and no last line. Like
// git's xdl_cleanup_records it first drops the lines that have no match on
// the other side: they are changed in every minimal diff, and leaving them
// out keeps the diff of two unrelated files from going quadratic.
func (d *lineDiffer) middle(a, b []string, ca, cb []bool) {
	if d.dmp == nil {
		d.dmp = diffmatchpatch.New()
		d.dmp.DiffTimeout = 0 // output must never depend on machine speed
	}
	d.index(a, b)
	distinct := d.encodeShared(ca, cb)
	limit, budget := d.limits()
	if distinct > limit || !d.within(d.runeA, d.runeB, budget/max(1, len(d.runeA)+len(d.runeB))) {
		// go-diff cannot encode this many lines, or would take too long:
		// rewrite the region.
		fill(ca)
		fill(cb)
		return
	}
	d.markChanged(ca, cb)
}

// index numbers the distinct lines of a and b (idA, idB) and notes which
// side each occurs on (inA, inB).
func (d *lineDiffer) index(a, b []string) {
	if n := len(a) + len(b); d.ids == nil || n > d.idsCap {
		d.ids, d.idsCap = make(map[string]int32, n), n // no rehashing as it fills
	} else {
		clear(d.ids)
	}
	d.inA = slices.Grow(d.inA[:0], len(a)+len(b))
	d.inB = slices.Grow(d.inB[:0], len(a)+len(b))
	d.idA = slices.Grow(d.idA[:0], len(a))
	d.idB = slices.Grow(d.idB[:0], len(b))
	id := func(line string) int32 {
		v, ok := d.ids[line]
		if !ok {
			v = int32(len(d.ids))
			d.ids[line] = v
			d.inA = append(d.inA, false)
			d.inB = append(d.inB, false)
		}
		return v
	}
	for _, l := range a {
		v := id(l)
		d.inA[v] = true
		d.idA = append(d.idA, v)
	}
	for _, l := range b {
		v := id(l)
		d.inB[v] = true
		d.idB = append(d.idB, v)
	}
}

// encodeShared marks changed (in ca, cb) the lines found on one side only,
// and turns the others into runes (runeA, runeB, with their positions in
// keepA, keepB), numbered densely in order of first appearance. It
// returns how many distinct runes it used.
func (d *lineDiffer) encodeShared(ca, cb []bool) int {
	d.dense = d.dense[:0]
	for range len(d.ids) {
		d.dense = append(d.dense, -1)
	}
	next := int32(0)
	toRune := func(v int32) rune {
		if d.dense[v] < 0 {
			d.dense[v] = next
			next++
		}
		r := rune(d.dense[v])
		if r >= 0xD800 {
			r += 0xE000 - 0xD800 // skip the surrogates, as go-diff does
		}
		return r
	}
	d.keepA, d.runeA = keepShared(d.idA, d.inB, ca, d.keepA[:0], d.runeA[:0], toRune)
	d.keepB, d.runeB = keepShared(d.idB, d.inA, cb, d.keepB[:0], d.runeB[:0], toRune)
	return int(next)
}

// keepShared appends to keep and runes the positions and runes of the ids
// found on the other side (inOther), and marks the rest changed.
func keepShared(ids []int32, inOther, changed []bool, keep []int, runes []rune, toRune func(int32) rune) ([]int, []rune) {
	for i, v := range ids {
		if !inOther[v] {
			changed[i] = true
			continue
		}
		keep = append(keep, i)
		runes = append(runes, toRune(v))
	}
	return keep, runes
}

// limits returns the most distinct lines go-diff is given and the work
// budget of one region, maxDistinct and diffBudget unless a test set them.
func (d *lineDiffer) limits() (distinct, budget int) {
	distinct, budget = int(maxDistinct), diffBudget
	if d.maxDistinct > 0 {
		distinct = d.maxDistinct
	}
	if d.budget > 0 {
		budget = d.budget
	}
	return distinct, budget
}

// markChanged diffs runeA with runeB and marks what go-diff deletes or
// inserts changed.
func (d *lineDiffer) markChanged(ca, cb []bool) {
	if len(d.runeA) == 0 || len(d.runeB) == 0 {
		for _, i := range d.keepA {
			ca[i] = true
		}
		for _, j := range d.keepB {
			cb[j] = true
		}
		return
	}
	ia, ib := 0, 0
	for _, df := range d.dmp.DiffMainRunes(d.runeA, d.runeB, false) {
		k := utf8.RuneCountInString(df.Text)
		switch df.Type {
		case diffmatchpatch.DiffEqual:
			ia += k
			ib += k
		case diffmatchpatch.DiffDelete:
			for _, i := range d.keepA[ia : ia+k] {
				ca[i] = true
			}
			ia += k
		case diffmatchpatch.DiffInsert:
			for _, j := range d.keepB[ib : ib+k] {
				cb[j] = true
			}
			ib += k
		}
	}
}

// within reports whether a and b are at most maxD insertions and deletions
// apart, with the greedy forward pass of Myers' algorithm: O((N+M)·maxD)
// time at worst, a few times cheaper than the diff it guards.
func (d *lineDiffer) within(a, b []rune, maxD int) bool {
	n, m := len(a), len(b)
	if maxD >= n+m {
		return true
	}
	off := maxD + 1
	d.v = slices.Grow(d.v[:0], 2*maxD+3)[:2*maxD+3]
	v := d.v
	v[off+1] = 0
	for e := 0; e <= maxD; e++ {
		for k := -e; k <= e; k += 2 {
			var x int
			if k == -e || (k != e && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				return true
			}
		}
	}
	return false
}

// change is a run of deleted lines a[i1:i1+n1] replaced by b[i2:i2+n2].
type change struct{ i1, i2, n1, n2 int }

// hunks writes the unified hunks of a line diff of old and new.
func (e *encoder) hunks(old, new []byte) {
	a := splitLines(e.linesA[:0], string(old))
	b := splitLines(e.linesB[:0], string(new))
	e.linesA, e.linesB = a, b
	defer clear(a) // let the file contents go
	defer clear(b)
	ca, cb := e.differ.diff(a, b)
	var script []change
	for i, j := 0, 0; i < len(a) || j < len(b); {
		if (i < len(a) && ca[i]) || (j < len(b) && cb[j]) {
			c := change{i1: i, i2: j}
			for i < len(a) && ca[i] {
				i++
			}
			for j < len(b) && cb[j] {
				j++
			}
			c.n1, c.n2 = i-c.i1, j-c.i2
			script = append(script, c)
			continue
		}
		i++
		j++
	}
	for len(script) > 0 {
		// Changes at most 2*context unchanged lines apart share a hunk.
		k := 1
		for k < len(script) && script[k].i1-(script[k-1].i1+script[k-1].n1) <= 2*context {
			k++
		}
		e.hunk(a, b, script[:k])
		script = script[k:]
	}
}

func (e *encoder) hunk(a, b []string, cs []change) {
	first, last := cs[0], cs[len(cs)-1]
	s1, s2 := max(first.i1-context, 0), max(first.i2-context, 0)
	post := min(context, len(a)-(last.i1+last.n1), len(b)-(last.i2+last.n2))
	e1, e2 := last.i1+last.n1+post, last.i2+last.n2+post
	w := e.w
	buf := append(e.scratch[:0], "@@ -"...)
	buf = appendRange(buf, s1, e1-s1)
	buf = append(buf, " +"...)
	buf = appendRange(buf, s2, e2-s2)
	buf = append(buf, " @@\n"...)
	w.Write(buf)
	e.scratch = buf
	i := s1
	for _, c := range cs {
		for ; i < c.i1; i++ {
			e.line(' ', a[i])
		}
		for _, l := range a[c.i1 : c.i1+c.n1] {
			e.line('-', l)
		}
		for _, l := range b[c.i2 : c.i2+c.n2] {
			e.line('+', l)
		}
		i = c.i1 + c.n1
	}
	for ; i < e1; i++ {
		e.line(' ', a[i])
	}
}

// appendRange appends git's "start,count" for the lines [start, start+count)
// (0-based start): ",1" is omitted, and an empty range names the line before.
func appendRange(buf []byte, start, count int) []byte {
	if count == 0 {
		buf = strconv.AppendInt(buf, int64(start), 10)
		return append(buf, ",0"...)
	}
	buf = strconv.AppendInt(buf, int64(start+1), 10)
	if count != 1 {
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, int64(count), 10)
	}
	return buf
}

func (e *encoder) line(prefix byte, l string) {
	e.w.WriteByte(prefix)
	e.w.WriteString(l)
	if len(l) == 0 || l[len(l)-1] != '\n' {
		e.w.WriteString("\n\\ No newline at end of file\n")
	}
}
