package gitdiff

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestDistinctLimit runs the line differ at go-diff's real limit: at
// maxDistinct distinct common lines it still diffs minimally, one more and
// it rewrites the region instead of handing go-diff runes it cannot hold.
func TestDistinctLimit(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds two files of 1.1 million lines: skipped in -short and -race runs")
	}
	for _, n := range []int{int(maxDistinct), int(maxDistinct) + 1} {
		common := make([]string, n)
		for i := range common {
			common[i] = fmt.Sprintf("%d\n", i)
		}
		a := append(common[:n:n], "old last\n")
		b := append([]string{"new first\n"}, common...)
		var d lineDiffer
		ca, cb := d.diff(a, b)
		changed := 0
		for _, c := range ca {
			if c {
				changed++
			}
		}
		for _, c := range cb {
			if c {
				changed++
			}
		}
		want := 2
		if n > int(maxDistinct) {
			want = len(a) + len(b)
		}
		if changed != want {
			t.Errorf("%d distinct lines: %d changed lines, want %d", n, changed, want)
		}
	}
}

// TestDistinctLimitFallbackApplies lowers the limit so that the whole-region
// rewrite shows up in small patches, and applies them with git and
// go-gitdiff.
func TestDistinctLimitFallbackApplies(t *testing.T) {
	old := strings.Repeat("keep\n", 10) + "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\n" + strings.Repeat("tail\n", 10)
	new := strings.Repeat("keep\n", 10) + "A\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nL\n" + strings.Repeat("tail\n", 10)
	var buf bytes.Buffer
	e := encoder{w: bufio.NewWriter(&buf)}
	e.differ.maxDistinct = 5
	if err := e.change(&Change{Path: "f", Old: reg(old).file(), New: reg(new).file()}, nil); err != nil {
		t.Fatal(err)
	}
	e.w.Flush()
	// 12 lines out, 12 in, 3 lines of context each side.
	if !strings.Contains(buf.String(), "@@ -8,18 +8,18 @@\n") {
		t.Fatalf("want the changed region rewritten whole:\n%s", buf.Bytes())
	}
	oldTree, newTree := tree{"f": reg(old)}, tree{"f": reg(new)}
	got, err := applyGoGitdiff(oldTree, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if d := treeDiff(newTree, got); d != "" {
		t.Fatal(d)
	}
	roundTrip(t, gitPath(t), oldTree, newTree, buf.Bytes())
}

// TestBudgetFallback: past the work budget the changed region is rewritten
// whole, fast, and the patch still applies with git; under it the diff
// stays minimal.
func TestBudgetFallback(t *testing.T) {
	var a, b []string
	for i := range 200 {
		a = append(a, fmt.Sprintf("%d\n", i%7))
		b = append(b, fmt.Sprintf("%d\n", (i*3)%7))
	}
	d := lineDiffer{budget: 1000}
	ca, cb := d.diff(a, b)
	p, s := 0, 0
	for a[p] == b[p] {
		p++
	}
	for a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	for i := p; i < len(a)-s; i++ {
		if !ca[i] || !cb[i] {
			t.Fatalf("line %d: want lines %d to %d rewritten whole past the budget", i, p, len(a)-s)
		}
	}
	d = lineDiffer{}
	ca, cb = d.diff(a, b)
	checkDiff(t, a, b, ca, cb)

	var buf bytes.Buffer
	e := encoder{w: bufio.NewWriter(&buf)}
	e.differ.budget = 1000
	old, new := strings.Join(a, ""), strings.Join(b, "")
	if err := e.change(&Change{Path: "f", Old: reg(old).file(), New: reg(new).file()}, nil); err != nil {
		t.Fatal(err)
	}
	e.w.Flush()
	roundTrip(t, gitPath(t), tree{"f": reg(old)}, tree{"f": reg(new)}, buf.Bytes())
}
