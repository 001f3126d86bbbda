package overlayfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/spf13/afero"
)

// TestRaceLookupsDuringCreates: readers Stat, Lstat and read lower files
// under the read lock (the resolver's fast path, what it learns of the
// directories' layer entries, the cache of the lower, lstatHost,
// openLower) while writers create, overwrite and remove layer files
// beside them and look their own files up at once. A lower file must
// always show its lower content; a file a writer made must be there
// when it looks, with what it wrote; one it removed must be gone.
func TestRaceLookupsDuringCreates(t *testing.T) {
	root := t.TempDir()
	lower := map[string][]byte{}
	for d := range 2 {
		dir := filepath.Join(root, fmt.Sprintf("d%d", d))
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			name := filepath.Join(dir, fmt.Sprintf("low%d", i))
			lower[name] = bytes.Repeat([]byte{'a' + byte(i)}, 100+i)
			if err := os.WriteFile(name, lower[name], 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	sum := hashTree(t, root)
	c := newCow(t, root)
	const trials = 60
	for trial := range trials {
		c.Reset()
		var wg sync.WaitGroup
		for w := range raceWriters {
			wg.Add(2)
			go func() { // a writer: its own names, looked up at once
				defer wg.Done()
				dir := filepath.Join(root, fmt.Sprintf("d%d", w%2))
				for i := range 6 {
					name := filepath.Join(dir, fmt.Sprintf("w%d-%d", w, i))
					if i%3 == 2 {
						name = filepath.Join(dir, "sub", fmt.Sprintf("w%d-%d", w, i))
					}
					data := chunk(w)
					if err := afero.WriteFile(c, name, data, 0o644); err != nil {
						t.Error(err)
						return
					}
					for _, stat := range []func(string) (fs.FileInfo, error){c.Stat, c.Lstat} {
						if fi, err := stat(name); err != nil || fi.Size() != int64(len(data)) {
							t.Errorf("trial %d: %s just written: %v, %v", trial, name, fi, err)
						}
					}
					if got, err := afero.ReadFile(c, name); err != nil || !bytes.Equal(got, data) {
						t.Errorf("trial %d: %s just written reads %q, %v", trial, name, got, err)
					}
					if i%2 == 1 {
						if err := c.Remove(name); err != nil {
							t.Error(err)
						}
						if _, err := c.Lstat(name); !errors.Is(err, fs.ErrNotExist) {
							t.Errorf("trial %d: %s removed: Lstat says %v", trial, name, err)
						}
					}
				}
			}()
			go func() { // a reader of the lower files beside them
				defer wg.Done()
				for name, want := range lower {
					for _, stat := range []func(string) (fs.FileInfo, error){c.Stat, c.Lstat} {
						if fi, err := stat(name); err != nil || fi.Size() != int64(len(want)) || !fi.Mode().IsRegular() {
							t.Errorf("trial %d: lower %s: %v, %v", trial, name, fi, err)
						}
					}
					if got, err := afero.ReadFile(c, name); err != nil || !bytes.Equal(got, want) {
						t.Errorf("trial %d: lower %s reads %q, %v", trial, name, got, err)
					}
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			break
		}
	}
	checkUnchanged(t, root, sum)
}
