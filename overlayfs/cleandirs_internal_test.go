package overlayfs

import (
	"math/rand/v2"
	"path"
	"strings"
	"testing"
)

// cleanOracle is what cleanRel decides, said with path.Clean: a relative
// slash path that cleaning leaves as it is, that does not climb out with
// "..", and whose components are C strings the kernel takes as names.
func cleanOracle(rel string) bool {
	if rel == "" || path.Clean(rel) != rel || strings.HasPrefix(rel, "/") ||
		rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, "\x00") {
		return false
	}
	for c := range strings.SplitSeq(rel, "/") {
		if len(c) > nameMax {
			return false
		}
	}
	return true
}

// TestCleanRel compares cleanRel with cleanOracle on names built from the
// bytes that matter (slash, dot, NUL, a letter) and on long components.
func TestCleanRel(t *testing.T) {
	long := strings.Repeat("x", nameMax)
	fixed := []string{"", "a", ".", "..", "...", ".a", "a.", "a/.", "a/..", "./a", "../a", "a/./b",
		"a/../b", "a//b", "/a", "a/", "a\x00", long, long + "x", "a/" + long, "a/" + long + "x",
		long + "x/a", long + "/a/" + long}
	r := rand.New(rand.NewPCG(14, 14))
	alphabet := []string{"/", ".", "a", "\x00", "..", long}
	for range 20000 {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		fixed = append(fixed, b.String())
	}
	for _, rel := range fixed {
		dir, ok := cleanRel(rel)
		if want := cleanOracle(rel); ok != want {
			t.Errorf("cleanRel(%q) = %v, want %v", rel, ok, want)
			continue
		}
		want := path.Dir(rel)
		if want == "." {
			want = ""
		}
		if ok && dir != want {
			t.Errorf("cleanRel(%q) dir = %q, want %q", rel, dir, want)
		}
	}
}
