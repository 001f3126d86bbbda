package overlayfs

import (
	"slices"
	"strings"
)

// nameCmp is the order of every listing: bytewise, strings.Compare's,
// which is also the order of the layer's B-tree (a directory's children
// come out of it in this order, their subtrees skipped) and git's.
// sortNames sorts by it; merges of sorted listings compare by it.
func nameCmp(a, b string) int { return strings.Compare(a, b) }

// nameOrder returns the indices 0 to n-1 (the idx fields) in bytewise
// order of name(i), as sortNames orders them.
func nameOrder(n int, name func(int) string) []keyed {
	buf := make([]keyed, 2*n) // the order, then the radix sort's scratch
	ks := buf[:n:n]
	for i := range ks {
		ks[i].idx = uint32(i)
	}
	sortNames(ks, buf[n:], func(k keyed) string { return name(int(k.idx)) })
	return ks
}

// sortNames orders ks in nameCmp's order of name(k), with tmp, of the same length,
// as scratch. A directory's names mostly differ in a few bytes after a
// shared prefix, and a comparison sort, which compares whole names about
// log2(n) times each, costs as much as reading the directory. So this
// sorts 8-byte keys taken after the names' common prefix with a radix
// sort, in pointer-free memory, and only names that tie on a key are
// looked at again (from the next 8 bytes on).
func sortNames(ks, tmp []keyed, name func(keyed) string) {
	o := orderer{name: name, tmp: tmp}
	o.sort(ks, 0)
}

// keyed is an element to sort: where its name is (idx and end, which only
// the name function reads) with 8 bytes of its name as a big-endian
// number (zero past the name's end).
type keyed struct {
	key      uint64
	idx, end uint32
}

type orderer struct {
	name func(keyed) string
	tmp  []keyed
}

// sort orders ks, whose names agree on their first depth bytes.
func (o *orderer) sort(ks []keyed, depth int) {
	if len(ks) < 2 {
		return
	}
	depth += o.commonPrefix(ks, depth)
	longer := false // some name goes on past the key's 8 bytes
	for i := range ks {
		n := o.name(ks[i])
		ks[i].key = key8(n, depth)
		longer = longer || len(n) > depth+8
	}
	if len(ks) < 64 {
		slices.SortFunc(ks, func(a, b keyed) int {
			switch {
			case a.key < b.key:
				return -1
			case a.key > b.key:
				return 1
			}
			return 0
		})
	} else {
		radixKeys(ks, o.tmp[:len(ks)])
	}
	for i := 0; i < len(ks); {
		j := i + 1
		for j < len(ks) && ks[j].key == ks[i].key {
			j++
		}
		if j-i > 1 {
			if longer {
				o.sort(ks[i:j], depth+8)
			} else {
				// Equal but for zero bytes past the shorter ends: the
				// shorter name is its prefix, and first.
				run := ks[i:j]
				slices.SortFunc(run, func(a, b keyed) int { return len(o.name(a)) - len(o.name(b)) })
			}
		}
		i = j
	}
}

// commonPrefix returns how many bytes from depth on every name of ks
// shares.
func (o *orderer) commonPrefix(ks []keyed, depth int) int {
	first := o.name(ks[0])
	if depth > len(first) {
		return 0
	}
	p := first[depth:]
	for _, k := range ks[1:] {
		n := o.name(k)
		if depth > len(n) {
			return 0
		}
		n = n[depth:]
		if strings.HasPrefix(n, p) {
			continue // the usual case, once p is down to the shared part
		}
		m := min(len(p), len(n))
		i := 0
		for i < m && p[i] == n[i] {
			i++
		}
		if p = p[:i]; len(p) == 0 {
			return 0
		}
	}
	return len(p)
}

// key8 returns bytes [depth, depth+8) of n as a big-endian number, zero
// past its end.
func key8(n string, depth int) uint64 {
	if len(n) >= depth+8 {
		b := n[depth : depth+8]
		return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
			uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	}
	var k uint64
	if depth < len(n) {
		rest := n[depth:]
		for i := 0; i < len(rest); i++ {
			k = k<<8 | uint64(rest[i])
		}
		k <<= 8 * (8 - len(rest))
	}
	return k
}

// radixKeys sorts ks by key, least significant byte first, skipping the
// bytes all keys share (counted per pass, so that a pass over a byte that
// does not vary costs nothing); tmp is scratch of the same length.
func radixKeys(ks, tmp []keyed) {
	var diff uint64
	for _, k := range ks {
		diff |= k.key ^ ks[0].key
	}
	src, dst := ks, tmp
	for shift := 0; shift < 64; shift += 8 {
		if byte(diff>>shift) == 0 {
			continue
		}
		var c [256]uint32
		for _, k := range src {
			c[byte(k.key>>shift)]++
		}
		var sum uint32
		for i, n := range c {
			c[i] = sum
			sum += n
		}
		for _, k := range src {
			d := byte(k.key >> shift)
			dst[c[d]] = k
			c[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &ks[0] {
		copy(ks, src)
	}
}
