package overlayfs_test

// Benchmarks proving that Snapshot, Fork and Restore cost the same for a
// small and a huge layer (O(1)), and that the first write after a snapshot
// pays only a path copy in the B-tree (O(log n)). Each size is a peer in the
// same run, so one run gives the ratio:
//
//	go test -run '^$' -bench BenchmarkLifecycle -benchtime 0.5s -count 6 ./overlayfs >lc.txt
//	go tool -modfile=tools/go.mod benchstat -col /entries -row /op lc.txt

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// lcLayerSizes are the layer sizes compared: the ratio between the two is
// the O(1) claim.
var lcLayerSizes = []int{1_000, 1_000_000}

// lcBigLayer returns an Fs over an empty root whose layer holds n entries:
// directories of up to 1,000 one-byte files each. The entries are put
// directly (PutEntry), as package kernel imports an upper dir.
func lcBigLayer(b *testing.B, n int) *overlayfs.Fs {
	b.Helper()
	c, err := overlayfs.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	put := func(e overlayfs.LayerEntry, content string) {
		if err := c.PutEntry(e, strings.NewReader(content)); err != nil {
			b.Fatal(err)
		}
	}
	count := 0
	for d := 0; count < n; d++ {
		dir := fmt.Sprintf("d%04d", d)
		put(overlayfs.LayerEntry{Path: dir, Type: overlayfs.EntryDir, Mode: 0o755}, "")
		count++
		for i := 0; i < 1000 && count < n; i++ {
			put(overlayfs.LayerEntry{Path: fmt.Sprintf("%s/f%04d", dir, i), Type: overlayfs.EntryFile, Mode: 0o644}, "x")
			count++
		}
	}
	if got := len(c.Layer()); got != n {
		b.Fatalf("the layer has %d entries, want %d", got, n)
	}
	return c
}

// BenchmarkLifecycle runs each lifecycle operation on a 1,000-entry and a
// 1,000,000-entry layer.
func BenchmarkLifecycle(b *testing.B) {
	for _, n := range lcLayerSizes {
		c := lcBigLayer(b, n)
		file := filepath.Join(c.Root(), "d0000", "f0000")
		b.Run(fmt.Sprintf("op=Snapshot/entries=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Snapshot()
			}
		})
		b.Run(fmt.Sprintf("op=Fork/entries=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Fork()
			}
		})
		b.Run(fmt.Sprintf("op=Restore/entries=%d", n), func(b *testing.B) {
			s := c.Snapshot()
			b.ReportAllocs()
			for b.Loop() {
				c.Restore(s)
			}
		})
		// Not O(1), by design: the write after a snapshot copies the
		// B-tree nodes on its path, O(log n), and never the layer.
		b.Run(fmt.Sprintf("op=SnapshotThenWrite/entries=%d", n), func(b *testing.B) {
			data := []byte("y")
			b.ReportAllocs()
			for b.Loop() {
				c.Snapshot()
				f, err := c.OpenFile(file, os.O_WRONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.WriteAt(data, 0); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
