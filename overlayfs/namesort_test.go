package overlayfs

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomNames returns n names built to stress a byte-wise radix sort:
// shared prefixes of every length, names that are prefixes of others,
// duplicates, empty names and bytes above 0x7f.
func randomNames(r *rand.Rand, n int) []string {
	alphabets := []string{"ab", "f0123456789", "\x00\x01\x7f\x80\xfe\xff", "abcdefghijklmnopqrstuvwxyz._-/", "\x00a"}
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

// TestNameOrder: nameOrder, and sortNames over spans of one text, order
// names as slices.SortFunc over nameCmp, the listings' one comparator, does, for sizes on both sides of the radix sort's
// cutoff, with names equal but for trailing zero bytes.
func TestNameOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 1))
	for trial := range 2000 {
		n := r.IntN(400)
		if trial%100 == 0 {
			n = 5000 + r.IntN(5000)
		}
		got := randomNames(r, n)
		want := slices.Clone(got)
		slices.SortFunc(want, nameCmp)
		if !slices.Equal(inOrderText(got), want) {
			t.Fatalf("trial %d (%d names, from one text): sorted differently from slices.Sort", trial, n)
		}
		got = inOrder(got)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d names): sorted differently from slices.Sort", trial, n)
		}
	}
}

// FuzzNameOrder: names split from the input at '|' (and more made from
// them, past the radix sort's cutoff) come in the order slices.Sort gives
// them, from nameOrder and from sortNames over spans of one text.
func FuzzNameOrder(f *testing.F) {
	f.Add("b|a|ab|a|")
	f.Add(strings.Repeat("f0|f1|f00|", 20))
	f.Add("a\x00|a|a\x00\x00|" + strings.Repeat("0123456789abcdef|", 6))
	f.Fuzz(func(t *testing.T, in string) {
		got := strings.Split(in, "|")
		// Past the radix sort's cutoff too: each name again with a byte
		// of the input after it.
		for i := 0; len(got) < 80 && i < 80; i++ {
			got = append(got, got[i%len(got)]+in[i%max(1, len(in)):][:min(1, len(in))])
		}
		want := slices.Clone(got)
		slices.SortFunc(want, nameCmp)
		if text := inOrderText(got); !slices.Equal(text, want) {
			t.Fatalf("sortNames(%q) from one text = %q, want %q", in, text, want)
		}
		got = inOrder(got)
		if !slices.Equal(got, want) {
			t.Fatalf("nameOrder(%q) = %q, want %q", in, got, want)
		}
	})
}

// inOrder returns names in nameOrder's order.
func inOrder(names []string) []string {
	out := make([]string, 0, len(names))
	for _, k := range nameOrder(len(names), func(i int) string { return names[i] }) {
		out = append(out, names[k.idx])
	}
	return out
}

// inOrderText returns names in sortNames's order, sorted as a directory
// listing sorts them: as spans of one text holding every name.
func inOrderText(names []string) []string {
	text := strings.Join(names, "")
	ks := make([]keyed, 2*len(names))
	off := 0
	for i, n := range names {
		ks[i] = keyed{idx: uint32(off), end: uint32(off + len(n))}
		off += len(n)
	}
	sortNames(ks[:len(names)], ks[len(names):], func(k keyed) string { return text[k.idx:k.end] })
	out := make([]string, 0, len(names))
	for _, k := range ks[:len(names)] {
		out = append(out, text[k.idx:k.end])
	}
	return out
}

// BenchmarkSortNames: sortNames over a directory's names as a listing
// holds them (spans of one text), in a shuffled order, as ext4 gives.
func BenchmarkSortNames(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			var text strings.Builder
			ks := make([]keyed, 2*n)
			for i, j := range r.Perm(n) {
				off := text.Len()
				fmt.Fprintf(&text, "f%05d", j)
				ks[i] = keyed{idx: uint32(off), end: uint32(text.Len())}
			}
			s := text.String()
			orig := slices.Clone(ks[:n])
			name := func(k keyed) string { return s[k.idx:k.end] }
			b.ReportAllocs()
			for b.Loop() {
				copy(ks, orig)
				sortNames(ks[:n], ks[n:], name)
			}
		})
	}
}
