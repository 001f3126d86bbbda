package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/tape"
)

// writeBenchTape records n files of which every hundredth differs when
// variant is set, as a test suite with a few divergent writes does.
func writeBenchTape(b *testing.B, file string, n int, variant bool) {
	var buf bytes.Buffer
	rec := tape.NewRecorder(&buf, tape.WithTest("p", "T"))
	mem := afero.NewMemMapFs()
	mem.MkdirAll("/r/out", 0o755)
	fsys := rec.Wrap(mem, "/r")
	for i := range n {
		text := fmt.Sprintf("file %d\n", i)
		if variant && i%100 == 0 {
			text = "changed\n"
		}
		name := fmt.Sprintf("/r/out/f%05d.txt", i)
		if err := afero.WriteFile(fsys, name, []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
		fsys.Stat(name)
	}
	if err := rec.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDiff compares two 20,000-record tapes whose paths differ in 100
// places: reading them alone (the floor), replay diff showing the first
// divergence, and replay diff -all showing every hunk.
func BenchmarkDiff(b *testing.B) {
	dir := b.TempDir()
	a, c := filepath.Join(dir, "a.tape"), filepath.Join(dir, "b.tape")
	writeBenchTape(b, a, 10000, false)
	writeBenchTape(b, c, 10000, true)
	e := &env{ctx: context.Background(), stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := loadTape(a); err != nil {
				b.Fatal(err)
			}
			if _, err := loadTape(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, bc := range []struct {
		name string
		args []string
	}{
		{"first", []string{"diff", a, c}},
		{"all", []string{"diff", "-all", a, c}},
		{"global-all", []string{"diff", "-order", "global", "-all", a, c}},
	} {
		args := bc.args
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if code := e.main(args); code != exitDiffers {
					b.Fatalf("exit %d", code)
				}
			}
		})
	}
}
