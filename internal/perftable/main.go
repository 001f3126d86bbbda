// Command perftable prints the README's performance table: it runs the
// BenchmarkTable* benchmarks of package overlayfs (each row runs cowfs and
// its peer interleaved in rounds and reports medians), takes the median of
// each metric over the -count runs, and prints one markdown row per
// benchmark.
//
//	go run ./internal/perftable                 # run and print
//	go run ./internal/perftable -count 5 -benchtime 2s
//	go run ./internal/perftable -in bench.txt   # print from saved output
//
// Run it from the module root.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// row describes one benchmark of the table.
type row struct {
	bench    string // benchmark name without the -GOMAXPROCS suffix
	workload string
	peer     string
	goal     string
}

// The goals are the issues' (issue 14's table; issue 26 set Stat of a lower
// file with a non-empty layer at 1.15×, the price of dropping the lock-free
// Stat tier, for both rows of that workload).
var rows = []row{
	{"BenchmarkTableReadFile4K/layer=nonempty", "ReadFile of a 4 KiB lower file, layer not empty", "`os.ReadFile`", "≤ 1.05×"},
	{"BenchmarkTableReadFile4K/layer=empty/friendly", "ReadFile of a 4 KiB lower file, empty layer (friendly)", "`os.ReadFile`", "—"},
	{"BenchmarkTableReadFile4K/floor=afero.OsFs", "ReadFile of a 4 KiB file: afero.ReadFile over afero.OsFs (the floor)", "`os.ReadFile`", "—"},
	{"BenchmarkTableStat/layer=nonempty", "Stat of a lower file, layer not empty", "`os.Stat`", "≤ 1.15×"},
	{"BenchmarkTableStat/layer=samedir", "Stat of a lower file beside 100 layer files in its directory", "`os.Stat`", "≤ 1.15×"},
	{"BenchmarkTableStat/depth=32", "Stat of a lower file 32 directories deep", "`os.Stat`", "≤ 1.10×"},
	{"BenchmarkTableStat/layer=empty/friendly", "Stat of a lower file, empty layer (friendly)", "`os.Stat`", "—"},
	{"BenchmarkTableWriteFile4K/overwrite-64", "WriteFile overwriting 4 KiB layer files (64 names cycled)", "MemMapFs, same", "≤ 1.0×"},
	{"BenchmarkTableWriteFile4K/new", "WriteFile of new 4 KiB files", "MemMapFs", "≤ 1.0×"},
	{"BenchmarkTableWriteFile4K/New+first", "`New(root)` + WriteFile of a new file in an empty lower directory", "afero CopyOnWriteFs, same", "—"},
	{"BenchmarkTableWriteFile4K/New+first/dir=1000", "`New(root)` + WriteFile of a new file beside 1,000 lower files", "afero CopyOnWriteFs, same", "—"},
	{"BenchmarkTableNewAppend/New", "`New(root)` + first append to a 4 KiB lower file", "afero CopyOnWriteFs, same", "≤ 0.5×"},
	{"BenchmarkTableNewAppend/Reset/friendly", "`Reset()` + first append to a 4 KiB lower file (friendly)", "afero CopyOnWriteFs, new", "—"},
	{"BenchmarkTableReaddir/Readdir/entries=1000", "Readdir(-1) of a 1,000-entry directory (all lower but one)", "os", "≤ 1.10×"},
	{"BenchmarkTableReaddir/Readdir/entries=10000", "Readdir(-1), 10,000 entries", "os", "≤ 1.10×"},
	{"BenchmarkTableReaddir/Readdirnames/entries=10000", "Readdirnames(-1), 10,000 entries", "os", "≤ 1.30×"},
	{"BenchmarkTableWalk10k", "afero.Walk over a 10,000-file lower tree", "afero.Walk(OsFs)", "≤ 1.10×"},
	{"BenchmarkTableTape/ReadFile4K", "tape on vs off: 4 KiB reads, tape written to a file as helpers does", "the bare overlay", "≤ 1.20×"},
	{"BenchmarkTableTape/Stat", "tape on vs off: Stat, tape written to a file as helpers does", "the bare overlay", "≤ 1.20×"},
	{"BenchmarkTableTape/ReadFile4K/tape=discard/friendly", "tape on vs off: 4 KiB reads, tape to io.Discard (friendly)", "the bare overlay", "—"},
	{"BenchmarkTableTape/Stat/tape=discard/friendly", "tape on vs off: Stat, tape to io.Discard (friendly)", "the bare overlay", "—"},
	{"BenchmarkTableHeapPerFile", "heap per 16-byte layer file", "MemMapFs", "≤ 1.0×"},
	{"BenchmarkTableChanges", "`Changes()` of a 100,000-entry layer", "—", "≤ 50 ms"},
}

func main() {
	count := flag.Int("count", 3, "runs of each benchmark; the table shows the median")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	in := flag.String("in", "", "read saved `go test -bench` output instead of running it")
	flag.Parse()
	var out []byte
	var err error
	if *in != "" {
		out, err = os.ReadFile(*in)
	} else {
		out, err = runBench(*count, *benchtime)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "perftable:", err)
		os.Exit(1)
	}
	if err := writeTable(os.Stdout, parse(out)); err != nil {
		fmt.Fprintln(os.Stderr, "perftable:", err)
		os.Exit(1)
	}
}

func runBench(count int, benchtime string) ([]byte, error) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^BenchmarkTable",
		"-count", strconv.Itoa(count), "-benchtime", benchtime, "./overlayfs/")
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(&buf, os.Stderr)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	return buf.Bytes(), nil
}

var procSuffix = regexp.MustCompile(`-\d+$`)

// parse collects, per benchmark name, every value of every metric unit.
func parse(out []byte) map[string]map[string][]float64 {
	res := map[string]map[string][]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		m := res[name]
		if m == nil {
			m = map[string][]float64{}
			res[name] = m
		}
		// f[1] is the iteration count; then value/unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			m[f[i+1]] = append(m[f[i+1]], v)
		}
	}
	return res
}

func med(v []float64) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

// dur formats nanoseconds for a table cell.
func dur(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.1f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	default:
		return fmt.Sprintf("%.0f ns", ns)
	}
}

func writeTable(w io.Writer, res map[string]map[string][]float64) error {
	var b strings.Builder
	b.WriteString("| workload | peer | goal | now (median ratio) | met | cowfs / peer time | allocs/op cowfs / peer |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	missing := 0
	for _, r := range rows {
		m, ok := res[r.bench]
		if !ok {
			missing++
			continue
		}
		get := func(unit string) (float64, bool) { return med(m[unit]) }
		var cow, peer, ratio, allocs string
		var now float64 // what the goal is checked against
		haveNow := false
		if r.bench == "BenchmarkTableHeapPerFile" {
			c, _ := get("B/cowfs")
			p, _ := get("B/peer")
			cow, peer = fmt.Sprintf("%.0f B", c), fmt.Sprintf("%.0f B", p)
			allocs = "—"
		} else {
			c, _ := get("ns/cowfs")
			cow = dur(c)
			now, haveNow = c/1e6, r.peer == "—" // an absolute goal, in ms
			if p, ok := get("ns/peer"); ok {
				peer = dur(p)
			} else {
				peer = "—"
			}
			ca, ok1 := get("allocs/cowfs")
			pa, ok2 := get("allocs/peer")
			switch {
			case ok1 && ok2:
				allocs = fmt.Sprintf("%.0f / %.0f", ca, pa)
			default:
				a, _ := get("allocs/op")
				allocs = fmt.Sprintf("%.0f", a)
			}
		}
		if x, ok := get("ratio"); ok {
			ratio = fmt.Sprintf("**%.2f×**", x)
			now, haveNow = x, true
		} else {
			ratio = cow
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s / %s | %s |\n", r.workload, r.peer, r.goal, ratio, met(r.goal, now, haveNow), cow, peer, allocs)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if missing == len(rows) {
		return fmt.Errorf("no BenchmarkTable results in the input")
	}
	return nil
}

// met says whether now meets goal, "≤ X×" (a ratio) or "≤ X ms" (a time
// in ms): "met", "not met", or "—" where there is no goal.
func met(goal string, now float64, ok bool) string {
	g := strings.TrimSpace(strings.TrimPrefix(goal, "≤"))
	g = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(g, "×"), "ms"))
	limit, err := strconv.ParseFloat(g, 64)
	if err != nil || !ok || !strings.HasPrefix(goal, "≤") {
		return "—"
	}
	if now <= limit {
		return "met"
	}
	return "**not met**"
}
