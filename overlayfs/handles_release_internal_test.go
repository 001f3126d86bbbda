package overlayfs

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

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
