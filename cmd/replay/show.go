package main

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/cowfs/cowfs/tape"
)

func cmdShow() *command {
	return &command{
		name:      "show",
		usageLine: "show [-canon] [-order MODE] [-op OPS] [-path GLOB] [-json] TAPE|DIR...",
		short:     "print a tape as a readable listing",
		long: `
Show prints each tape (a directory stands for its *.tape files, in name
order; a blank line between tapes): a header line naming the package and test and the
format version, the volatile facts of the header (root, pid, start time)
as comment lines, one line per record (sequence number, operation, path,
then the fields that are set, as key=value), and a last line saying
whether the tape is complete.

-op keeps the records of the given operations (comma-separated: open,
stat, rename, ...). -path keeps the records whose path, or rename target,
matches the glob (path.Match syntax, slash paths relative to the root) or
lies under a directory that matches it.

-canon prints instead the canonical form the comparison of the chosen
-order uses (path: records grouped by path; global: in order without
sequence numbers; set: sorted), of the records the filters keep; with
-order final, the end state all the records leave, one line per changed
path, of the paths -path selects (-op does not apply). Two tapes are equal
in a mode exactly when their canonical forms are.

-json prints, per tape, an object {"file", "name", "header", "records",
"complete"} with the records the filters keep, in the tape's own JSON
form (not with -canon).

Exit status: 0, or 2 when a tape cannot be read or there is nothing to
read (no arguments, or a directory without tapes).
`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			canon := fs.Bool("canon", false, "print the canonical form for -order")
			order := fs.String("order", "path", "comparison `mode` for -canon: path, global, set or final")
			ops := fs.String("op", "", "comma-separated `ops` to keep")
			glob := fs.String("path", "", "keep records whose path matches `glob`")
			asJSON := fs.Bool("json", false, "print one JSON object per tape")
			return func(e *env, args []string) int {
				if *asJSON && *canon {
					return e.usageError("show", "-json and -canon do not combine")
				}
				return runShow(e, args, *canon, *order, *ops, *glob, *asJSON)
			}
		},
	}
}

// recordFilter selects records for show.
type recordFilter struct {
	ops  map[string]bool
	glob string
}

func newRecordFilter(ops, glob string) (*recordFilter, error) {
	f := &recordFilter{glob: glob}
	if ops != "" {
		f.ops = map[string]bool{}
		for op := range strings.SplitSeq(ops, ",") {
			if op = strings.TrimSpace(op); op != "" {
				f.ops[op] = true
			}
		}
	}
	if glob != "" {
		if _, err := path.Match(glob, ""); err != nil {
			return nil, fmt.Errorf("bad -path pattern %q: %w", glob, err)
		}
	}
	return f, nil
}

func (f *recordFilter) keep(r *tape.Record) bool {
	if f.ops != nil && !f.ops[r.Op] {
		return false
	}
	if f.glob == "" {
		return true
	}
	for _, p := range r.Paths() {
		if matchUnder(f.glob, p) {
			return true
		}
	}
	return false
}

// matchUnder reports whether p or one of its parent directories matches
// the glob.
func matchUnder(glob, p string) bool {
	for {
		if ok, _ := path.Match(glob, p); ok {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

func runShow(e *env, args []string, canon bool, order, ops, glob string, asJSON bool) int {
	mode, err := tape.ParseMode(order)
	if err != nil {
		return e.usageError("show", "%v", err)
	}
	filter, err := newRecordFilter(ops, glob)
	if err != nil {
		return e.usageError("show", "%v", err)
	}
	if canon && mode == tape.ModeFinal && ops != "" {
		return e.usageError("show", "-op does not apply to the end state (-canon -order final)")
	}
	files, err := expandTapes(args)
	if err != nil {
		if len(args) == 0 {
			return e.usageError("show", "%v", err)
		}
		return e.trouble("show", err)
	}
	code := exitSame
	for i, file := range files {
		l, err := loadTape(file)
		if err != nil {
			fmt.Fprintf(e.stderr, "replay show: %v\n", err)
			code = exitTrouble
			continue
		}
		if asJSON {
			writeJSON(e.stdout, showJSON(l, filter))
			continue
		}
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		showTape(e.stdout, l, filter, canon, mode, glob)
	}
	return code
}

// showReport is the -json form of one tape.
type showReport struct {
	File     string        `json:"file"`
	Name     string        `json:"name"`
	Header   tape.Header   `json:"header"`
	Records  []tape.Record `json:"records"`
	Complete bool          `json:"complete"`
}

func showJSON(l *loaded, filter *recordFilter) showReport {
	rep := showReport{File: l.file, Name: l.name(), Header: l.t.Header, Records: []tape.Record{}, Complete: !l.t.Truncated}
	for i := range l.t.Records {
		if filter.keep(&l.t.Records[i]) {
			rep.Records = append(rep.Records, l.t.Records[i])
		}
	}
	return rep
}

// showTape prints one tape as runShow describes.
func showTape(w io.Writer, l *loaded, filter *recordFilter, canon bool, mode tape.Mode, glob string) {
	t := l.t
	sel := &tape.Tape{Header: t.Header}
	for i := range t.Records {
		if filter.keep(&t.Records[i]) {
			sel.Records = append(sel.Records, t.Records[i])
		}
	}
	if canon && mode == tape.ModeFinal {
		// The end state is that of all the records; -path picks its lines.
		for _, line := range t.Final() {
			if glob == "" || matchUnder(glob, finalLinePath(line)) {
				fmt.Fprintln(w, line)
			}
		}
		return
	}
	if canon {
		for _, line := range sel.Canon(mode) {
			fmt.Fprintln(w, line)
		}
		return
	}
	h := t.Header
	fmt.Fprintf(w, "# %s (%s v%d.%d, %s)\n", l.name(), h.Format, h.Version, h.Minor, h.Hash)
	for _, k := range slices.Sorted(maps.Keys(h.Info)) {
		fmt.Fprintf(w, "# %s: %s\n", k, h.Info[k])
	}
	for i := range sel.Records {
		fmt.Fprintln(w, sel.Records[i].String())
	}
	switch {
	case t.Truncated:
		fmt.Fprintf(w, "# truncated: no trailer after %s\n", plural(len(t.Records), "record"))
	default:
		shown := ""
		if len(sel.Records) != len(t.Records) {
			shown = fmt.Sprintf(", %d shown", len(sel.Records))
		}
		fmt.Fprintf(w, "# complete: %s%s\n", plural(t.Trailer.Records, "record"), shown)
	}
}

// finalLinePath returns the path a line of tape.Tape.Final is about: its
// first field, quoted when it holds odd bytes.
func finalLinePath(line string) string {
	if strings.HasPrefix(line, `"`) {
		if q, err := strconv.QuotedPrefix(line); err == nil {
			if p, err := strconv.Unquote(q); err == nil {
				return p
			}
		}
	}
	p, _, _ := strings.Cut(line, " ")
	return p
}
