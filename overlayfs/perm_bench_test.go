package overlayfs_test

// The cost of AsUser when on (issue 24): Stat and an open (Open, Close)
// of a lower file, at the root and four directories down, with AsUser as
// the files' owner (every check made, every one passing) against the same
// overlay without it, interleaved in rounds (see interleave): the ratio
// metric is the cost. Without AsUser the cost is a nil test per
// operation, which the table's rows (BenchmarkTableStat and the others)
// show unchanged.
//
//	go test -run '^$' -bench 'BenchmarkAsUserCost' -count 3 ./overlayfs/

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

func BenchmarkAsUserCost(b *testing.B) {
	root, _ := benchRoot(b)
	deep := filepath.Join(root, "a", "b", "c", "d")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "file4k"), make([]byte, size4K), 0o644); err != nil {
		b.Fatal(err)
	}
	plain := newCow(b, root)
	with := newCow(b, root, overlayfs.AsUser(os.Getuid(), os.Getgid()))
	open := func(c *overlayfs.Fs, name string) func(int) {
		return func(int) {
			f, err := c.Open(name)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	}
	for _, at := range []struct{ name, path string }{
		{"root", filepath.Join(root, "file4k")},
		{"depth4", filepath.Join(deep, "file4k")},
	} {
		b.Run("Stat/"+at.name, func(b *testing.B) {
			interleave(b, side{op: statOp(b, with.Stat, at.path)}, side{op: statOp(b, plain.Stat, at.path)})
		})
		b.Run("Open/"+at.name, func(b *testing.B) {
			interleave(b, side{op: open(with, at.path)}, side{op: open(plain, at.path)})
		})
	}
}
