package gitdiff

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	hunkHeader = regexp.MustCompile(`(?m)^@@ -[0-9,]+ \+[0-9,]+ @@`)
	funcCtx    = regexp.MustCompile(`(?m)^(@@ -[0-9,]+ \+[0-9,]+ @@).*$`)
	indexLine  = regexp.MustCompile(`(?m)^index .*$`)
)

// hunkText is the part of a one-file patch after its ---/+++ lines, without
// the function context git appends to hunk headers, and its index line.
func hunkText(patch []byte) (index, body string) {
	s := string(patch)
	index = indexLine.FindString(s)
	if i := strings.Index(s, "\n@@ "); i >= 0 {
		body = funcCtx.ReplaceAllString(s[i+1:], "$1")
	}
	return index, body
}

// gitHunks runs git diff --no-index on two files holding a and b and
// returns its hunk headers (without the function context git appends),
// the number of its body lines starting with '-' or '+', and the raw patch.
func gitHunks(t *testing.T, git, dir, a, b string) (headers []string, changed int, patch []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte(a), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b"), []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := gitCmd(git, dir, nil, "diff", "--no-index", "--no-color", "a", "b")
	if len(stderr) > 0 || (err != nil && !bytes.Contains(out, []byte("@@"))) {
		t.Fatalf("git diff: %v\n%s", err, stderr)
	}
	return hunkHeader.FindAllString(string(out), -1), countChanged(out), out
}

// countChanged counts hunk body lines that delete or add a line.
func countChanged(patch []byte) int {
	n := 0
	inHunk := false
	for l := range strings.SplitSeq(string(patch), "\n") {
		switch {
		case strings.HasPrefix(l, "@@"):
			inHunk = true
		case strings.HasPrefix(l, "diff --git"):
			inHunk = false
		case inHunk && (strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+")):
			n++
		}
	}
	return n
}

func ourHunks(t *testing.T, a, b string) (headers []string, changed int, patch []byte) {
	t.Helper()
	var buf bytes.Buffer
	err := Write(&buf, []Change{{Path: "f", Old: entry{0o644, a}.file(), New: entry{0o644, b}.file()}})
	if err != nil {
		t.Fatal(err)
	}
	return hunkHeader.FindAllString(buf.String(), -1), countChanged(buf.Bytes()), buf.Bytes()
}

// sameHunks reports where our one-file patch differs from git's, from the
// index line to the last hunk line, or "".
func sameHunks(ours, gits []byte) string {
	oi, ob := hunkText(ours)
	gi, gb := hunkText(gits)
	if oi != gi {
		return fmt.Sprintf("index line: got %q, want %q", oi, gi)
	}
	if ob != gb {
		return fmt.Sprintf("hunks:\ngot:\n%s\nwant:\n%s", ob, gb)
	}
	return ""
}

// uniqueLines returns n distinct lines.
func uniqueLines(r *rand.Rand, n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d %x\n", i, r.Uint32())
	}
	return lines
}

// editLines applies k random insertions, deletions and replacements of
// fresh lines.
func editLines(r *rand.Rand, lines []string, k int) []string {
	out := append([]string(nil), lines...)
	for e := range k {
		i := r.IntN(len(out) + 1)
		fresh := fmt.Sprintf("edit %d %x\n", e, r.Uint32())
		switch {
		case r.IntN(3) == 0 || i == len(out):
			out = append(out[:i], append([]string{fresh}, out[i:]...)...)
		case r.IntN(2) == 0:
			out = append(out[:i], out[i+1:]...)
		default:
			out[i] = fresh
		}
	}
	return out
}

// TestHunkHeadersMatchGit compares hunks with git diff --no-index. With
// distinct lines the minimal diff is unique, so headers, bodies and the
// index line must be equal.
// With code-like text full of repeated lines ("}", blank lines) minimal
// diffs are not unique: the line count must never exceed git's (go-diff is
// minimal; git's xdiff is not always), and where it is equal the headers
// must match too, which exercises the port of git's sliding and indent
// heuristic.
func TestHunkHeadersMatchGit(t *testing.T) {
	git := gitPath(t)
	dir := t.TempDir()
	n := 150
	if testing.Short() {
		n = 30
	}
	for i := range n {
		r := rand.New(rand.NewPCG(uint64(i), 5))
		a := uniqueLines(r, r.IntN(200))
		b := editLines(r, a, r.IntN(8)+1)
		as, bs := strings.Join(a, ""), strings.Join(b, "")
		if r.IntN(3) == 0 && len(bs) > 0 {
			bs = bs[:len(bs)-1]
		}
		want, _, gp := gitHunks(t, git, dir, as, bs)
		got, _, op := ourHunks(t, as, bs)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("case %d: distinct lines:\ngot  %q\nwant %q", i, got, want)
		} else if d := sameHunks(op, gp); d != "" {
			t.Errorf("case %d: distinct lines: %s", i, d)
		}
	}
	code := []string{"}\n", "\n", "\tif err != nil {\n", "\t\treturn err\n", "\t}\n", "func f() {\n", "\tx++\n", "// doc\n"}
	equalCounts, sameHeaders, sameBodies := 0, 0, 0
	for i := range n {
		r := rand.New(rand.NewPCG(uint64(i), 6))
		a := make([]string, r.IntN(80))
		for j := range a {
			a[j] = code[r.IntN(len(code))]
		}
		b := append([]string(nil), a...)
		for range r.IntN(4) + 1 {
			j := r.IntN(len(b) + 1)
			block := []string{code[r.IntN(len(code))], code[r.IntN(len(code))], code[r.IntN(len(code))]}
			if r.IntN(2) == 0 || j+3 > len(b) {
				b = append(b[:j], append(block, b[j:]...)...)
			} else {
				b = append(b[:j], b[j+3:]...)
			}
		}
		as, bs := strings.Join(a, ""), strings.Join(b, "")
		want, wantN, gp := gitHunks(t, git, dir, as, bs)
		got, gotN, op := ourHunks(t, as, bs)
		if gotN > wantN {
			t.Errorf("case %d: %d changed lines, git has %d", i, gotN, wantN)
		}
		if gotN == wantN {
			equalCounts++
			if strings.Join(got, "\n") == strings.Join(want, "\n") {
				sameHeaders++
				if sameHunks(op, gp) == "" {
					sameBodies++
				}
			} else {
				t.Errorf("case %d: repetitive text:\ngot  %q\nwant %q", i, got, want)
			}
		}
	}
	// Bodies may differ where two minimal diffs keep different copies of a
	// repeated line (go-diff and xdiff break ties differently): only logged.
	t.Logf("repetitive text: %d/%d cases with git's line count, %d of them with git's exact headers, %d with git's exact hunk bodies",
		equalCounts, n, sameHeaders, sameBodies)
}
