package relpath_test

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/internal/relpath"
)

// oracle is Below said with package path's and filepath's rules: a
// relative slash path that path.Clean (and, with slashes as separators,
// filepath.Clean and filepath.IsLocal) leaves as it is, naming something
// below the root, with no NUL.
func oracle(rel string) bool {
	if rel == "" || path.Clean(rel) != rel || path.IsAbs(rel) || rel == "." ||
		rel == ".." || strings.HasPrefix(rel, "../") || strings.IndexByte(rel, 0) >= 0 {
		return false
	}
	return true
}

func check(t *testing.T, rel string) {
	t.Helper()
	got, want := relpath.Below(rel), oracle(rel)
	if got != want {
		t.Fatalf("Below(%q) = %v, oracle (path.Clean) says %v", rel, got, want)
	}
	if relpath.Valid(rel) != (want || rel == ".") {
		t.Fatalf("Valid(%q) = %v", rel, relpath.Valid(rel))
	}
	if !got {
		return
	}
	if filepath.Separator == '/' {
		if filepath.Clean(rel) != rel || !filepath.IsLocal(rel) {
			t.Fatalf("Below(%q) but filepath says it is not clean and local", rel)
		}
	}
	if d, pd := relpath.Dir(rel), path.Dir(rel); d != pd {
		t.Fatalf("Dir(%q) = %q, path.Dir %q", rel, d, pd)
	}
	if j := relpath.Join(relpath.Dir(rel), path.Base(rel)); j != rel {
		t.Fatalf("Join(Dir, Base) of %q = %q", rel, j)
	}
	long := 0
	for c := range strings.SplitSeq(rel, "/") {
		long = max(long, len(c))
	}
	for _, m := range []int{1, 3, 255} {
		if relpath.NamesFit(rel, m) != (long <= m) {
			t.Fatalf("NamesFit(%q, %d) = %v, longest component %d", rel, m, !(long <= m), long)
		}
	}
}

func TestBelow(t *testing.T) {
	for _, rel := range []string{"", ".", "..", "...", ".a", "a.", "a", "a/b", "a/.", "a/..", "./a", "../a",
		"a/./b", "a/../b", "a//b", "/a", "a/", "a\x00", "\xff\xfe", "a/.../b", "..a/b..", strings.Repeat("x", 300),
		"...", "a/...", ".a/.b", "a/..", "../", "a\x00b", "a/\x00", "-/_", "a b/c~", "abc/defg/h", strings.Repeat("ab/", 10) + "..",
		strings.Repeat("ab/", 10) + "abc", strings.Repeat("ab/", 11) + "abc"} {
		check(t, rel)
	}
}

// FuzzRelpath: Below and Valid agree with path.Clean and filepath's rules,
// Dir and Join with path's, NamesFit with a split; nothing panics.
func FuzzRelpath(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/b", "a//b", "a/./b", "../x", "/a", "a/", "x\x00y", "....", "a/.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) { check(t, rel) })
}

func ExampleBelow() {
	for _, rel := range []string{"a/b", ".", "a/../b", "a/"} {
		fmt.Println(rel, relpath.Below(rel), relpath.Valid(rel))
	}
	// Output:
	// a/b true true
	// . false true
	// a/../b false false
	// a/ false false
}

// TestWithin compares Within with filepath.Rel: p is within dir when the
// path from dir to p does not climb out of it.
func TestWithin(t *testing.T) {
	paths := []string{".", "a", "ab", "a/b", "a/bc", "a/b/c", "ab/c", "b", "a.b", "a/b.c", "a-", "a-/b"}
	for _, dir := range paths {
		for _, p := range paths[1:] {
			r, err := filepath.Rel(dir, p)
			want := err == nil && r != ".." && !strings.HasPrefix(r, "../")
			if got := relpath.Within(p, dir); got != want {
				t.Errorf("Within(%q, %q) = %v, filepath.Rel says %q", p, dir, got, r)
			}
		}
		if !relpath.Within(dir, "") {
			t.Errorf(`Within(%q, "") = false: every path is within the root`, dir)
		}
	}
}
