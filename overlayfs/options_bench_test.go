package overlayfs_test

// The cost of WithQuota and WithFaults when on (issue 25): Stat of a lower
// file and a 4 KiB WriteFile of a new file, with the option (limits far
// away; an injector that never fails) against the same overlay without it,
// interleaved in rounds (see interleave): the ratio metric is the cost.
// Without either option the cost is a nil check, which the table's rows
// (BenchmarkTableStat, BenchmarkTableWriteFile4K) show unchanged.
//
//	go test -run '^$' -bench 'BenchmarkOptionCost' -count 3 ./overlayfs/

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

func BenchmarkOptionCost(b *testing.B) {
	root, _ := benchRoot(b)
	stat := filepath.Join(root, "file4k")
	data := bytes.Repeat([]byte{'w'}, size4K)
	names := make([]string, 4096)
	for i := range names {
		names[i] = filepath.Join(root, "new", fmt.Sprintf("f%04d", i))
	}
	plain := newCow(b, root)
	for _, p := range []struct {
		name string
		opt  overlayfs.Option
	}{
		{"quota", overlayfs.WithQuota(1<<40, 1<<30)},
		{"faults", overlayfs.WithFaults(func(op, name string) error { return nil })},
	} {
		with := newCow(b, root, p.opt)
		b.Run("Stat/"+p.name, func(b *testing.B) {
			interleave(b, side{op: statOp(b, with.Stat, stat)}, side{op: statOp(b, plain.Stat, stat)})
		})
		writes := func(c *overlayfs.Fs) side {
			return side{
				prepare: c.Reset, // untimed: every round writes new files
				op: func(i int) {
					if err := afero.WriteFile(c, names[i%len(names)], data, 0o644); err != nil {
						b.Fatal(err)
					}
				},
			}
		}
		b.Run("WriteFile4K/"+p.name, func(b *testing.B) {
			interleave(b, writes(with), writes(plain))
		})
	}
}
