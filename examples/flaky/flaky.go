// Package flaky is the example module that `replay check` runs in the
// cowfs README: four small pieces of code that write files, and tests
// over a cowfs overlay whose runs are identical, differ only in the
// interleaving of goroutines, differ in bytes, and differ in outcome.
package flaky

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/afero"
)

// Inventory reads the item list in dir/items.txt (one "name count" per
// line) into a map.
func Inventory(fsys afero.Fs, dir string) (map[string]string, error) {
	b, err := afero.ReadFile(fsys, filepath.Join(dir, "items.txt"))
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for line := range strings.Lines(string(b)) {
		name, count, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok {
			m[name] = count
		}
	}
	return m, nil
}

// WriteSorted writes the inventory to dir/out/sorted.txt in name order:
// the same bytes every run.
func WriteSorted(fsys afero.Fs, dir string, inv map[string]string) error {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(inv)) {
		fmt.Fprintf(&b, "%s=%s\n", k, inv[k])
	}
	return write(fsys, filepath.Join(dir, "out", "sorted.txt"), b.String())
}

// WriteUnsorted writes the inventory to dir/out/unsorted.txt in map
// iteration order, which Go randomizes: the bug replay check finds.
func WriteUnsorted(fsys afero.Fs, dir string, inv map[string]string) error {
	var b strings.Builder
	for k, v := range inv {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return write(fsys, filepath.Join(dir, "out", "unsorted.txt"), b.String())
}

// WriteCount writes the number of items in the inventory to
// dir/out/count.txt.
func WriteCount(fsys afero.Fs, dir string) error {
	inv, err := Inventory(fsys, dir)
	if err != nil {
		return err
	}
	return write(fsys, filepath.Join(dir, "out", "count.txt"), fmt.Sprintf("%d\n", len(inv)))
}

// AppendLogs appends n lines to dir/out/left.log and n lines to
// dir/out/right.log from two goroutines at once. Each file gets the same
// bytes every run; only the order in which the two files are touched
// varies.
func AppendLogs(fsys afero.Fs, dir string, n int) error {
	if err := fsys.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, name := range []string{"left.log", "right.log"} {
		wg.Go(func() {
			p := filepath.Join(dir, "out", name)
			for j := range n {
				f, err := fsys.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
				if err != nil {
					errs[i] = err
					return
				}
				fmt.Fprintf(f, "%s line %d\n", name, j)
				if err := f.Close(); err != nil {
					errs[i] = err
					return
				}
				// Work of varying length between writes, as real code has.
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	if errs[0] != nil {
		return errs[0]
	}
	return errs[1]
}

func write(fsys afero.Fs, name, s string) error {
	if err := fsys.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return afero.WriteFile(fsys, name, []byte(s), 0o644)
}
