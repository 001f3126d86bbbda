package overlayfs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/overlayfs"
)

// Treat a working tree the way git treats history: branch with Fork, try
// changes, compare two branches with ChangesBetween and WriteDiffBetween,
// revert a failed try with Restore, and accept one branch with Commit. A
// second branch that depended on what the first one changed is refused with
// ErrConflict, and writes nothing.
func Example_lifecycle() {
	root, err := os.MkdirTemp("", "cowfs-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	config, notes := filepath.Join(root, "config.txt"), filepath.Join(root, "notes.txt")
	os.WriteFile(config, []byte("mode=slow\nretries=3\n"), 0o644)
	os.WriteFile(notes, []byte("keep me\n"), 0o644)

	base, err := overlayfs.New(root)
	if err != nil {
		panic(err)
	}

	// Branch: two tries side by side, neither visible to the other.
	fast := base.Fork()
	afero.WriteFile(fast, config, []byte("mode=fast\nretries=3\n"), 0o644)
	safe := base.Fork()
	afero.WriteFile(safe, config, []byte("mode=safe\nretries=9\n"), 0o644)

	// Try, and revert: a snapshot before a risky step, restored after it.
	before := safe.Snapshot()
	safe.Remove(notes)
	if _, err := safe.Stat(notes); errors.Is(err, os.ErrNotExist) {
		fmt.Println("safe: notes.txt removed; restoring")
	}
	safe.Restore(before)

	// Compare the branches: what turns fast into safe.
	a, b := fast.Snapshot(), safe.Snapshot()
	for _, c := range base.ChangesBetween(a, b) {
		fmt.Println(c)
	}
	base.WriteDiffBetween(os.Stdout, a, b)

	// Accept fast: its layer goes to disk, and its view stays the same.
	if err := fast.Commit(); err != nil {
		panic(err)
	}
	data, _ := os.ReadFile(config)
	fmt.Printf("on disk: %q, changes left in fast: %d\n", data, len(fast.Changes()))

	// safe rewrote the config as it was before fast's commit: refused.
	err = safe.Commit()
	var ce *overlayfs.CommitError
	if errors.Is(err, overlayfs.ErrConflict) && errors.As(err, &ce) {
		fmt.Println("safe: conflict on", ce.Conflicts)
	}
	// Output:
	// safe: notes.txt removed; restoring
	// M config.txt
	// diff --git a/config.txt b/config.txt
	// index da527e1..5e3007e 100644
	// --- a/config.txt
	// +++ b/config.txt
	// @@ -1,2 +1,2 @@
	// -mode=fast
	// -retries=3
	// +mode=safe
	// +retries=9
	// on disk: "mode=fast\nretries=3\n", changes left in fast: 0
	// safe: conflict on [config.txt]
}

// A program that commits should call Recover on the root at start-up: if a
// previous run died during a Commit, Recover finishes or undoes it (the
// tree is then exactly the old or exactly the new one), and New accepts the
// root again. Without an interrupted commit it does nothing.
func ExampleRecover() {
	root, err := os.MkdirTemp("", "cowfs-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	if err := overlayfs.Recover(root); err != nil {
		panic(err)
	}
	fsys, err := overlayfs.New(root)
	if err != nil {
		panic(err)
	}
	afero.WriteFile(fsys, filepath.Join(root, "result.txt"), []byte("done\n"), 0o644)
	if err := fsys.Commit(); err != nil {
		panic(err)
	}
	data, _ := os.ReadFile(filepath.Join(root, "result.txt"))
	fmt.Print(string(data))
	// Output: done
}

// Two Fs values (in one process or two) commit over the same root: the
// commit lock makes the second check the tree the first left, so it
// reports the conflict instead of losing the first one's line. Recover,
// run while a commit holds the lock, would refuse with
// ErrCommitInProgress.
func ExampleFs_Commit_twoCommitters() {
	root, err := os.MkdirTemp("", "cowfs-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	counter := filepath.Join(root, "counter")
	os.WriteFile(counter, []byte("base\n"), 0o644)
	a, _ := overlayfs.New(root)
	b, _ := overlayfs.New(root)
	for _, c := range []struct {
		fsys *overlayfs.Fs
		line string
	}{{a, "A\n"}, {b, "B\n"}} {
		data, _ := afero.ReadFile(c.fsys, counter)
		afero.WriteFile(c.fsys, counter, append(data, c.line...), 0o644)
	}
	fmt.Println("A:", a.Commit())
	err = b.Commit()
	fmt.Println("B conflicts:", errors.Is(err, overlayfs.ErrConflict))
	data, _ := os.ReadFile(counter)
	fmt.Print(string(data))
	// Output:
	// A: <nil>
	// B conflicts: true
	// base
	// A
}
