package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/cowfs/cowfs/tape"
)

func cmdStat() *command {
	return &command{
		name:      "stat",
		usageLine: "stat [-top N] [-json] TAPE|DIR...",
		short:     "summarize what tapes recorded",
		long: `
Stat prints, for each tape (a directory stands for its *.tape files): how
many records it holds and whether it is complete; the count of each operation; the count of each error class
among failed operations; the bytes read (the spans read through handles)
and written (the size of the content each writing handle left); the
accesses to paths outside the root; the handles still open when the
recorder closed; and the paths with the most records.

-json prints one JSON object per tape instead, with the same counts.

Exit status: 0, or 2 when a tape cannot be read or there is nothing to
read (no arguments, or a directory without tapes).
`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			top := fs.Int("top", 5, "show the `N` busiest paths")
			asJSON := fs.Bool("json", false, "print one JSON object per tape")
			return func(e *env, args []string) int { return runStat(e, args, *top, *asJSON) }
		},
	}
}

// tapeStats is what stat counts in one tape.
type tapeStats struct {
	ops                     map[string]int
	errs                    map[string]int
	paths                   map[string]int
	readBytes, readHandles  int64
	wroteBytes, wroteHandle int64
	outside                 int
	unclosed                []string
}

func countTape(t *tape.Tape) *tapeStats {
	s := &tapeStats{ops: map[string]int{}, errs: map[string]int{}, paths: map[string]int{}}
	for i := range t.Records {
		r := &t.Records[i]
		s.ops[r.Op]++
		if r.Err != "" {
			s.errs[r.Err]++
		}
		out := false
		for _, p := range r.Paths() {
			if p == tape.OutsidePath {
				out = true
				continue
			}
			s.paths[p]++
		}
		if out {
			s.outside++
		}
		if r.Op != tape.OpOpen {
			continue
		}
		if len(r.Spans) > 0 {
			s.readHandles++
			for _, sp := range r.Spans {
				s.readBytes += sp.Len
			}
		}
		if r.Hash != "" {
			s.wroteHandle++
			s.wroteBytes += r.Size
		}
		if r.End == "unclosed" {
			s.unclosed = append(s.unclosed, r.Path)
		}
	}
	return s
}

// topKeys returns the keys of m, largest count first, then by name; at
// most limit of them when limit > 0.
func topKeys(m map[string]int, limit int) []string {
	ks := slices.Collect(maps.Keys(m))
	slices.SortFunc(ks, func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b))
	})
	if limit > 0 && len(ks) > limit {
		ks = ks[:limit]
	}
	return ks
}

// byCount formats a count map as "k n, k n", largest first, then by name.
func byCount(m map[string]int, limit int) string {
	ks := topKeys(m, limit)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func runStat(e *env, args []string, top int, asJSON bool) int {
	if top < 0 {
		return e.usageError("stat", "-top must not be negative")
	}
	files, err := expandTapes(args)
	if err != nil {
		if len(args) == 0 {
			return e.usageError("stat", "%v", err)
		}
		return e.trouble("stat", err)
	}
	code := exitSame
	for i, file := range files {
		l, err := loadTape(file)
		if err != nil {
			fmt.Fprintf(e.stderr, "replay stat: %v\n", err)
			code = exitTrouble
			continue
		}
		if asJSON {
			writeJSON(e.stdout, statJSON(l, top))
			continue
		}
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		writeStats(e.stdout, l, top)
	}
	return code
}

// statReport is the -json form of one tape's statistics.
type statReport struct {
	File         string         `json:"file"`
	Name         string         `json:"name"`
	Records      int            `json:"records"`
	Complete     bool           `json:"complete"`
	Ops          map[string]int `json:"ops"`
	Errors       map[string]int `json:"errors"`
	ReadBytes    int64          `json:"readBytes"`
	ReadHandles  int64          `json:"readHandles"`
	WroteBytes   int64          `json:"wroteBytes"`
	WroteHandles int64          `json:"wroteHandles"`
	Outside      int            `json:"outside"`
	Unclosed     []string       `json:"unclosed"`
	TopPaths     []pathCount    `json:"topPaths,omitempty"`
}

type pathCount struct {
	Path    string `json:"path"`
	Records int    `json:"records"`
}

func statJSON(l *loaded, top int) statReport {
	s := countTape(l.t)
	rep := statReport{
		File: l.file, Name: l.name(), Records: len(l.t.Records), Complete: !l.t.Truncated,
		Ops: s.ops, Errors: s.errs, ReadBytes: s.readBytes, ReadHandles: s.readHandles,
		WroteBytes: s.wroteBytes, WroteHandles: s.wroteHandle, Outside: s.outside,
		Unclosed: append([]string{}, s.unclosed...),
	}
	for _, p := range topKeys(s.paths, top) {
		rep.TopPaths = append(rep.TopPaths, pathCount{p, s.paths[p]})
	}
	return rep
}

func writeStats(w io.Writer, l *loaded, top int) {
	t := l.t
	s := countTape(t)
	state := "complete"
	if t.Truncated {
		state = "truncated (no trailer)"
	}
	fmt.Fprintf(w, "%s: %s, %s, %s\n", l.file, l.name(), plural(len(t.Records), "record"), state)
	fmt.Fprintf(w, "  ops:       %s\n", byCount(s.ops, 0))
	fmt.Fprintf(w, "  errors:    %s\n", byCount(s.errs, 0))
	fmt.Fprintf(w, "  read:      %d bytes through %s\n", s.readBytes, plural(s.readHandles, "handle"))
	fmt.Fprintf(w, "  written:   %d bytes through %s\n", s.wroteBytes, plural(s.wroteHandle, "handle"))
	fmt.Fprintf(w, "  outside:   %s outside the root\n", plural(int64(s.outside), "record"))
	if len(s.unclosed) == 0 {
		fmt.Fprintf(w, "  unclosed:  none\n")
	} else {
		fmt.Fprintf(w, "  unclosed:  %d (%s)\n", len(s.unclosed), strings.Join(s.unclosed, ", "))
	}
	if top > 0 {
		fmt.Fprintf(w, "  top paths: %s\n", byCount(s.paths, top))
	}
}
