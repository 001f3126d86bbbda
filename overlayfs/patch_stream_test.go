package overlayfs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/afero"
)

// writeSparse makes a file of size bytes at p: holes, with data at a few
// offsets.
func writeSparse(t testing.TB, p string, size int64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, size / 3, size - 7} {
		if _, err := f.WriteAt([]byte("data\x00!\n"), off); err != nil {
			t.Fatal(err)
		}
	}
}

// writeDense makes a file of size pseudo-random bytes at p, written in
// chunks.
func writeDense(t testing.TB, p string, size int64, seed uint64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rand.NewChaCha8([32]byte{byte(seed)})
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		r.Read(buf)
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			t.Fatal(err)
		}
	}
}

// appendTo appends data to name through c (the lower file's bytes stay
// unread in the layer).
func appendTo(t testing.TB, c afero.Fs, name, data string) {
	t.Helper()
	f, err := c.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// heapGrowth runs fn and returns the largest growth of the heap in use
// seen while it ran (sampled every few milliseconds, and at the end), and
// the bytes it allocated in all.
func heapGrowth(fn func()) (peak, total uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, allocs := ms.HeapInuse, ms.TotalAlloc
	var top atomic.Uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > base && ms.HeapInuse-base > top.Load() {
			top.Store(ms.HeapInuse - base)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sample()
			}
		}
	})
	fn()
	close(stop)
	wg.Wait()
	sample()
	runtime.ReadMemStats(&ms)
	return top.Load(), ms.TotalAlloc - allocs
}

// countWriter counts what is written to it.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// TestWriteDiffBoundedMemory: WriteDiff of a sparse lower file appended
// to (its old and new sides both binary and big) grows the heap by less
// than 64 MiB (and than half the file's size), measured with
// runtime.MemStats: 128 MiB by default (32 MiB under the race detector;
// loading it grows the heap by about three times its size), 1 GiB and a
// 1 GiB dense binary with COWFS_LONG=1.
func TestWriteDiffBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 4 GiB")
	}
	size := int64(128 << 20)
	if raceDetector {
		size = 32 << 20
	}
	cases := []struct {
		name string
		make func(t testing.TB, p string)
	}{{fmt.Sprintf("sparse %d MiB", size>>20), func(t testing.TB, p string) { writeSparse(t, p, size) }}}
	if os.Getenv("COWFS_LONG") == "1" {
		cases = []struct {
			name string
			make func(t testing.TB, p string)
		}{
			{"sparse 1 GiB", func(t testing.TB, p string) { writeSparse(t, p, 1<<30) }},
			{"dense 1 GiB", func(t testing.TB, p string) { writeDense(t, p, 1<<30, 1) }},
		}
		size = 1 << 30
	}
	limit := min(64<<20, uint64(size)/2)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.make(t, filepath.Join(root, "big"))
			c := newCow(t, root)
			appendTo(t, c, filepath.Join(root, "big"), "tail\n")
			var out countWriter
			var err error
			peak, total := heapGrowth(func() { err = c.WriteDiff(&out) })
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: patch %d bytes, heap growth peak %.1f MiB, allocated %.1f MiB in all",
				tc.name, out.n, float64(peak)/(1<<20), float64(total)/(1<<20))
			if peak > limit {
				t.Errorf("heap grew by %d MiB, want under %d MiB", peak>>20, limit>>20)
			}
		})
	}
}

// TestWriteDiffStreamedApplies: binary and sparse files big enough to be
// streamed (a sparse file appended to, a dense binary moved and appended
// to, another moved as it is) give a patch that real git apply turns into
// the view byte for byte, and git apply -R back into the root.
func TestWriteDiffStreamedApplies(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("git not found in PATH (%v): the patch is checked with git apply", err)
	}
	base := t.TempDir()
	root := filepath.Join(base, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeSparse(t, filepath.Join(root, "sparse"), 3<<20)
	writeDense(t, filepath.Join(root, "bin"), 2<<20+13, 2)
	writeDense(t, filepath.Join(root, "same"), 1<<20+5, 3)
	if err := os.WriteFile(filepath.Join(root, "text"), bytes.Repeat([]byte("a line of text\n"), 100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	orig, _, err := patchRead(afero.NewOsFs(), root)
	if err != nil {
		t.Fatal(err)
	}
	c := newCow(t, root)
	appendTo(t, c, filepath.Join(root, "sparse"), "tail\x00\n")
	if err := c.Rename(filepath.Join(root, "bin"), filepath.Join(root, "bin-moved")); err != nil {
		t.Fatal(err)
	}
	appendTo(t, c, filepath.Join(root, "bin-moved"), "more")
	if err := c.Rename(filepath.Join(root, "same"), filepath.Join(root, "same-moved")); err != nil {
		t.Fatal(err)
	}
	if err := c.Chmod(filepath.Join(root, "same-moved"), 0o755); err != nil {
		t.Fatal(err)
	}
	appendTo(t, c, filepath.Join(root, "text"), "one more line\n")
	view, _, err := patchRead(c, root)
	if err != nil {
		t.Fatal(err)
	}
	var patch bytes.Buffer
	if err := c.WriteDiff(&patch); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rename from same\n", "GIT binary patch", "@@ -"} {
		if !bytes.Contains(patch.Bytes(), []byte(want)) {
			t.Errorf("the patch has no %q", want)
		}
	}
	dir := filepath.Join(base, "copy")
	if err := patchCopy(root, dir); err != nil {
		t.Fatal(err)
	}
	if err := patchGitApply(git, dir, patch.Bytes(), false); err != nil {
		t.Fatal(err)
	}
	got, _, err := patchRead(afero.NewOsFs(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := patchTreeDiff(view, got); d != "" {
		t.Errorf("git apply gives another tree than the view:\n%s", d)
	}
	if err := patchGitApply(git, dir, patch.Bytes(), true); err != nil {
		t.Fatal(err)
	}
	back, _, err := patchRead(afero.NewOsFs(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := patchTreeDiff(orig, back); d != "" {
		t.Errorf("git apply -R does not give the root back:\n%s", d)
	}
}
