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

// TestCommitJournalUnseenByStat: a Stat racing with a Commit sees
// the view before or after it, and neither has the commit's journal
// directory. Lstat of a top-level name in a root recorded to hold no layer
// entry there took no lock (the lock-free tier, gone), so it lstatted the
// journal while the Commit had it in the root and reported a directory. The hook runs
// the Lstat in the middle of the Commit; a Lstat that waits for the lock
// gets its answer after the Commit.
func TestCommitJournalUnseenByStat(t *testing.T) {
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

// TestForkCommitStaleParent: a fork's Commit changes the lower the
// parent overlays, but only the committing layer drops what it cached of
// the lower (the real directories, the listings, the clean states). The
// parent, whose layer is empty, then shows the lower as it was: Stat of a
// name under a directory the fork replaced with a file says ENOENT where
// os says ENOTDIR, and Mkdir under that file succeeds.
func TestForkCommitStaleParent(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := createWith1(p, filepath.Join(root, "e")); err != nil { // a layer entry: no empty-view shortcut
		t.Fatal(err)
	}
	if _, err := p.Stat(filepath.Join(root, "d", "x")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	f := p.Fork()
	if err := f.RemoveAll(filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	if err := createWith1(f, filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	if err := f.CommitPaths(filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	_, want := os.Stat(filepath.Join(root, "d", "x"))
	_, got := p.Stat(filepath.Join(root, "d", "x"))
	if errClass(got) != errClass(want) {
		t.Errorf("parent's Stat under a directory its fork committed as a file: %v; os: %v", got, want)
	}
	want = os.Mkdir(filepath.Join(root, "d", "sub"), 0o755)
	got = p.Mkdir(filepath.Join(root, "d", "sub"), 0o755)
	if errClass(got) != errClass(want) {
		t.Errorf("parent's Mkdir under a directory its fork committed as a file: %v; os: %v", got, want)
	}
}
