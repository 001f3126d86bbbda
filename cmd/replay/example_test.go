package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/tape"
)

// recordExample writes a tape of a small program writing report.txt with
// the given text, as a test using the cowfs helpers records it.
func recordExample(file, text string) error {
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	defer out.Close()
	rec := tape.NewRecorder(out, tape.WithTest("example.com/demo", "TestReport"))
	mem := afero.NewMemMapFs()
	mem.MkdirAll("/work", 0o755)
	fsys := rec.Wrap(mem, "/work")
	afero.WriteFile(fsys, "/work/report.txt", []byte(text), 0o644)
	fsys.Rename("/work/report.txt", "/work/final.txt")
	return rec.Close()
}

// replay show -canon -order final prints the end state a tape records,
// which is what -order final compares.
func Example_show() {
	dir, _ := os.MkdirTemp("", "replay-example-")
	defer os.RemoveAll(dir)
	a := filepath.Join(dir, "a.tape")
	if err := recordExample(a, "hello\n"); err != nil {
		panic(err)
	}
	code := run([]string{"show", "-canon", "-order", "final", a})
	fmt.Println("exit", code)
	// Output:
	// final.txt moved from=report.txt size=6 hash=8e4c7c1b99dbfd50e7a95185fead5ee1448fa904a2fdd778eaf5f2dbfd629a99 perm=-rw-r--r--
	// report.txt deleted
	// exit 0
}
