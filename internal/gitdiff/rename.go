package gitdiff

import (
	"bytes"
	"fmt"
	"path"
	"slices"
)

// Rename detection as git's diffcore-rename does it with its defaults
// (diff.renames=true, -M50%, renameLimit 1000): exact renames first (same
// blob, and the same mode unless both are regular files), then pairs of
// unique basenames at a stricter score, then the best-scoring pairs of a
// similarity matrix. Scores are git's: 60000 for identical content,
// "similarity index" is score*100/60000.
const (
	maxScore      = 60000
	minScore      = maxScore / 2                     // -M50%
	basenameScore = minScore + (maxScore-minScore)/2 // git's default basename factor, 0.5
	renameLimit   = 1000                             // diff.renameLimit
	candidatesPer = 4                                // NUM_CANDIDATE_PER_DST
	spanHashBase  = 107927                           // HASHBASE of diffcore-delta.c
	firstFewBytes = 8000                             // git's buffer_is_binary window
	spanMax       = 64                               // the longest chunk hashed
)

// rename pairs a deletion (src) with a creation (dst), indexes into the
// sorted changes, with git's score.
type rename struct {
	src, dst int
	score    int
}

// candidate is one loaded side that may take part in a rename.
type candidate struct {
	idx  int // into the sorted changes
	path string
	s    *side
	id   string      // blob id
	span []spanCount // similarity fingerprint, computed on demand
	used bool        // src: already renamed
}

// findRenames pairs deletions with creations. srcs and dsts are in path
// order. It returns the pairs by destination index. The three passes are
// git's: exact renames, unique basenames, the similarity matrix.
func findRenames(srcs, dsts []*candidate) map[int]rename {
	r := &renamer{srcs: srcs, dsts: dsts, paired: make([]bool, len(dsts)), out: map[int]rename{}}
	if len(srcs) == 0 || len(dsts) == 0 {
		return r.out
	}
	r.exact()
	r.basenames()
	r.matrix()
	return r.out
}

// renamer is the state the passes of findRenames share.
type renamer struct {
	srcs, dsts []*candidate
	paired     []bool // by index into dsts
	out        map[int]rename
}

// pair records srcs[j] as renamed to dsts[i].
func (r *renamer) pair(j, i, score int) {
	r.srcs[j].used, r.paired[i] = true, true
	r.out[r.dsts[i].idx] = rename{src: r.srcs[j].idx, dst: r.dsts[i].idx, score: score}
}

// exact pairs, for each destination in path order, the first unused
// source with the same blob, one with the same basename preferred; like
// git, at most 100 candidates are weighed.
func (r *renamer) exact() {
	byID := map[string][]int{}
	for j, s := range r.srcs {
		byID[s.id] = append(byID[s.id], j)
	}
	for i, d := range r.dsts {
		best, bestScore, left := -1, -1, 100
		for _, j := range byID[d.id] {
			s := r.srcs[j]
			if s.used || (!isRegular(s.s.mode) || !isRegular(d.s.mode)) && s.s.mode != d.s.mode {
				continue
			}
			score := 1
			if basenameSame(s.path, d.path) {
				score++
			}
			if score > bestScore {
				best, bestScore = j, score
				if score == 2 {
					break
				}
			}
			if left--; left == 0 {
				break
			}
		}
		if best >= 0 {
			r.pair(best, i, maxScore)
		}
	}
}

// basenames pairs the basenames unique on both sides among what is left,
// at the stricter score.
func (r *renamer) basenames() {
	srcByBase, dstByBase := map[string]int{}, map[string]int{}
	for j, s := range r.srcs {
		if !s.used {
			uniqueIndex(srcByBase, path.Base(s.path), j)
		}
	}
	for i, d := range r.dsts {
		if !r.paired[i] {
			uniqueIndex(dstByBase, path.Base(d.path), i)
		}
	}
	for j, s := range r.srcs {
		if s.used {
			continue
		}
		base := path.Base(s.path)
		i, ok := dstByBase[base]
		if srcByBase[base] != j || !ok || i < 0 || r.paired[i] {
			continue
		}
		if score := similarity(s, r.dsts[i], basenameScore); score >= basenameScore {
			r.pair(j, i, score)
		}
	}
}

// matrixEntry is one cell of the similarity matrix.
type matrixEntry struct {
	src, dst  int // into srcs, dsts; dst < 0: unused slot
	score     int
	nameScore int
}

// cmpMatrixEntry is git's score_compare: unused slots last, then higher
// score, then the same basename.
func cmpMatrixEntry(a, b matrixEntry) int {
	switch {
	case a.dst < 0 && b.dst < 0:
		return 0
	case a.dst < 0:
		return 1
	case b.dst < 0:
		return -1
	case a.score == b.score:
		return b.nameScore - a.nameScore
	}
	return b.score - a.score
}

// matrix takes, for each destination left, its best four sources, then
// pairs by descending score, the same basename first on a tie.
func (r *renamer) matrix() {
	var left []int
	for i := range r.dsts {
		if !r.paired[i] {
			left = append(left, i)
		}
	}
	var nsrc int
	for _, s := range r.srcs {
		if !s.used {
			nsrc++
		}
	}
	if len(left) == 0 || nsrc == 0 || !underRenameLimit(len(left), nsrc) {
		return
	}
	mx := make([]matrixEntry, 0, len(left)*candidatesPer)
	for _, i := range left {
		mx = append(mx, r.bestSources(i)...)
	}
	slices.SortStableFunc(mx, cmpMatrixEntry)
	for _, e := range mx {
		if e.dst < 0 || e.score < minScore {
			break
		}
		if !r.paired[e.dst] && !r.srcs[e.src].used {
			r.pair(e.src, e.dst, e.score)
		}
	}
}

// bestSources returns the candidatesPer best unused sources of dsts[i],
// unused slots marked by dst < 0.
func (r *renamer) bestSources(i int) []matrixEntry {
	m := []matrixEntry{{dst: -1}, {dst: -1}, {dst: -1}, {dst: -1}}
	for j, s := range r.srcs {
		if s.used {
			continue
		}
		e := matrixEntry{src: j, dst: i, score: similarity(s, r.dsts[i], minScore)}
		if basenameSame(s.path, r.dsts[i].path) {
			e.nameScore = 1
		}
		worst := 0
		for k := 1; k < candidatesPer; k++ {
			if cmpMatrixEntry(m[k], m[worst]) > 0 {
				worst = k
			}
		}
		if cmpMatrixEntry(m[worst], e) > 0 {
			m[worst] = e
		}
	}
	return m
}

// uniqueIndex records v under k, or -1 when k is already there.
func uniqueIndex(m map[string]int, k string, v int) {
	if _, ok := m[k]; ok {
		m[k] = -1
		return
	}
	m[k] = v
}

// underRenameLimit is git's too_many_rename_candidates test.
func underRenameLimit(ndst, nsrc int) bool {
	return (ndst <= renameLimit || nsrc <= renameLimit) && uint64(ndst)*uint64(nsrc) <= renameLimit*renameLimit
}

// basenameSame reports whether the two paths end in the same name.
func basenameSame(a, b string) bool {
	return path.Base(a) == path.Base(b)
}

// similarity is git's estimate_similarity: 0 unless both are regular
// files whose sizes are close enough for min, else the share of the
// larger file's material found in the source, scaled to maxScore.
func similarity(src, dst *candidate, minimum int) int {
	if !isRegular(src.s.mode) || !isRegular(dst.s.mode) || src.s.big != nil || dst.s.big != nil {
		// A streamed file is never held whole: only an exact rename
		// (same blob id) pairs it.
		return 0
	}
	ss, ds := len(src.s.data), len(dst.s.data)
	maxSize, baseSize := max(ss, ds), min(ss, ds)
	delta := maxSize - baseSize
	if uint64(maxSize)*uint64(maxScore-minimum) < uint64(delta)*maxScore {
		return 0
	}
	if ds == 0 {
		return 0
	}
	if src.span == nil {
		src.span = spanHash(src.s.data)
	}
	if dst.span == nil {
		dst.span = spanHash(dst.s.data)
	}
	copied := countCopied(src.span, dst.span)
	return int(copied * maxScore / uint64(maxSize))
}

func isRegular(mode uint32) bool { return mode == modeRegular || mode == modeExecutable }

// spanCount is how many bytes of a file fell in chunks of one hash.
type spanCount struct {
	hash uint32
	cnt  uint32 // as git's unsigned int
}

// spanHash is git's hash_chars (diffcore-delta.c): the content cut after
// each LF or 64 bytes, whichever comes first, each chunk hashed into one
// of about 2^17 values, bytes counted per value. A CR before an LF is
// skipped in text. As in git, a last chunk without LF shorter than 64
// bytes is not counted. The result is sorted by hash and never empty (a
// zero count ends it, as in git's table).
func spanHash(data []byte) []spanCount {
	text := bytes.IndexByte(data[:min(len(data), firstFewBytes)], 0) < 0
	counts := map[uint32]uint32{}
	var acc1, acc2 uint32
	n := 0
	for i := 0; i < len(data); i++ {
		c := uint32(data[i])
		if text && c == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			continue
		}
		old1 := acc1
		acc1 = (acc1 << 7) ^ (acc2 >> 25)
		acc2 = (acc2 << 7) ^ (old1 >> 25)
		acc1 += c
		n++
		if n < spanMax && c != '\n' {
			continue
		}
		counts[(acc1+acc2*0x61)%spanHashBase] += uint32(n)
		n, acc1, acc2 = 0, 0, 0
	}
	out := make([]spanCount, 0, len(counts)+1)
	for h, c := range counts {
		out = append(out, spanCount{h, c})
	}
	slices.SortFunc(out, func(a, b spanCount) int { return int(a.hash) - int(b.hash) })
	return append(out, spanCount{}) // the terminator
}

// countCopied is diffcore_count_changes' src_copied: per chunk hash, the
// bytes found in both.
func countCopied(src, dst []spanCount) uint64 {
	var copied uint64
	d := 0
	for _, s := range src {
		if s.cnt == 0 {
			break
		}
		for dst[d].cnt != 0 && dst[d].hash < s.hash {
			d++
		}
		var dc uint32
		if dst[d].cnt != 0 && dst[d].hash == s.hash {
			dc = dst[d].cnt
			d++
		}
		copied += uint64(min(s.cnt, dc))
	}
	return copied
}

// rename renders a rename: git's header (mode lines, similarity, rename
// from and to), then the content change, if any, as for a modification.
func (e *encoder) rename(from, to string, old, new *side, score int) error {
	w := e.w
	aName, bName := quoteName("a/", from), quoteName("b/", to)
	w.WriteString("diff --git ")
	w.WriteString(aName)
	w.WriteByte(' ')
	w.WriteString(bName)
	w.WriteByte('\n')
	if old.mode != new.mode {
		fmt.Fprintf(w, "old mode %06o\nnew mode %06o\n", old.mode, new.mode)
	}
	fmt.Fprintf(w, "similarity index %d%%\nrename from %s\nrename to %s\n", score*100/maxScore, quoteName("", from), quoteName("", to))
	if same, err := sameContent(old, new); same || err != nil {
		return err
	}
	return e.body(from, to, aName, bName, old, new)
}
