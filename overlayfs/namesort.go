package overlayfs

// sortByName sorts s by name(s[i]) in bytewise order (strings.Compare's,
// which is the layer's and git's order). It is a most-significant-byte
// radix sort: a directory's names mostly differ in a few bytes after a
// shared prefix, and comparing whole names, as a comparison sort does
// about log2(n) times per name, cost as much as reading the directory.
func sortByName[T any](s []T, name func(T) string) {
	if len(s) < 2 {
		return
	}
	r := radix[T]{tmp: make([]T, len(s)), keys: make([]uint16, len(s)), name: name}
	r.sort(s, 0)
}

// radixSmall is the bucket size below which an insertion sort is cheaper
// than another counting pass.
const radixSmall = 24

type radix[T any] struct {
	tmp  []T
	keys []uint16 // per element of the bucket being split: 0 for a name that ends at the depth, else its byte there plus 1
	name func(T) string
}

// sort sorts s, whose names all agree on their first depth bytes.
func (r *radix[T]) sort(s []T, depth int) {
	for len(s) > radixSmall {
		var count [257]int
		keys := r.keys[:len(s)]
		for i, x := range s {
			k := uint16(0)
			if n := r.name(x); depth < len(n) {
				k = uint16(n[depth]) + 1
			}
			keys[i] = k
			count[k]++
		}
		if count[keys[0]] == len(s) {
			if keys[0] == 0 {
				return // every name ends here: all equal
			}
			depth++ // one shared byte more
			continue
		}
		var next [257]int
		sum := 0
		for k, c := range count {
			next[k] = sum
			sum += c
		}
		tmp := r.tmp[:len(s)]
		for i, x := range s {
			tmp[next[keys[i]]] = x
			next[keys[i]]++
		}
		copy(s, tmp)
		start := count[0] // names ending here are equal, and first
		for k := 1; k < len(count); k++ {
			if c := count[k]; c > 1 {
				r.sort(s[start:start+c], depth+1)
			}
			start += count[k]
		}
		return
	}
	for i := 1; i < len(s); i++ {
		x := s[i]
		nx := r.name(x)[depth:]
		j := i
		for ; j > 0 && r.name(s[j-1])[depth:] > nx; j-- {
			s[j] = s[j-1]
		}
		s[j] = x
	}
}
