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
		usageLine: "stat [-top N] TAPE...",
		short:     "summarize what tapes recorded",
		long: `
Stat prints, for each tape: how many records it holds and whether it is
complete; the count of each operation; the count of each error class
among failed operations; the bytes read (the spans read through handles)
and written (the size of the content each writing handle left); the
accesses to paths outside the root; the handles still open when the
recorder closed; and the paths with the most records.

Exit status: 0, or 2 when a tape cannot be read.
`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			top := fs.Int("top", 5, "show the `N` busiest paths")
			return func(e *env, args []string) int { return runStat(e, args, *top) }
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

// byCount formats a count map as "k n, k n", largest first, then by name.
func byCount(m map[string]int, limit int) string {
	ks := slices.Collect(maps.Keys(m))
	slices.SortFunc(ks, func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b))
	})
	if limit > 0 && len(ks) > limit {
		ks = ks[:limit]
	}
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func runStat(e *env, args []string, top int) int {
	if len(args) == 0 {
		return e.usageError("stat", "no tapes given")
	}
	if top < 0 {
		return e.usageError("stat", "-top must not be negative")
	}
	code := exitSame
	for i, file := range args {
		l, err := loadTape(file)
		if err != nil {
			fmt.Fprintf(e.stderr, "replay stat: %v\n", err)
			code = exitTrouble
			continue
		}
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		writeStats(e.stdout, l, top)
	}
	return code
}

func writeStats(w io.Writer, l *loaded, top int) {
	t := l.t
	s := countTape(t)
	state := "complete"
	if t.Truncated {
		state = "truncated (no trailer)"
	}
	fmt.Fprintf(w, "%s: %s, %d records, %s\n", l.file, l.name(), len(t.Records), state)
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

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
