package tape

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// ErrNoContent is returned by ContentDiff when the divergence has no pair
// of content hashes, or their bytes were not captured.
var ErrNoContent = errors.New("tape: no captured content for this divergence")

// ContentDiff returns a line diff ("-" lines from A, "+" from B, three
// lines of context) between the two content versions of the first
// differing records, read from the sidecar directories dirA and dirB of
// [WithContent] (they may be the same). It compares result hashes when
// both records have one, else read hashes. Binary content (not UTF-8) is
// reported by size only.
func (d *Divergence) ContentDiff(dirA, dirB string) (string, error) {
	if len(d.A) == 0 || len(d.B) == 0 {
		return "", ErrNoContent
	}
	a, b := &d.A[0], &d.B[0]
	ha, hb := a.Hash, b.Hash
	if ha == "" || hb == "" {
		ha, hb = a.RHash, b.RHash
	}
	if ha == "" || hb == "" {
		return "", ErrNoContent
	}
	ca, err := ReadContent(dirA, ha)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoContent, err)
	}
	cb, err := ReadContent(dirB, hb)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoContent, err)
	}
	return textDiff(ca, cb), nil
}

func textDiff(a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	if !utf8.Valid(a) || !utf8.Valid(b) || bytes.IndexByte(a, 0) >= 0 || bytes.IndexByte(b, 0) >= 0 {
		return fmt.Sprintf("binary contents differ (%d bytes vs %d bytes)\n", len(a), len(b))
	}
	dmp := diffmatchpatch.New()
	ta, tb, lines := dmp.DiffLinesToChars(string(a), string(b))
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(ta, tb, false), lines)
	var out strings.Builder
	const ctx = 3
	for i, df := range diffs {
		ls := strings.SplitAfter(df.Text, "\n")
		if ls[len(ls)-1] == "" {
			ls = ls[:len(ls)-1]
		}
		prefix := " "
		switch df.Type {
		case diffmatchpatch.DiffDelete:
			prefix = "-"
		case diffmatchpatch.DiffInsert:
			prefix = "+"
		default:
			first, last := i == 0, i == len(diffs)-1
			switch {
			case first && len(ls) > ctx:
				ls = ls[len(ls)-ctx:]
			case last && len(ls) > ctx:
				ls = ls[:ctx]
			case !first && !last && len(ls) > 2*ctx:
				ls = append(append(ls[:ctx:ctx], "...\n"), ls[len(ls)-ctx:]...)
			}
		}
		for _, l := range ls {
			out.WriteString(prefix)
			out.WriteString(l)
			if !strings.HasSuffix(l, "\n") {
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
	}
	return out.String()
}
