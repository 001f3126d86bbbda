package kernel

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// BenchmarkMaterialize10k compares Materialize of a layer of 10,000 small
// files (100 dirs x 100 files) with cp -a of the same tree on disk and with
// a plain os.WriteFile loop, in one run:
//
//	go test -run '^$' -bench Materialize10k -count 6 ./kernel | benchstat -col /impl -
func BenchmarkMaterialize10k(b *testing.B) {
	const dirs, files = 100, 100
	lower := b.TempDir()
	f, err := overlayfs.New(lower)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte("small file content, about sixty bytes long, like a config.\n")
	mt := time.Unix(1.6e9, 0)
	for d := range dirs {
		dir := filepath.Join(lower, fmt.Sprintf("d%03d", d))
		if err := f.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range files {
			p := filepath.Join(dir, fmt.Sprintf("f%03d", i))
			if err := afero.WriteFile(f, p, body, 0o644); err != nil {
				b.Fatal(err)
			}
			if err := f.Chtimes(p, mt, mt); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The same tree on disk, for cp -a to read.
	src := filepath.Join(b.TempDir(), "src")
	if err := Materialize(f, src, Options{}); err != nil {
		b.Fatal(err)
	}
	out := b.TempDir()
	n := 0
	next := func() string {
		n++
		return filepath.Join(out, fmt.Sprint(n))
	}
	clean := func(b *testing.B, p string) {
		b.StopTimer()
		if err := os.RemoveAll(p); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(dirs*files)*float64(b.N)/b.Elapsed().Seconds(), "files/s")
	}

	b.Run("impl=Materialize", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dst := next()
			if err := Materialize(f, dst, Options{}); err != nil {
				b.Fatal(err)
			}
			clean(b, dst)
		}
		report(b)
	})
	b.Run("impl=cp-a", func(b *testing.B) {
		cp, err := exec.LookPath("cp")
		if err != nil {
			b.Skip("no cp")
		}
		b.ReportAllocs()
		for b.Loop() {
			dst := next()
			if out, err := exec.Command(cp, "-a", src, dst).CombinedOutput(); err != nil {
				b.Fatalf("cp -a: %v\n%s", err, out)
			}
			clean(b, dst)
		}
		report(b)
	})
	b.Run("impl=os.WriteFile", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dst := next()
			if err := os.Mkdir(dst, 0o755); err != nil {
				b.Fatal(err)
			}
			for d := range dirs {
				dir := filepath.Join(dst, fmt.Sprintf("d%03d", d))
				if err := os.Mkdir(dir, 0o755); err != nil {
					b.Fatal(err)
				}
				for i := range files {
					if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), body, 0o644); err != nil {
						b.Fatal(err)
					}
				}
			}
			clean(b, dst)
		}
		report(b)
	})
}
