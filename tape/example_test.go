package tape_test

import (
	"bytes"
	"fmt"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/tape"
)

// run is the code under test: it reads a config and writes a report.
func run(fsys afero.Fs, greeting string) {
	cfg, _ := afero.ReadFile(fsys, "/work/config.txt")
	afero.WriteFile(fsys, "/work/out/report.txt", append(cfg, greeting...), 0o644)
}

func record(greeting string) *tape.Tape {
	mem := afero.NewMemMapFs()
	afero.WriteFile(mem, "/work/config.txt", []byte("name=demo\n"), 0o644)
	mem.MkdirAll("/work/out", 0o755)

	var buf bytes.Buffer
	rec := tape.NewRecorder(&buf, tape.WithTest("example.com/demo", "TestReport"))
	run(rec.Wrap(mem, "/work"), greeting)
	if err := rec.Close(); err != nil {
		panic(err)
	}
	t, err := tape.Read(&buf)
	if err != nil {
		panic(err)
	}
	return t
}

func Example() {
	a, b := record("hello"), record("hello")
	fmt.Println(tape.Compare(a, b, tape.ModePath) == nil)

	c := record("bye")
	class, d := tape.Classify(a, c)
	fmt.Println(class, d.Path, len(d.A), len(d.B))
	// Output:
	// true
	// data out/report.txt 1 1
}

func ExampleTape_Canon() {
	t := record("hello")
	for _, l := range t.Canon(tape.ModeGlobal) {
		fmt.Println(l)
	}
	// Output:
	// fstat config.txt mode=-rw-r--r-- size=10
	// open config.txt flag=r rsize=10 rhash=d9cfbf7b8d7979d7ec5c5030a8e6daae0ed585849408eaf9398e06b904f331f0 spans=0+10
	// open out/report.txt flag=w|create|trunc mode=-rw-r--r-- size=15 hash=7357936cd60e700afe97dabfa406af30273d6bd153a5b65d60d2535cdcc190bd
}
