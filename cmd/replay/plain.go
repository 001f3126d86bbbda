package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cowfs/cowfs/tape"
)

// plainReport is check's account of a tape divergence: one sentence
// saying what differs, then either the shared records in their two orders
// (an order-only difference) or the records around the divergence and a
// text diff of the file versions involved.
func plainReport(name string, a, b *loaded, rep *diffReport, run int) []string {
	if orderOnly(a, b) {
		return orderSummary(name, a, b, run)
	}
	lines := []string{name + ": " + sentence(rep, run)}
	var sb strings.Builder
	writeReport(&sb, rep, "")
	all := strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n")
	return append(lines, all[1:]...) // without "differs in MODE mode (class ...)"
}

// orderOnly says whether a and b hold the same records, in another order.
func orderOnly(a, b *loaded) bool {
	if len(a.t.Records) != len(b.t.Records) || len(a.t.Records) == 0 {
		return false
	}
	_, ds := tape.Diff(a.t, b.t, tape.ModeSet)
	return len(ds) == 0
}

// orderSummary is an order-only divergence in a few lines: the records
// from the first one out of place, in run 1's order and in the other's.
func orderSummary(name string, a, b *loaded, run int) []string {
	as, bs := a.t.Records, b.t.Records
	i := 0
	for i < len(as) && as[i].Op == bs[i].Op && as[i].Path == bs[i].Path {
		i++
	}
	i = min(i, len(as)-1)
	return []string{
		fmt.Sprintf("%s: the same %s, in another order in run %d from record #%d on", name, plural(len(as), "record"), run, i+1),
		fmt.Sprintf("  run 1: %s", briefs(as[i:])),
		fmt.Sprintf("  run %d: %s", run, briefs(bs[i:])),
	}
}

// briefs lists records as "op path", at most eight.
func briefs(rs []tape.Record) string {
	const most = 8
	var out []string
	for i, r := range rs {
		if i == most {
			out = append(out, fmt.Sprintf("... (%d more)", len(rs)-most))
			break
		}
		out = append(out, r.Op+" "+r.Path)
	}
	return strings.Join(out, ", ")
}

// sentence says in words what the first divergence of rep is.
func sentence(rep *diffReport, run int) string {
	if len(rep.Shown) == 0 {
		return fmt.Sprintf("run %d differs from run 1 (%s)", run, rep.Class)
	}
	h := rep.Shown[0]
	for i := range h.aRecs {
		ra := &h.aRecs[i]
		for j := range h.bRecs {
			rb := &h.bRecs[j]
			if ra.Op == rb.Op && ra.Path == rb.Path && !slices.Equal(recLines([]tape.Record{*ra}), recLines([]tape.Record{*rb})) {
				if s := pairSentence(ra, rb, run); s != "" {
					return s
				}
			}
		}
	}
	switch {
	case len(h.aRecs) > 0 && len(h.bRecs) == 0:
		r := h.aRecs[0]
		return fmt.Sprintf("%s: run 1 made %s, run %d did not", what(&r), opWords(&r), run)
	case len(h.bRecs) > 0 && len(h.aRecs) == 0:
		r := h.bRecs[0]
		return fmt.Sprintf("%s: run %d made %s, run 1 did not", what(&r), run, opWords(&r))
	case len(h.aRecs) > 0:
		ra, rb := h.aRecs[0], h.bRecs[0]
		return fmt.Sprintf("run 1 made %s of %s where run %d made %s of %s", opWords(&ra), what(&ra), run, opWords(&rb), what(&rb))
	}
	return fmt.Sprintf("run %d differs from run 1 at %s", run, h.Path)
}

// what names a record's file for a sentence.
func what(r *tape.Record) string {
	if r.Path == "." {
		return "the root"
	}
	return r.Path
}

// opWords is an op in words: "a write", "a stat", ...
func opWords(r *tape.Record) string {
	switch {
	case r.Op == tape.OpOpen && r.Hash != "":
		return "a write"
	case r.Op == tape.OpOpen && r.List != "":
		return "a listing"
	case r.Op == tape.OpOpen && r.RHash != "":
		return "a read"
	case r.Op == tape.OpOpen:
		return "an open"
	case tape.IsCommandOp(r.Op):
		return "a change by the command " + cmdName(r)
	}
	return "a " + r.Op
}

func cmdName(r *tape.Record) string {
	if len(r.Cmd) == 0 {
		return "(unknown)"
	}
	return filepath.Base(r.Cmd[0])
}

// pairSentence says how two records of one op on one path differ, or "".
func pairSentence(a, b *tape.Record, run int) string {
	p := what(a)
	switch {
	case a.Err != b.Err:
		return fmt.Sprintf("%s of %s %s in run 1, %s in run %d", a.Op, p, outcomeWords(a.Err), outcomeWords(b.Err), run)
	case a.Op == tape.OpCmdWrite && a.Hash != b.Hash:
		return fmt.Sprintf("%s was written by the command %s with different bytes in run %d", p, cmdName(a), run)
	case a.Op == tape.OpOpen && a.Hash != "" && b.Hash != "" && a.Hash != b.Hash:
		return fmt.Sprintf("%s was written with different bytes in run %d", p, run)
	case a.Op == tape.OpOpen && (a.Hash == "") != (b.Hash == ""):
		if a.Hash != "" {
			return fmt.Sprintf("%s was written in run 1, not in run %d", p, run)
		}
		return fmt.Sprintf("%s was written in run %d, not in run 1", p, run)
	case a.Op == tape.OpOpen && a.List != b.List:
		return fmt.Sprintf("the listing of %s had other names in run %d (%d names, run 1: %d)", p, run, b.N, a.N)
	case a.Op == tape.OpOpen && a.RHash != b.RHash:
		return fmt.Sprintf("%s had other content when read in run %d", p, run)
	case a.Op == tape.OpOpen && !slices.Equal(a.Spans, b.Spans):
		return fmt.Sprintf("%s was read over other bytes in run %d (%s; run 1: %s)", p, run, spans(b.Spans, b.RSize), spans(a.Spans, a.RSize))
	case a.Mode != b.Mode:
		return fmt.Sprintf("%s of %s saw mode %s in run 1, %s in run %d", a.Op, p, a.Mode, b.Mode, run)
	case a.Size != b.Size:
		return fmt.Sprintf("%s of %s saw %d bytes in run 1, %d in run %d", a.Op, p, a.Size, b.Size, run)
	case a.Flag != b.Flag:
		return fmt.Sprintf("%s was opened with flags %s in run 1, %s in run %d", p, a.Flag, b.Flag, run)
	case a.Target != b.Target:
		return fmt.Sprintf("%s of %s had target %q in run 1, %q in run %d", a.Op, p, a.Target, b.Target, run)
	}
	return ""
}

func outcomeWords(err string) string {
	if err == "" {
		return "succeeded"
	}
	return "failed (" + err + ")"
}

// spans describes the bytes read of a file of size n.
func spans(ss []tape.Span, n int64) string {
	var read int64
	for _, s := range ss {
		read += s.Len
	}
	return fmt.Sprintf("%d of %d bytes", read, n)
}
