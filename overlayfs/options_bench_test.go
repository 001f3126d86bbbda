package overlayfs_test

// The cost of WithQuota and WithFaults (issue 25): Stat and a 4 KiB
// WriteFile without either option, with WithQuota (limits far away), and
// with WithFaults (an injector that never fails). One run gives the
// ratios:
//
//	go test -run '^$' -bench 'BenchmarkOptionCost' -benchmem -count 6 ./overlayfs/

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

func optionPeers() []struct {
	name string
	opts []overlayfs.Option
} {
	return []struct {
		name string
		opts []overlayfs.Option
	}{
		{"none", nil},
		{"quota", []overlayfs.Option{overlayfs.WithQuota(1<<40, 1<<30)}},
		{"faults", []overlayfs.Option{overlayfs.WithFaults(func(op, name string) error { return nil })}},
	}
}

func BenchmarkOptionCost(b *testing.B) {
	root, _ := benchRoot(b)
	stat := filepath.Join(root, "file4k")
	data := bytes.Repeat([]byte{'w'}, size4K)
	names := make([]string, 4096)
	for i := range names {
		names[i] = filepath.Join(root, "new", fmt.Sprintf("f%04d", i))
	}
	for _, p := range optionPeers() {
		c, err := overlayfs.New(root, p.opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("Stat/"+p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Stat(stat); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("WriteFile4K/"+p.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(size4K)
			c.Reset()
			i := 0
			for b.Loop() {
				if i == len(names) {
					b.StopTimer()
					c.Reset()
					i = 0
					b.StartTimer()
				}
				if err := afero.WriteFile(c, names[i], data, 0o644); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
