package overlayfs

import "slices"

// nameOrder returns the indices of s (the idx fields) in bytewise order of
// name(s[i]) (strings.Compare's order, which is the layer's and git's). A
// directory's names mostly differ in a few bytes after a shared prefix,
// and a comparison sort, which compares whole names about log2(n) times
// each, costs as much as reading the directory. So this sorts 8-byte keys
// taken after the names' common prefix with a radix sort, in pointer-free
// memory, and only names that tie on a key are looked at again (from the
// next 8 bytes on).
func nameOrder[T any](s []T, name func(T) string) []keyed {
	buf := make([]keyed, 2*len(s)) // the order, then the radix sort's scratch
	ks := buf[:len(s):len(s)]
	for i := range ks {
		ks[i].idx = uint32(i)
	}
	o := orderer[T]{s: s, name: name, tmp: buf[len(s):]}
	o.sort(ks, 0)
	return ks
}

// keyed is an element's index with 8 bytes of its name as a big-endian
// number (zero past the name's end).
type keyed struct {
	key uint64
	idx uint32
}

type orderer[T any] struct {
	s    []T
	name func(T) string
	tmp  []keyed
}

// sort orders ks, whose names agree on their first depth bytes.
func (o *orderer[T]) sort(ks []keyed, depth int) {
	if len(ks) < 2 {
		return
	}
	depth += o.commonPrefix(ks, depth)
	longer := false // some name goes on past the key's 8 bytes
	for i := range ks {
		n := o.name(o.s[ks[i].idx])
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
				slices.SortFunc(run, func(a, b keyed) int { return len(o.name(o.s[a.idx])) - len(o.name(o.s[b.idx])) })
			}
		}
		i = j
	}
}

// commonPrefix returns how many bytes from depth on every name of ks
// shares.
func (o *orderer[T]) commonPrefix(ks []keyed, depth int) int {
	first := o.name(o.s[ks[0].idx])
	if depth > len(first) {
		return 0
	}
	p := first[depth:]
	for _, k := range ks[1:] {
		n := o.name(o.s[k.idx])
		if depth > len(n) {
			return 0
		}
		n = n[depth:]
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
	var k uint64
	for i := depth; i < depth+8; i++ {
		k <<= 8
		if i < len(n) {
			k |= uint64(n[i])
		}
	}
	return k
}

// radixKeys sorts ks by key, least significant byte first, skipping the
// bytes all keys share; tmp is scratch of the same length.
func radixKeys(ks, tmp []keyed) {
	var counts [8][256]int
	for _, k := range ks {
		for b := range 8 {
			counts[b][byte(k.key>>(8*b))]++
		}
	}
	src, dst := ks, tmp
	for b := range 8 {
		c := &counts[b]
		if c[byte(src[0].key>>(8*b))] == len(src) {
			continue
		}
		sum := 0
		for i, n := range c {
			c[i] = sum
			sum += n
		}
		for _, k := range src {
			d := byte(k.key >> (8 * b))
			dst[c[d]] = k
			c[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &ks[0] {
		copy(ks, src)
	}
}
