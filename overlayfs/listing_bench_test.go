package overlayfs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// floorOp is the least a sorted, merged listing can cost on top of os:
// os.Open and os's own listing, the package's sort of the names, and one
// merge with the layer's (sorted) children into a fresh slice. It is the
// floor of the Readdir rows of the performance table (os's unsorted
// listing is not: the package promises sorted listings).
func floorOp(b *testing.B, dir string, names bool, layer []string) func(int) {
	layerInfos := make([]fs.FileInfo, len(layer)) // made in memory, as the layer's are
	for i := range layer {
		fi, err := os.Lstat(dir)
		must(b, err)
		layerInfos[i] = fi
	}
	return func(int) {
		f, err := os.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if names {
			ns, err := f.Readdirnames(-1)
			if err != nil {
				b.Fatal(err)
			}
			floorMerge(ns, ns, layer, layer)
		} else {
			fis, err := f.Readdir(-1)
			if err != nil {
				b.Fatal(err)
			}
			ns := make([]string, len(fis))
			for i, fi := range fis {
				ns[i] = fi.Name()
			}
			floorMerge(ns, fis, layer, layerInfos)
		}
		must(b, f.Close())
	}
}

// floorMerge is the floor's sort and merge: the lower's items (named ns)
// in name order, with the layer's (named layer, sorted) merged in.
func floorMerge[T any](ns []string, items []T, layer []string, layerItems []T) []T {
	out := make([]T, 0, len(items)+len(layerItems))
	j := 0
	for _, k := range overlayfs.NameOrder(ns) {
		for j < len(layer) && layer[j] < ns[k] {
			out = append(out, layerItems[j])
			j++
		}
		out = append(out, items[k])
	}
	return append(out, layerItems[j:]...)
}

// listingRows are the listing rows of the performance table.
var listingRows = []struct {
	name, dir string
	names     bool
}{
	{"Readdir/entries=1000", "dir1k", false},
	{"Readdir/entries=10000", "dir10k", false},
	{"Readdirnames/entries=10000", "dir10k", true},
}

// listingCow is the cowfs side of the listing rows: all lower names but
// one, from a non-empty layer.
func listingCow(b *testing.B, root, dir string) afero.Fs {
	c := newCow(b, root)
	nonEmpty(b, c, root)
	must(b, afero.WriteFile(c, filepath.Join(dir, "layer-file"), []byte("l"), 0o644))
	return c
}

// BenchmarkListingFloor: the listing rows against their floor (floorOp)
// instead of os: the ratio is how far cowfs is from the floor.
func BenchmarkListingFloor(b *testing.B) {
	root := tableRoot(b, true)
	for _, r := range listingRows {
		b.Run(r.name, func(b *testing.B) {
			dir := filepath.Join(root, r.dir)
			c := listingCow(b, root, dir)
			interleave(b, side{op: readdirOp(b, c.Open, dir, r.names)}, side{op: floorOp(b, dir, r.names, []string{"layer-file"})})
		})
	}
	b.Run("floor-vs-os", func(b *testing.B) {
		for _, r := range listingRows {
			b.Run(r.name, func(b *testing.B) {
				dir := filepath.Join(root, r.dir)
				interleave(b, side{op: floorOp(b, dir, r.names, []string{"layer-file"})}, side{op: readdirOp(b, osOpen, dir, r.names)})
			})
		}
	})
}

// BenchmarkListingSide runs one side of a listing row alone, to profile
// it: cowfs, os, or the floor.
func BenchmarkListingSide(b *testing.B) {
	root := tableRoot(b, true)
	rows := append(slices.Clone(listingRows), struct {
		name, dir string
		names     bool
	}{"Readdirnames/entries=100", "tree/d000", true})
	for _, r := range rows {
		dir := filepath.Join(root, r.dir)
		c := listingCow(b, root, dir)
		for _, s := range []struct {
			name string
			op   func(int)
		}{
			{"cowfs", readdirOp(b, c.Open, dir, r.names)},
			{"os", readdirOp(b, osOpen, dir, r.names)},
			{"floor", floorOp(b, dir, r.names, []string{"layer-file"})},
		} {
			b.Run(strings.Join([]string{r.name, s.name}, "/"), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					s.op(i)
				}
			})
		}
	}
}

// BenchmarkListingSmall: Readdirnames and Readdir of a 100-entry lower
// directory, as afero.Walk lists each of the 100 in BenchmarkTableWalk10k.
func BenchmarkListingSmall(b *testing.B) {
	root := tableRoot(b, true)
	dir := filepath.Join(root, "tree", "d000")
	c := newCow(b, root)
	nonEmpty(b, c, root)
	for _, names := range []bool{true, false} {
		b.Run(map[bool]string{true: "Readdirnames", false: "Readdir"}[names], func(b *testing.B) {
			interleave(b, side{op: readdirOp(b, c.Open, dir, names)}, side{op: readdirOp(b, osOpen, dir, names)})
		})
	}
}
