package overlayfs

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"weak"

	"github.com/cowfs/cowfs/internal/longtest"
)

// TestReleaseRacesUnlink: the last handle on a file written before (so its
// count is kept at zero, see release) closes while the file is unlinked.
// Whichever comes first, the content goes: dropBlobLocked drops it when it
// sees the handle closed, else makes it an orphan that the Close drops.
// Nothing stays behind (count, orphan, content), in every trial (3,000;
// 30,000 with COWFS_LONG=1).
func TestReleaseRacesUnlink(t *testing.T) {
	root := t.TempDir()
	c, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	l := c.primary()
	name := filepath.Join(root, "f")
	for trial := range longtest.N(3000, 30000) {
		for range 2 {
			f, err := c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
		h, err := c.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !h.(*file).sticky {
			t.Fatal("the handle on a file already in the layer is not sticky")
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := h.Close(); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if err := c.Remove(name); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		l.mu.RLock()
		l.hmu.Lock()
		opened, orphans, blobs := len(l.opened), len(l.orphan), l.blobs.Len()
		counted := l.orphans.Load()
		l.hmu.Unlock()
		l.mu.RUnlock()
		if opened != 0 || orphans != 0 || blobs != 0 || counted != 0 {
			t.Fatalf("trial %d: after the Close and the unlink: %d counts, %d orphans (%d counted), %d contents; want none",
				trial, opened, orphans, counted, blobs)
		}
	}
}

// TestRestoreDropsLastContent: the count of a file rewritten again and
// again holds the content the last handle saw (see reopenLocked). A
// handle open across a Restore keeps the count; the content written
// after the Snapshot, which the Restore leaves behind, must not stay
// reachable through it: once collected, nothing holds it.
func TestRestoreDropsLastContent(t *testing.T) {
	root := t.TempDir()
	c, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	l := c.primary()
	name := filepath.Join(root, "f")
	write := func(data string) {
		t.Helper()
		f, err := c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write("first")
	write("second") // the count is made, and kept at zero
	held, err := c.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	s := c.Snapshot()
	write(strings.Repeat("left behind", 1000)) // a new blob: the Snapshot shares the old one
	l.mu.RLock()
	b, _ := l.blobs.Get(held.(*file).ino)
	l.mu.RUnlock()
	left := weak.Make(b)
	b = nil
	c.Restore(s)
	runtime.GC()
	runtime.GC()
	if left.Value() != nil {
		t.Error("the content written after the Snapshot is still reachable after the Restore")
	}
	runtime.KeepAlive(s)
}
