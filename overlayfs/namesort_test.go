package overlayfs

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomNames returns n names built to stress a byte-wise radix sort:
// shared prefixes of every length, names that are prefixes of others,
// duplicates, empty names and bytes above 0x7f.
func randomNames(r *rand.Rand, n int) []string {
	alphabets := []string{"ab", "f0123456789", "\x00\x01\x7f\x80\xfe\xff", "abcdefghijklmnopqrstuvwxyz._-/"}
	prefixes := []string{"", "f", "file_", "testdata_fixture_", strings.Repeat("p", 40)}
	out := make([]string, n)
	for i := range out {
		alpha := alphabets[r.IntN(len(alphabets))]
		var b strings.Builder
		b.WriteString(prefixes[r.IntN(len(prefixes))])
		for range r.IntN(12) {
			b.WriteByte(alpha[r.IntN(len(alpha))])
		}
		out[i] = b.String()
		if i > 0 && r.IntN(8) == 0 {
			out[i] = out[r.IntN(i)] // a duplicate
		}
	}
	return out
}

// TestSortByName: the radix sort orders names as slices.Sort (a comparison
// sort over strings.Compare) does, for sizes on both sides of the
// insertion-sort cutoff.
func TestSortByName(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 1))
	for trial := range 2000 {
		n := r.IntN(400)
		if trial%100 == 0 {
			n = 5000 + r.IntN(5000)
		}
		got := randomNames(r, n)
		want := slices.Clone(got)
		slices.Sort(want)
		sortByName(got, func(s string) string { return s })
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d names): sorted differently from slices.Sort", trial, n)
		}
	}
}

// FuzzSortByName: names split from the input at '|' sort as slices.Sort
// sorts them.
func FuzzSortByName(f *testing.F) {
	f.Add("b|a|ab|a|")
	f.Add(strings.Repeat("f0|f1|f00|", 20))
	f.Fuzz(func(t *testing.T, in string) {
		got := strings.Split(in, "|")
		want := slices.Clone(got)
		slices.Sort(want)
		sortByName(got, func(s string) string { return s })
		if !slices.Equal(got, want) {
			t.Fatalf("sortByName(%q) = %q, want %q", in, got, want)
		}
	})
}
