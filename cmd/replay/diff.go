package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/cowfs/cowfs/internal/gitdiff"
	"github.com/cowfs/cowfs/tape"
)

func cmdDiff() *command {
	return &command{
		name:      "diff",
		usageLine: "diff [-order MODE] [-U N] [-all] [-json] [-any-test] [-content DIR] A B",
		short:     "compare two tapes, or two directories of tapes",
		long: `
Diff compares tape A with tape B and prints where they first differ, as a
hunk of records in unified-diff form: context records equal on both sides,
then A's records prefixed "-" and B's prefixed "+", each with its sequence
number. The records are aligned, not compared by position, so one extra
record is one hunk and what follows it still matches. Nothing is printed
when the tapes are equal in the chosen mode.

-order chooses what must be equal: path (the default; per path, the same
operations and outcomes in the same order; interleaving between paths is
ignored), global (every record in order), set (the same records in any
order) or final (the same end state). In set mode every unmatched record
is listed.

When A and B are directories, their *.tape files are paired by the package
and test in their headers; a tape present on one side only is a difference.
When one is a directory and the other a tape, the tape is compared with
its counterpart in the directory. Each pair gets a line, as replay check
prints them: "ok  PKG  TEST  CLASS", or "--- DIVERGE: TEST (PKG)"
followed by its hunk. Two tapes that differ are reported the same way,
the hunk after "--- A" and "+++ B" lines naming the files.

When the bytes of two differing versions of a file were captured (the
cowfs helpers keep them in "content" beside the tapes, see
tape.WithContent), diff also prints a git-style text diff of the two
versions. Captured bytes are looked up in the directories given with
-content, then in "<tape name>.content" and "content" beside each tape.

A truncated tape (no trailer) is compared on the records it has, with a
warning on standard error. It never equals a complete tape: when those
records all match, the pair differs with class "truncated".

-all shows every hunk instead of the first: the sequences (each path's in
path mode) are aligned once, as tape.CompareAll does (patience anchors,
then Myers' diff), and every stretch that differs is a hunk, in the order
the records were made. In final mode every differing stretch of end-state
lines is a hunk.

-json prints one JSON object per compared pair instead of text.

Two tape files whose headers name different tests (package or test name)
are not compared: diff says so on standard error and exits 1, unless
-any-test asks to compare them anyway.

Exit status: 0 when equal, 1 when they differ, 2 when a tape cannot be
read, there is nothing to read (directories without tapes) or the
arguments are wrong.
`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			o := &diffOpts{}
			fs.StringVar(&o.order, "order", "path", "comparison `mode`: path, global, set or final")
			fs.IntVar(&o.context, "U", tape.ContextLen, "show `N` equal records of context around a hunk")
			fs.BoolVar(&o.all, "all", false, "show every hunk, not only the first")
			fs.BoolVar(&o.json, "json", false, "print JSON objects instead of text")
			fs.BoolVar(&o.anyTest, "any-test", false, "compare two tapes even when they are of different tests")
			fs.Var(&o.content, "content", "look up captured file contents in `DIR` (repeatable)")
			return func(e *env, args []string) int { return runDiff(e, args, o) }
		},
	}
}

type diffOpts struct {
	order   string
	mode    tape.Mode
	context int
	all     bool
	json    bool
	anyTest bool
	content listFlag
}

// diffReport is the outcome of comparing one pair; it is also the -json form.
type diffReport struct {
	Name      string        `json:"name"`
	Package   string        `json:"package,omitempty"`
	Test      string        `json:"test,omitempty"`
	A         string        `json:"a,omitempty"`
	B         string        `json:"b,omitempty"`
	Mode      string        `json:"mode"`
	Equal     bool          `json:"equal"`
	Class     string        `json:"class,omitempty"` // identical, interleaving-only, data, missing, truncated
	Hunks     int           `json:"hunks"`           // differing hunks in the mode (unmatched records in set mode)
	Truncated []string      `json:"truncated,omitempty"`
	Shown     []hunk        `json:"shown,omitempty"`
	Contents  []contentDiff `json:"contents,omitempty"`

	class tape.Class // Class, for check's verdict
}

// hunk is one differing stretch, with equal records around it.
type hunk struct {
	Path   string   `json:"path,omitempty"`
	AIndex int      `json:"aIndex"`
	BIndex int      `json:"bIndex"`
	Before []string `json:"before,omitempty"`
	A      []string `json:"a"`
	B      []string `json:"b"`
	After  []string `json:"after,omitempty"`

	aRecs, bRecs []tape.Record
}

// contentDiff is a text diff between two captured versions of a file.
type contentDiff struct {
	Path  string `json:"path"`
	AHash string `json:"aHash"`
	BHash string `json:"bHash"`
	Patch string `json:"patch,omitempty"`
	Note  string `json:"note,omitempty"`
	// Order: the two versions hold the same lines in another order; Patch
	// then summarizes them in a few lines instead of a line diff.
	Order bool `json:"order,omitempty"`
}

func runDiff(e *env, args []string, o *diffOpts) int {
	var err error
	if o.mode, err = tape.ParseMode(o.order); err != nil {
		return e.usageError("diff", "%v", err)
	}
	if o.context < 0 {
		return e.usageError("diff", "-U must not be negative")
	}
	if len(args) != 2 {
		return e.usageError("diff", "want two tapes or directories, got %s", plural(len(args), "argument"))
	}
	fa, err := os.Stat(args[0])
	if err != nil {
		return e.trouble("diff", err)
	}
	fb, err := os.Stat(args[1])
	if err != nil {
		return e.trouble("diff", err)
	}
	if fa.IsDir() || fb.IsDir() {
		return diffSets(e, args[0], args[1], o)
	}
	a, err := loadTape(args[0])
	if err != nil {
		return e.trouble("diff", err)
	}
	b, err := loadTape(args[1])
	if err != nil {
		return e.trouble("diff", err)
	}
	ha, hb := a.t.Header, b.t.Header
	if !o.anyTest && (ha.Package != hb.Package || ha.Test != hb.Test) {
		fmt.Fprintf(e.stderr, "replay diff: the tapes are of different tests: %s is %s, %s is %s (-any-test compares them anyway)\n",
			a.file, testName(ha.Package, ha.Test, a.file), b.file, testName(hb.Package, hb.Test, b.file))
		return exitDiffers
	}
	rep := compareLoaded(a, b, o)
	warnTruncated(e, rep)
	if o.json {
		writeJSON(e.stdout, rep)
	} else if !rep.Equal {
		// The format of every divergence, in check and diff alike.
		fmt.Fprintf(e.stdout, "--- DIVERGE: %s\n    --- %s\n    +++ %s\n", rep.Name, a.file, b.file)
		writeReport(e.stdout, rep, "    ")
	}
	if rep.Equal {
		return exitSame
	}
	return exitDiffers
}

// loadSide reads the tapes of one side of diff: a directory's, or one file.
func loadSide(name string) (ls []*loaded, dir bool, err error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, false, err
	}
	if fi.IsDir() {
		ls, err = loadDir(name)
		return ls, true, err
	}
	l, err := loadTape(name)
	if err != nil {
		return nil, false, err
	}
	return []*loaded{l}, false, nil
}

// diffSets compares two sides of which at least one is a directory. Tapes
// are paired by test; a file side stands for its one test, so that
// "diff run-1/x.tape run-2" compares x with its counterpart in run-2.
func diffSets(e *env, da, db string, o *diffOpts) int {
	la, dirA, err := loadSide(da)
	if err != nil {
		return e.trouble("diff", err)
	}
	lb, dirB, err := loadSide(db)
	if err != nil {
		return e.trouble("diff", err)
	}
	ma, mb := byKey(la), byKey(lb)
	if len(ma) == 0 && len(mb) == 0 {
		return e.trouble("diff", fmt.Errorf("no *.tape files in %s or %s: %w", da, db, errNothingToRead))
	}
	keys := sortedKeys(ma, mb)
	switch {
	case !dirA:
		keys = sortedKeys(ma)
	case !dirB:
		keys = sortedKeys(mb)
	}
	code := exitSame
	for _, k := range keys {
		a, b := ma[k], mb[k]
		var rep *diffReport
		switch {
		case a == nil:
			rep = &diffReport{B: b.file, Mode: o.mode.String(), Class: "missing", Hunks: 1}
		case b == nil:
			rep = &diffReport{A: a.file, Mode: o.mode.String(), Class: "missing", Hunks: 1}
		default:
			rep = compareLoaded(a, b, o)
			warnTruncated(e, rep)
		}
		rep.Package, rep.Test = keyTest(k, cmp.Or(a, b))
		rep.Name = testName(rep.Package, rep.Test, cmp.Or(a, b).file)
		if !rep.Equal {
			code = exitDiffers
		}
		if o.json {
			writeJSON(e.stdout, rep)
			continue
		}
		switch {
		case rep.Equal:
			fmt.Fprint(e.stdout, okLine(rep.Package, rep.Test, rep.Name, rep.Class))
		case a == nil:
			fmt.Fprintf(e.stdout, "--- DIVERGE: %s\n    only in %s: %s\n", rep.Name, db, b.file)
		case b == nil:
			fmt.Fprintf(e.stdout, "--- DIVERGE: %s\n    only in %s: %s\n", rep.Name, da, a.file)
		default:
			fmt.Fprintf(e.stdout, "--- DIVERGE: %s\n", rep.Name)
			writeReport(e.stdout, rep, "    ")
		}
	}
	return code
}

// keyTest returns the package and test of a byKey key of l, the test with
// the " #N" of a second tape of one test.
func keyTest(k string, l *loaded) (pkg, test string) {
	pkg, test = l.t.Header.Package, l.t.Header.Test
	if i := strings.LastIndex(k, " #"); i >= 0 && (pkg != "" || test != "") {
		test += k[i:]
	}
	return pkg, test
}

func warnTruncated(e *env, rep *diffReport) {
	for _, f := range rep.Truncated {
		fmt.Fprintf(e.stderr, "replay diff: %s is truncated (no trailer); comparing the records it has\n", f)
	}
}

func writeJSON(w io.Writer, v any) {
	b, _ := json.Marshal(v) // plain structs of strings and ints: cannot fail
	w.Write(append(b, '\n'))
}

// compareLoaded compares two tapes in o.mode with tape.Diff and gathers
// what to show; it renders tape's divergences and computes none itself.
func compareLoaded(a, b *loaded, o *diffOpts) *diffReport {
	rep := &diffReport{Name: a.name(), A: a.file, B: b.file, Mode: o.mode.String()}
	if b.name() != a.name() {
		rep.Name = a.name() + " vs " + b.name()
	}
	for _, l := range []*loaded{a, b} {
		if l.t.Truncated {
			rep.Truncated = append(rep.Truncated, l.file)
		}
	}
	class, ds := tape.Diff(a.t, b.t, o.mode, tape.WithContext(o.context))
	rep.class, rep.Class = class, class.String()
	if len(ds) == 0 {
		if len(rep.Truncated) == 1 {
			// The records match, but one run stopped before its trailer:
			// it is not the same as a run that finished.
			rep.Class, rep.Hunks = "truncated", 1
			return rep
		}
		rep.Equal = true
		return rep
	}
	rep.Hunks = ds[0].Hunks
	rep.Shown = shownHunks(ds, o)
	rep.Contents = contentDiffs(rep.Shown, contentDirs(a.file, o.content), contentDirs(b.file, o.content))
	return rep
}

// shownHunks renders the divergences tape found: the first, or with o.all
// every one. In set mode, where each unmatched record is a divergence of
// its own, it is one hunk listing them all.
func shownHunks(ds []*tape.Divergence, o *diffOpts) []hunk {
	if o.mode == tape.ModeSet {
		h := hunk{AIndex: -1, BIndex: -1}
		for _, d := range ds {
			h.aRecs = append(h.aRecs, d.A...)
			h.bRecs = append(h.bRecs, d.B...)
		}
		h.A, h.B = recLines(h.aRecs), recLines(h.bRecs)
		return []hunk{h}
	}
	if !o.all {
		ds = ds[:1]
	}
	out := make([]hunk, len(ds))
	for i, d := range ds {
		h := hunk{Path: d.Path, AIndex: d.AIndex, BIndex: d.BIndex, aRecs: d.A, bRecs: d.B,
			A: d.ALines, B: d.BLines, Before: d.ContextLines, After: d.AfterLines}
		if d.Mode != tape.ModeFinal { // records print with their sequence numbers
			h.A, h.B, h.Before, h.After = recLines(d.A), recLines(d.B), recLines(d.Context), recLines(d.After)
		}
		out[i] = h
	}
	return out
}

func recLines(rs []tape.Record) []string {
	out := make([]string, len(rs))
	for i := range rs {
		out[i] = rs[i].String()
	}
	return out
}

// contentDiffs pairs, within each hunk, an open record of A with one of B
// on the same path whose content hashes differ, and renders a text diff of
// the two versions when both were captured.
func contentDiffs(hs []hunk, dirsA, dirsB []string) []contentDiff {
	if len(dirsA) == 0 && len(dirsB) == 0 {
		return nil
	}
	var out []contentDiff
	seen := map[[2]string]bool{}
	for _, h := range hs {
		used := make([]bool, len(h.bRecs))
		for _, ra := range h.aRecs {
			ha, pa := contentOf(&ra)
			if ha == "" {
				continue
			}
			for j, rb := range h.bRecs {
				hb, pb := contentOf(&rb)
				if used[j] || hb == "" || pb != pa || hb == ha {
					continue
				}
				used[j] = true
				if seen[[2]string{ha, hb}] {
					break
				}
				seen[[2]string{ha, hb}] = true
				out = append(out, renderContentDiff(pa, ha, hb, dirsA, dirsB))
				break
			}
		}
	}
	return out
}

// contentOf returns the content hash an open record shows (what it wrote,
// else what it read), or a subprocess's write record, and the path the
// content belongs to.
func contentOf(r *tape.Record) (hash, path string) {
	if r.Op == tape.OpCmdWrite {
		return r.Hash, r.Path
	}
	if r.Op != tape.OpOpen {
		return "", ""
	}
	path = r.Path
	if r.To != "" {
		path = r.To
	}
	if r.Hash != "" {
		return r.Hash, path
	}
	return r.RHash, path
}

func renderContentDiff(path, ha, hb string, dirsA, dirsB []string) contentDiff {
	c := contentDiff{Path: path, AHash: ha, BHash: hb}
	a, okA := readContent(dirsA, ha)
	b, okB := readContent(dirsB, hb)
	if !okA || !okB {
		c.Note = "contents not captured"
		return c
	}
	if s, ok := orderOnlyLines(path, a, b); ok {
		c.Patch, c.Order = s, true
		return c
	}
	var buf bytes.Buffer
	err := gitdiff.Write(&buf, []gitdiff.Change{{
		Path: path,
		Old:  &gitdiff.File{Mode: 0o644, Content: func() ([]byte, error) { return a, nil }},
		New:  &gitdiff.File{Mode: 0o644, Content: func() ([]byte, error) { return b, nil }},
	}})
	if err != nil {
		c.Note = err.Error()
		return c
	}
	c.Patch = buf.String()
	return c
}

// writeReport prints a diverging pair's hunks and content diffs, each
// line indented by indent.
func writeReport(w io.Writer, rep *diffReport, indent string) {
	what := plural(int64(rep.Hunks), "hunk")
	if rep.Mode == "set" {
		what = fmt.Sprintf("%d unmatched records", rep.Hunks)
	}
	fmt.Fprintf(w, "%sdiffers in %s mode (class %s, %s)\n", indent, rep.Mode, rep.Class, what)
	if rep.Class == "truncated" {
		fmt.Fprintf(w, "%s%s is truncated (no trailer) and the other is complete; the records it has match\n", indent, rep.Truncated[0])
	}
	for _, h := range rep.Shown {
		switch {
		case h.Path != "":
			fmt.Fprintf(w, "%s@@ %s @@\n", indent, h.Path)
		case h.AIndex >= 0:
			fmt.Fprintf(w, "%s@@ a#%d b#%d @@\n", indent, h.AIndex+1, h.BIndex+1)
		default:
			fmt.Fprintf(w, "%s@@ only on one side @@\n", indent)
		}
		for _, l := range h.Before {
			fmt.Fprintf(w, "%s %s\n", indent, l)
		}
		for _, l := range h.A {
			fmt.Fprintf(w, "%s-%s\n", indent, l)
		}
		for _, l := range h.B {
			fmt.Fprintf(w, "%s+%s\n", indent, l)
		}
		for _, l := range h.After {
			fmt.Fprintf(w, "%s %s\n", indent, l)
		}
	}
	for _, c := range rep.Contents {
		if c.Patch == "" {
			fmt.Fprintf(w, "%s(%s: %s %s..%s)\n", indent, c.Path, c.Note, short(c.AHash), short(c.BHash))
			continue
		}
		for l := range strings.Lines(c.Patch) {
			fmt.Fprintf(w, "%s%s", indent, l)
		}
		if !strings.HasSuffix(c.Patch, "\n") {
			fmt.Fprintln(w)
		}
	}
}

func short(h string) string { return h[:min(len(h), 12)] }

// orderOnlyLines summarizes two versions of a text file that hold the
// same lines in another order (map iteration, goroutines): a line diff of
// them is as long as the file and says nothing more.
func orderOnlyLines(path string, a, b []byte) (string, bool) {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	if len(la) != len(lb) || bytes.Equal(a, b) {
		return "", false
	}
	sa, sb := slices.Sorted(slices.Values(la)), slices.Sorted(slices.Values(lb))
	if !slices.Equal(sa, sb) {
		return "", false
	}
	n := len(la)
	if la[n-1] == "" {
		n-- // the final newline
	}
	if n < 3 {
		return "", false // a diff is as short
	}
	i := 0
	for la[i] == lb[i] {
		i++
	}
	first := func(ls []string) string {
		const most = 6
		var out []string
		for j, l := range ls {
			if j == most {
				out = append(out, fmt.Sprintf("... (%d more)", len(ls)-most))
				break
			}
			out = append(out, l)
		}
		return strings.Join(out, " | ")
	}
	return fmt.Sprintf("%s: the same %d lines in another order, from line %d on\n  a: %s\n  b: %s\n",
		path, n, i+1, first(la[i:n]), first(lb[i:n])), true
}
