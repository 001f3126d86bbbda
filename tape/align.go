package tape

import "sort"

// hunk says a[A0:A1] was replaced by b[B0:B1] (either may be empty).
type hunk struct{ A0, A1, B0, B1 int }

// match is a run of n equal lines starting at a[A] and b[B].
type match struct{ A, B, N int }

// maxEdit bounds the Myers search of one region: past it the region is
// reported as one replaced block, which keeps alignment O((N+M)·maxEdit)
// on tapes that have nothing in common.
const maxEdit = 2000

// align diffs two line lists: patience anchors (lines unique on both sides)
// first, Myers' O(ND) diff between them. One inserted line yields one hunk;
// the lines after it align again.
func align(a, b []string) []hunk {
	ids := map[string]int{}
	enc := func(s []string) []int {
		out := make([]int, len(s))
		for i, l := range s {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	ai, bi := enc(a), enc(b)
	var ms []match
	patience(ai, bi, 0, 0, &ms)
	sort.Slice(ms, func(i, j int) bool { return ms[i].A < ms[j].A })
	var hs []hunk
	pa, pb := 0, 0
	for _, m := range ms {
		if m.N == 0 {
			continue
		}
		if m.A > pa || m.B > pb {
			hs = append(hs, hunk{pa, m.A, pb, m.B})
		}
		pa, pb = m.A+m.N, m.B+m.N
	}
	if pa < len(a) || pb < len(b) {
		hs = append(hs, hunk{pa, len(a), pb, len(b)})
	}
	return hs
}

func patience(a, b []int, ao, bo int, ms *[]match) {
	// Common prefix and suffix.
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	if p > 0 {
		*ms = append(*ms, match{ao, bo, p})
	}
	a, b, ao, bo = a[p:], b[p:], ao+p, bo+p
	s := 0
	for s < len(a) && s < len(b) && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	if s > 0 {
		*ms = append(*ms, match{ao + len(a) - s, bo + len(b) - s, s})
	}
	a, b = a[:len(a)-s], b[:len(b)-s]
	if len(a) == 0 || len(b) == 0 {
		return
	}

	// Lines occurring exactly once on each side, in a's order.
	type cnt struct{ na, nb, ia, ib int }
	c := map[int]*cnt{}
	for i, x := range a {
		e := c[x]
		if e == nil {
			e = &cnt{}
			c[x] = e
		}
		e.na++
		e.ia = i
	}
	for i, x := range b {
		if e := c[x]; e != nil {
			e.nb++
			e.ib = i
		}
	}
	var pairs []match
	for i, x := range a {
		if e := c[x]; e.na == 1 && e.nb == 1 {
			pairs = append(pairs, match{i, e.ib, 1})
		}
	}
	anchors := lis(pairs)
	if len(anchors) == 0 {
		myers(a, b, ao, bo, ms)
		return
	}
	pa, pb := 0, 0
	for _, m := range anchors {
		patience(a[pa:m.A], b[pb:m.B], ao+pa, bo+pb, ms)
		*ms = append(*ms, match{ao + m.A, bo + m.B, 1})
		pa, pb = m.A+1, m.B+1
	}
	patience(a[pa:], b[pb:], ao+pa, bo+pb, ms)
}

// lis returns the longest subsequence of pairs (sorted by A) increasing in B.
func lis(pairs []match) []match {
	if len(pairs) == 0 {
		return nil
	}
	tails := []int{} // index into pairs of the smallest tail of each length
	prev := make([]int, len(pairs))
	for i, p := range pairs {
		j := sort.Search(len(tails), func(j int) bool { return pairs[tails[j]].B >= p.B })
		if j > 0 {
			prev[i] = tails[j-1]
		} else {
			prev[i] = -1
		}
		if j == len(tails) {
			tails = append(tails, i)
		} else {
			tails[j] = i
		}
	}
	out := make([]match, len(tails))
	for i, k := len(tails)-1, tails[len(tails)-1]; i >= 0; i, k = i-1, prev[k] {
		out[i] = pairs[k]
	}
	return out
}

// myers finds a shortest edit script between a and b and appends its
// matched runs (offset by ao, bo). Past maxEdit edits it gives up and
// matches nothing.
func myers(a, b []int, ao, bo int, ms *[]match) {
	n, m := len(a), len(b)
	var trace [][]int // trace[d][k+d] = furthest x on diagonal k after d edits
	get := func(d, k int) int { return trace[d][k+d] }
	for d := 0; d <= n+m && d <= maxEdit; d++ {
		v := make([]int, 2*d+1)
		for k := -d; k <= d; k += 2 {
			var x int
			switch {
			case d == 0:
				x = 0
			case k == -d || k != d && get(d-1, k-1) < get(d-1, k+1):
				x = get(d-1, k+1)
			default:
				x = get(d-1, k-1) + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[k+d] = x
			if x >= n && y >= m {
				trace = append(trace, v)
				myersBack(trace, n, m, ao, bo, ms)
				return
			}
		}
		trace = append(trace, v)
	}
}

func myersBack(trace [][]int, n, m, ao, bo int, ms *[]match) {
	get := func(d, k int) int { return trace[d][k+d] }
	x, y := n, m
	for d := len(trace) - 1; d >= 0; d-- {
		k := x - y
		var sx, sy int // start of the snake that ends at (x, y)
		if d == 0 {
			sx, sy = 0, 0
		} else {
			var pk int
			if k == -d || k != d && get(d-1, k-1) < get(d-1, k+1) {
				pk = k + 1
				sx = get(d-1, pk)
				sy = sx - k
			} else {
				pk = k - 1
				sx = get(d-1, pk) + 1
				sy = sx - k
			}
			_ = pk
		}
		if x > sx {
			*ms = append(*ms, match{ao + sx, bo + sy, x - sx})
		}
		if d > 0 {
			// Step back over the edit to the previous diagonal's end.
			if k == -d || k != d && get(d-1, k-1) < get(d-1, k+1) {
				x, y = sx, sy-1
			} else {
				x, y = sx-1, sy
			}
		}
	}
}
