package main

import (
	"os"
	"strings"
	"testing"
)

// TestTableFromOutput: three runs of one row give the median of each
// metric, formatted; rows without results are left out.
func TestTableFromOutput(t *testing.T) {
	out := `goos: linux
BenchmarkTableStat/depth=32-2   100  5 ns/op  3000 ns/cowfs  1000 ns/peer  3.0 ratio  38 allocs/cowfs  2 allocs/peer
BenchmarkTableStat/depth=32-2   100  5 ns/op  9000 ns/cowfs  1500 ns/peer  6.0 ratio  38 allocs/cowfs  2 allocs/peer
BenchmarkTableStat/depth=32-2   100  5 ns/op  2500 ns/cowfs  1200 ns/peer  2.5 ratio  38 allocs/cowfs  2 allocs/peer
BenchmarkTableChanges-2           5  9 ns/op  206500000 ns/cowfs  408059 allocs/op
PASS
`
	var b strings.Builder
	if err := writeTable(&b, parse([]byte(out))); err != nil {
		t.Fatal(err)
	}
	want := "| Stat of a lower file 32 directories deep | `os.Stat` | ≤ 1.10× | **3.00×** | **not met** | 3.00 µs / 1.20 µs | 38 / 2 |\n" +
		"| `Changes()` of a 100,000-entry layer | — | ≤ 50 ms | 206.5 ms | **not met** | 206.5 ms / — | 408059 |\n"
	lines := strings.SplitAfterN(b.String(), "\n", 3)
	if len(lines) != 3 || lines[2] != want {
		t.Errorf("table:\n%s\nwant rows:\n%s", b.String(), want)
	}
}

// TestAfterCoversEveryRow: the saved run behind the README's table has
// every row of the table. (before.txt and start.txt, measurements of main
// before and during issue 14, have the rows there were then.)
func TestAfterCoversEveryRow(t *testing.T) {
	out, err := os.ReadFile("testdata/after.txt")
	if err != nil {
		t.Fatal(err)
	}
	res := parse(out)
	for _, r := range rows {
		if _, ok := res[r.bench]; !ok {
			t.Errorf("testdata/after.txt has no %s", r.bench)
		}
	}
}

func TestNoResults(t *testing.T) {
	var b strings.Builder
	if err := writeTable(&b, parse([]byte("PASS\n"))); err == nil {
		t.Error("a run without BenchmarkTable lines gives no error")
	}
}
