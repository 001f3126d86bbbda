package tape

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// apply rebuilds b from a and the hunks: the hunks are a valid edit script.
func apply(a, b []string, hs []hunk) []string {
	var out []string
	pa := 0
	for _, h := range hs {
		out = append(out, a[pa:h.A0]...)
		out = append(out, b[h.B0:h.B1]...)
		pa = h.A1
	}
	return append(out, a[pa:]...)
}

// lcsLen is the textbook O(nm) dynamic program: the oracle for how many
// lines a minimal alignment keeps.
func lcsLen(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

func TestAlignValidMyersMinimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		gen := func() []string {
			s := make([]string, rng.IntN(12))
			for i := range s {
				s[i] = string(rune('a' + rng.IntN(3)))
			}
			return s
		}
		a, b := gen(), gen()
		hs := align(a, b)
		if got := apply(a, b, hs); !slices.Equal(got, b) {
			t.Fatalf("align(%q, %q) = %v rebuilds %q", a, b, hs, got)
		}
		// Patience anchors trade minimality for stable hunks; the Myers
		// step under them must be minimal.
		ai, bi := make([]int, len(a)), make([]int, len(b))
		for i := range a {
			ai[i] = int(a[i][0])
		}
		for i := range b {
			bi[i] = int(b[i][0])
		}
		var ms []match
		myers(ai, bi, 0, 0, &ms)
		n := 0
		for _, m := range ms {
			n += m.N
		}
		if n != lcsLen(a, b) {
			t.Fatalf("myers(%q, %q) keeps %d lines, the LCS is %d", a, b, n, lcsLen(a, b))
		}
		for i := 1; i < len(hs); i++ {
			if hs[i].A0 <= hs[i-1].A1 && hs[i].B0 <= hs[i-1].B1 {
				t.Fatalf("adjacent hunks not merged: %v", hs)
			}
		}
	}
}

// TestAlignOneEditOneHunk: a single insertion, deletion or replacement in
// a long sequence is always one hunk at the right place.
func TestAlignOneEditOneHunk(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		n := 1 + rng.IntN(200)
		a := make([]string, n)
		for i := range a {
			a[i] = fmt.Sprint("op ", rng.IntN(n/2+1)) // many repeats, some unique
		}
		at := rng.IntN(n)
		b := slices.Clone(a)
		var want hunk
		switch rng.IntN(3) {
		case 0:
			b = slices.Insert(b, at, "extra")
			want = hunk{at, at, at, at + 1}
		case 1:
			b = slices.Delete(b, at, at+1)
			want = hunk{at, at + 1, at, at}
		default:
			b[at] = "changed"
			want = hunk{at, at + 1, at, at + 1}
		}
		hs := align(a, b)
		if len(hs) != 1 {
			t.Fatalf("one edit gave %d hunks: %v", len(hs), hs)
		}
		if !slices.Equal(apply(a, b, hs), b) {
			t.Fatal("invalid script")
		}
		// With repeats the edit may slide to an equal neighbour; the hunk
		// must have the same shape.
		h := hs[0]
		if h.A1-h.A0 != want.A1-want.A0 || h.B1-h.B0 != want.B1-want.B0 {
			t.Fatalf("hunk %v, want the shape of %v", h, want)
		}
	}
}

// TestAlignGivesUpGracefully: two long unrelated sequences still produce a
// valid script quickly (the edit bound caps the work).
func TestAlignGivesUpGracefully(t *testing.T) {
	a, b := make([]string, 20000), make([]string, 20000)
	for i := range a {
		a[i] = fmt.Sprint("a", i%7)
		b[i] = fmt.Sprint("b", i%5)
	}
	hs := align(a, b)
	if !slices.Equal(apply(a, b, hs), b) {
		t.Fatal("invalid script")
	}
}
