package overlayfs_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/spf13/afero"
)

// raceTrials is the number of fresh overlays each race test hammers; with
// -race the file still runs in a few seconds.
const raceTrials = 1000

const raceWriters = 8

func raceRoot(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	root := t.TempDir()
	files := map[string][]byte{}
	for i, name := range []string{"append.txt", "patch.txt", "chmod.txt", "shared.txt"} {
		data := bytes.Repeat([]byte{'a' + byte(i)}, 4096)
		files[name] = data
		if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root, files
}

func chunk(w int) []byte { return []byte(fmt.Sprintf("<writer %02d here>", w)) }

// TestRaceFirstWrites: goroutines race on the first write (the copy-up) to
// the same lower files, through separate handles and one shared handle.
// Every byte written must be in the final content, exactly once.
func TestRaceFirstWrites(t *testing.T) {
	root, lower := raceRoot(t)
	sum := hashTree(t, root)
	c := newCow(t, root)
	p := func(name string) string { return filepath.Join(root, name) }
	for trial := 0; trial < raceTrials; trial++ {
		c.Reset()
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 4*raceWriters)
		shared, err := c.OpenFile(p("shared.txt"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		for w := 0; w < raceWriters; w++ {
			wg.Add(4)
			go func() { // first appends, one handle each
				defer wg.Done()
				<-start
				f, err := c.OpenFile(p("append.txt"), os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					errs <- err
					return
				}
				if _, err := f.Write(chunk(w)); err != nil {
					errs <- err
				}
				if err := f.Close(); err != nil {
					errs <- err
				}
			}()
			go func() { // first writes at disjoint offsets
				defer wg.Done()
				<-start
				f, err := c.OpenFile(p("patch.txt"), os.O_RDWR, 0)
				if err != nil {
					errs <- err
					return
				}
				if _, err := f.WriteAt(chunk(w), int64(w*512)); err != nil {
					errs <- err
				}
				if err := f.Close(); err != nil {
					errs <- err
				}
			}()
			go func() { // metadata copy-up racing a content copy-up
				defer wg.Done()
				<-start
				var err error
				if w == 0 {
					err = c.Chmod(p("chmod.txt"), 0o600)
				} else {
					var f afero.File
					f, err = c.OpenFile(p("chmod.txt"), os.O_WRONLY, 0)
					if err == nil {
						_, err = f.WriteAt(chunk(w), int64(w*512))
						if cerr := f.Close(); err == nil {
							err = cerr
						}
					}
				}
				if err != nil {
					errs <- err
				}
			}()
			go func() { // appends through one shared handle
				defer wg.Done()
				<-start
				if _, err := shared.Write(chunk(w)); err != nil {
					errs <- err
				}
			}()
		}
		close(start)
		wg.Wait()
		shared.Close()
		close(errs)
		for err := range errs {
			t.Fatalf("trial %d: %v", trial, err)
		}
		checkAppends(t, trial, c, p("append.txt"), lower["append.txt"])
		checkAppends(t, trial, c, p("shared.txt"), lower["shared.txt"])
		checkPatched(t, trial, c, p("patch.txt"), lower["patch.txt"], 0)
		checkPatched(t, trial, c, p("chmod.txt"), lower["chmod.txt"], 1)
		if fi, err := c.Stat(p("chmod.txt")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("trial %d: chmod.txt mode = %v, %v; want 0600", trial, fi, err)
		}
		if t.Failed() {
			break
		}
	}
	checkUnchanged(t, root, sum)
}

// checkAppends: the lower content followed by every writer's chunk once.
func checkAppends(t *testing.T, trial int, c afero.Fs, name string, lower []byte) {
	t.Helper()
	data, err := afero.ReadFile(c, name)
	if err != nil {
		t.Fatalf("trial %d: %v", trial, err)
	}
	want := len(lower) + raceWriters*len(chunk(0))
	if len(data) != want || !bytes.HasPrefix(data, lower) {
		t.Errorf("trial %d: %s: %d bytes (prefix kept: %v), want %d", trial, filepath.Base(name), len(data), bytes.HasPrefix(data, lower), want)
		return
	}
	for w := 0; w < raceWriters; w++ {
		if n := bytes.Count(data[len(lower):], chunk(w)); n != 1 {
			t.Errorf("trial %d: %s: writer %d's chunk found %d times: %q", trial, filepath.Base(name), w, n, data[len(lower):])
		}
	}
}

// checkPatched: the lower content with writers from..raceWriters-1 patched in.
func checkPatched(t *testing.T, trial int, c afero.Fs, name string, lower []byte, from int) {
	t.Helper()
	data, err := afero.ReadFile(c, name)
	if err != nil {
		t.Fatalf("trial %d: %v", trial, err)
	}
	want := bytes.Clone(lower)
	for w := from; w < raceWriters; w++ {
		copy(want[w*512:], chunk(w))
	}
	if !bytes.Equal(data, want) {
		t.Errorf("trial %d: %s: lost writes:\n got %q\nwant %q", trial, filepath.Base(name), data, want)
	}
}

// TestRaceCreateAndList: goroutines create, list, rename and remove in one
// lower directory; the final listing has exactly the survivors.
func TestRaceCreateAndList(t *testing.T) {
	root, _ := raceRoot(t)
	sum := hashTree(t, root)
	c := newCow(t, root)
	dir := filepath.Join(root, "dir")
	trials := raceTrials / 10
	for trial := 0; trial < trials; trial++ {
		c.Reset()
		var wg sync.WaitGroup
		for w := 0; w < raceWriters; w++ {
			wg.Add(2)
			go func() {
				defer wg.Done()
				name := filepath.Join(dir, fmt.Sprintf("f%02d", w))
				if err := afero.WriteFile(c, name, chunk(w), 0o644); err != nil {
					t.Error(err)
					return
				}
				if err := c.Rename(name, name+".renamed"); err != nil {
					t.Error(err)
				}
				if w%2 == 1 {
					if err := c.Remove(name + ".renamed"); err != nil {
						t.Error(err)
					}
				}
			}()
			go func() {
				defer wg.Done()
				f, err := c.Open(dir)
				if err != nil {
					t.Error(err)
					return
				}
				defer f.Close()
				if _, err := f.Readdirnames(-1); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		names, err := afero.ReadDir(c, dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != raceWriters/2 {
			t.Fatalf("trial %d: %d entries, want %d", trial, len(names), raceWriters/2)
		}
		for i, fi := range names {
			if want := fmt.Sprintf("f%02d.renamed", 2*i); fi.Name() != want || fi.Size() != int64(len(chunk(0))) {
				t.Fatalf("trial %d: entry %d = %s (%d bytes), want %s", trial, i, fi.Name(), fi.Size(), want)
			}
		}
	}
	checkUnchanged(t, root, sum)
}

// TestRaceWriteDuringRename: a first write to a lower file races the rename
// of its lower directory. Like on a real file system the handle follows the
// file: either the open lost the race (ErrNotExist) or the bytes are in the
// renamed directory; never lost, never in both places.
func TestRaceWriteDuringRename(t *testing.T) {
	root, _ := raceRoot(t)
	for i := 0; i < raceWriters; i++ {
		if err := os.WriteFile(filepath.Join(root, "dir", fmt.Sprintf("f%02d", i)), []byte("lower"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum := hashTree(t, root)
	c := newCow(t, root)
	trials := raceTrials / 5
	for trial := 0; trial < trials; trial++ {
		c.Reset()
		var wg sync.WaitGroup
		start := make(chan struct{})
		wrote := make([]bool, raceWriters)
		for w := 0; w < raceWriters; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				f, err := c.OpenFile(filepath.Join(root, "dir", fmt.Sprintf("f%02d", w)), os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					if !os.IsNotExist(err) {
						t.Errorf("open: %v", err)
					}
					return
				}
				if _, err := f.Write(chunk(w)); err != nil {
					t.Errorf("write: %v", err)
				}
				if err := f.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
				wrote[w] = true
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := c.Rename(filepath.Join(root, "dir"), filepath.Join(root, "moved")); err != nil {
				t.Errorf("rename: %v", err)
			}
		}()
		close(start)
		wg.Wait()
		if _, err := c.Stat(filepath.Join(root, "dir")); !os.IsNotExist(err) {
			t.Fatalf("trial %d: dir still there after the rename: %v", trial, err)
		}
		for w := 0; w < raceWriters; w++ {
			data, err := afero.ReadFile(c, filepath.Join(root, "moved", fmt.Sprintf("f%02d", w)))
			want := "lower"
			if wrote[w] {
				want += string(chunk(w))
			}
			if err != nil || string(data) != want {
				t.Fatalf("trial %d: moved/f%02d = %q, %v; want %q", trial, w, data, err, want)
			}
		}
	}
	checkUnchanged(t, root, sum)
}
