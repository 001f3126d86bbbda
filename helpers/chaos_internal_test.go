package helpers

import (
	"slices"
	"testing"

	"github.com/spf13/afero"
)

// FuzzChaosPermutation: every listing order is a permutation, never the
// identity from two elements on, and a function of seed, key and listing
// count alone.
func FuzzChaosPermutation(f *testing.F) {
	f.Add(uint64(0), "dir", uint8(2))
	f.Add(uint64(42), ".", uint8(20))
	f.Add(uint64(1<<63), "a/b", uint8(255))
	f.Fuzz(func(t *testing.T, seed uint64, key string, n uint8) {
		mem := afero.NewMemMapFs()
		a, b := newChaosFs(mem, seed, mem), newChaosFs(mem, seed, mem)
		for round := range 3 {
			p, q := a.permutation(key, int(n)), b.permutation(key, int(n))
			if !slices.Equal(p, q) {
				t.Fatalf("round %d: same seed and key, %v and %v", round, p, q)
			}
			sorted := slices.Sorted(slices.Values(p))
			for i, v := range sorted {
				if i != v {
					t.Fatalf("not a permutation of 0..%d: %v", n-1, p)
				}
			}
			if n >= 2 && slices.Equal(p, sorted) {
				t.Fatalf("identity for %d elements", n)
			}
			// Listings of another key do not move this key's sequence.
			b.permutation(key+"/other", int(n))
		}
	})
}
