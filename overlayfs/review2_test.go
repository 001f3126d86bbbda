package overlayfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// TestReview2JournalUnseenDuringCommit: a Stat racing with a Commit sees
// the view before or after it, and neither has the commit's journal
// directory. Lstat of a top-level name in a root recorded to hold no layer
// entry there takes no lock (lowerOnly), so it lstatted the journal while
// the Commit had it in the root and reported a directory. The hook runs
// the Lstat in the middle of the Commit; a Lstat that waits for the lock
// gets its answer after the Commit.
func TestReview2JournalUnseenDuringCommit(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := createWith1(c, filepath.Join(root, "sub", "f")); err != nil {
		t.Fatal(err)
	}
	// The root's state becomes known: no layer entry at the top.
	if _, err := c.Lstat(filepath.Join(root, "x")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	journal := filepath.Join(root, ".cowfs-commit")
	type result struct {
		fi  fs.FileInfo
		err error
	}
	ch := make(chan result, 1)
	var got *result
	started := false
	err = overlayfs.CommitWithFaults(c, func(op, rel string) error {
		if op != "stage" || started {
			return nil
		}
		started = true
		go func() {
			fi, err := c.Lstat(journal)
			ch <- result{fi, err}
		}()
		for range 10000 { // a lock-free Lstat answers now; one that locks, after the Commit
			select {
			case r := <-ch:
				got = &r
				return nil
			default:
				runtime.Gosched()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !started {
		t.Fatal("the hook never ran")
	}
	if got == nil {
		r := <-ch
		got = &r
	}
	if !errors.Is(got.err, fs.ErrNotExist) {
		t.Fatalf("Lstat of the journal during a Commit: %v, %v; want ENOENT (as before and after)", got.fi, got.err)
	}
}

func createWith1(c *overlayfs.Fs, name string) error {
	fh, err := c.Create(name)
	if err != nil {
		return err
	}
	if _, err := fh.Write([]byte("x")); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}
