package overlayfs_test

import (
	"errors"
	"fmt"
	"github.com/cowfs/cowfs/internal/longtest"
	"slices"
	"sync"
	"testing"
)

// The resolver's fast path trusts what it recorded about directories of
// the layer: that a directory and its ancestors have no layer entry, and
// that a directory holds none directly. These tests fill those records,
// change the layer under them, and compare what Stat, Lstat and reads see
// with os on a copy that went through the same changes.

// fastProbeNames are names in the "project" fixture (and made by the
// changes below) whose resolution the changes affect: lower files deep
// under the directories changed, the directories themselves, missing
// names, names through symlinks at the start, in the middle and at the
// end.
var fastProbeNames = []string{
	"README.md",
	"link-to-readme",
	"dangling",
	"new-at-root",
	"a",
	"a/b",
	"a/b/file.txt",
	"a/b/c",
	"a/b/c/d",
	"a/b/c/file.txt",
	"a/b/c/file.txt/x",
	"a/b/c/missing",
	"a/b/c/new.txt",
	"a/b/c/ln",
	"a/b/c/nd",
	"a/b/c/util.go",
	"a/b/c/deep/nested/leaf.txt",
	"a/b/c/nested/leaf.txt",
	"a/z/c/file.txt",
	"a/z/file.txt",
	"internal/util/deep/nested/leaf.txt",
	"internal/util/up",
	"internal/util/up/README.md",
	"docs/see also",
	"link-to-internal/util/util.go",
}

// fastProbes stats, lstats and reads every probe name: run before a
// change, they fill the fast path's records; after it, they check them.
func fastProbes() []op {
	var ops []op
	for _, n := range fastProbeNames {
		ops = append(ops, stat(n), lstat(n), readFile(n))
	}
	return ops
}

// withProbes puts the probes before, between and after the changes.
func withProbes(changes ...[]op) []op {
	ops := append([]op{writeFile("layer.txt", "not empty\n", 0o644)}, fastProbes()...)
	for _, c := range changes {
		ops = append(ops, c...)
		ops = append(ops, fastProbes()...)
	}
	return ops
}

// TestFastPathAncestorChanges changes an ancestor of names the fast path
// has resolved (remove, mkdir over it, rename, a symlink or another
// directory in its place, chmod) and entries directly in a directory it
// recorded as holding none.
func TestFastPathAncestorChanges(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "remove-then-mkdir", ops: withProbes(
			[]op{removeAll("a/b")},
			[]op{mkdir("a/b", 0o755)},
			[]op{writeFile("a/b/c", "a file now\n", 0o644)},
		)},
		{name: "rename-away-and-back", ops: withProbes(
			[]op{rename("a/b", "a/z")},
			[]op{rename("a/z", "a/b")},
		)},
		{name: "symlink-in-place", ops: withProbes(
			[]op{removeAll("a/b/c"), symlink("../../internal/util", "a/b/c")},
			[]op{remove("a/b/c"), symlink("d", "a/b/c")},
		)},
		{name: "directory-moved-in", ops: withProbes(
			[]op{removeAll("a/b/c"), rename("internal/util/deep", "a/b/c")},
		)},
		{name: "chmod-ancestors", ops: withProbes(
			[]op{chmod("a/b", 0o700), chmod("a", 0o500)},
			[]op{chmod("a/b/c", 0o711)},
		)},
		{name: "whiteout-then-new-file", ops: withProbes(
			[]op{remove("a/b/c/file.txt")},
			[]op{writeFile("a/b/c/file.txt", "new bytes\n", 0o600)},
		)},
		// The directory last looked up is the one changed: its state,
		// kept at hand for a run of names in one directory, must follow.
		{name: "run-in-one-directory", ops: []op{
			writeFile("layer.txt", "not empty\n", 0o644),
			stat("a/b/c/file.txt"), lstat("a/b/c/missing"), stat("a/b/c/new.txt"),
			writeFile("a/b/c/new.txt", "hi\n", 0o644),
			stat("a/b/c/new.txt"), readFile("a/b/c/new.txt"), stat("a/b/c/file.txt"),
			remove("a/b/c/file.txt"),
			stat("a/b/c/file.txt"), lstat("a/b/c/new.txt"),
			stat("a/b/file.txt"), writeFile("a/b/new2.txt", "x\n", 0o644),
			stat("a/b/new2.txt"), stat("a/b/c/util.go"),
			removeAll("a/b"), stat("a/b/c/util.go"), stat("a/b/new2.txt"),
		}},
		{name: "new-entries-in-bare-dirs", ops: withProbes(
			[]op{writeFile("a/b/c/new.txt", "hi\n", 0o644), writeFile("new-at-root", "root\n", 0o644)},
			[]op{symlink("file.txt", "a/b/c/ln"), mkdir("a/b/c/nd", 0o750)},
			[]op{remove("a/b/c/new.txt"), remove("a/b/c/ln"), remove("a/b/c/nd")},
		)},
	})
}

// TestFastPathLifecycle fills the records, then moves the layer under
// them with Restore, Fork and Reset, each compared with os on a copy in
// the same state.
func TestFastPathLifecycle(t *testing.T) {
	orig := origTree(t, "project")
	c := newCow(t, orig)
	got := newEnv(c, c.Root(), true)
	check := func(label string, want, got *env) {
		t.Helper()
		if err := errors.Join(runOps(fastProbes(), want, got)...); err != nil {
			t.Errorf("%s:\n%v", label, err)
		}
	}
	apply := func(ops []op, envs ...*env) {
		for _, o := range ops {
			for _, e := range envs {
				o.run(e)
			}
		}
	}
	change := []op{
		removeAll("a/b/c"), symlink("../../internal/util", "a/b/c"),
		remove("a/b/file.txt"), writeFile("new-at-root", "root\n", 0o644),
	}

	// State A: one layer file. State B: A plus the change.
	dirA := osCopy(t, orig)
	wantA := newEnv(osTarget{}, dirA, false)
	apply([]op{writeFile("layer.txt", "not empty\n", 0o644)}, wantA, got)
	check("A", wantA, got)
	sA := c.Snapshot()
	dirB := osCopy(t, dirA)
	wantB := newEnv(osTarget{}, dirB, false)
	apply(change, wantB, got)
	check("B", wantB, got)
	sB := c.Snapshot()

	// Filled in A, restored to B: the change must show.
	c.Restore(sA)
	check("A restored", wantA, got)
	c.Restore(sB)
	check("B restored over A's records", wantB, got)
	c.Restore(sA)
	check("A restored over B's records", wantA, got)

	// A fork of A, filled, then changed; the parent stays A.
	fk := c.Fork()
	fkEnv := newEnv(fk, fk.Root(), true)
	wantFork := newEnv(osTarget{}, osCopy(t, dirA), false)
	check("fork of A", wantFork, fkEnv)
	apply(change, wantFork, fkEnv)
	check("fork changed", wantFork, fkEnv)
	check("parent after the fork changed", wantA, got)
	check("fork after the parent filled its records", wantFork, fkEnv)
	// The parent changed after the fork: the fork does not see it.
	apply(change, got)
	check("parent changed", wantB, got)
	check("fork after the parent changed", wantFork, fkEnv)

	// Reset over B's records: the lower again; then a layer again.
	c.Reset()
	check("reset", newEnv(osTarget{}, orig, false), got)
	dirR := osCopy(t, orig)
	wantR := newEnv(osTarget{}, dirR, false)
	apply([]op{writeFile("layer.txt", "not empty\n", 0o644)}, wantR, got)
	check("reset, then a layer file", wantR, got)
	apply(change, wantR, got)
	check("reset, then the change", wantR, got)
}

// TestFastPathConcurrentFill fills the records from many goroutines at
// once (Stat, Lstat and reads racing over the same directories), then
// changes ancestors and compares with os: a record lost or half made by a
// racing fill would leave a changed directory trusted.
func TestFastPathConcurrentFill(t *testing.T) {
	orig := origTree(t, "project")
	changes := [][]op{
		{removeAll("a/b/c"), symlink("../../internal/util", "a/b/c"), chmod("a", 0o700), remove("README.md")},
		{removeAll("a/b"), mkdirAll("a/b/c", 0o755)},
		{rename("internal/util", "a/util"), symlink("../a", "internal/util")},
		{chmod("a/b", 0o700), removeAll("internal/util/deep"), writeFile("internal/util/deep", "file\n", 0o644)},
	}
	wants := make([]*env, len(changes))
	for i, change := range changes {
		wants[i] = newEnv(osTarget{}, osCopy(t, orig), false)
		// As the rounds make and remove "made" (the root's time moves).
		for _, o := range append([]op{mkdirAll("made", 0o755), remove("made")}, change...) {
			o.run(wants[i])
		}
	}
	for round := range 40 {
		c := newCow(t, orig)
		got := newEnv(c, c.Root(), true)
		c.MkdirAll(c.Root()+"/made", 0o755) // a layer entry: no empty-layer shortcut
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e := newEnv(c, c.Root(), true)
				names := fastProbeNames
				for i := range names {
					n := names[(i+g*5)%len(names)]
					stat(n).run(e)
					lstat(n).run(e)
					readFile(n).run(e)
				}
			}()
		}
		wg.Wait()
		c.Remove(c.Root() + "/made")
		i := round % len(changes)
		for _, o := range changes[i] {
			o.run(got)
		}
		if err := errors.Join(runOps(fastProbes(), wants[i], got)...); err != nil {
			t.Fatalf("round %d, changes %d:\n%v", round, i, err)
		}
	}
}

// TestStatWithoutLockSeesWrites: Stat and Lstat of lower names through
// the fast path's records (it pinned the lock-free tier, which is gone;
// the records remain), while fillers keep statting from other goroutines. After each change returns,
// another goroutine, told over a channel, must see it: its probes are
// compared with os on a copy that went through the same changes. A record
// whose bits were taken away after the write lock was released, or not at
// all, shows up here as a stale lower answer.
func TestStatWithoutLockSeesWrites(t *testing.T) {
	orig := origTree(t, "project")
	changes := []op{
		writeFile("README.md", "now in the layer, longer than before\n", 0o644),
		writeFile("new-at-root", "new\n", 0o644),
		// Enough names beside lower ones to outgrow a directory's filter
		// of layer names more than once (see cleanDirs).
		writeFile("n1", "n", 0o644), writeFile("n2", "n", 0o644), writeFile("n3", "n", 0o644),
		writeFile("n4", "n", 0o644), writeFile("n5", "n", 0o644), writeFile("n6", "n", 0o644),
		writeFile("n7", "n", 0o644), writeFile("n8", "n", 0o644), writeFile("n9", "n", 0o644),
		writeFile("main.go", "package main\n", 0o644), writeFile("go.mod", "module m\n", 0o644),
		writeFile("a/b/c/new.txt", "new\n", 0o644),
		removeAll("a/b/c"), symlink("../../internal/util", "a/b/c"),
		chmod("a", 0o700), remove("README.md"),
		rename("internal/util", "a/util"), symlink("../a", "internal/util"),
		removeAll("a/b"), mkdirAll("a/b/c", 0o755),
		writeFile("a/b/c/file.txt", "again\n", 0o600),
	}
	for round := range longtest.N(3, 30) {
		c := newCow(t, orig)
		got := newEnv(c, c.Root(), true)
		want := newEnv(osTarget{}, osCopy(t, orig), false)
		writeFile("layer.txt", "not empty\n", 0o644).run(got)
		writeFile("layer.txt", "not empty\n", 0o644).run(want)
		stop := make(chan struct{})
		var fillers sync.WaitGroup
		for g := range 2 {
			fillers.Go(func() {
				e := newEnv(c, c.Root(), true)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					n := fastProbeNames[(i+g*7+round)%len(fastProbeNames)]
					stat(n).run(e)
					lstat(n).run(e)
				}
			})
		}
		check := make(chan int)
		result := make(chan error)
		go func() {
			for i := range check {
				e := newEnv(c, c.Root(), true)
				var probes []op
				for _, n := range append(slices.Clip(fastProbeNames), "main.go", "go.mod", "n5", "n9", "cmd/tool/main.go") {
					probes = append(probes, stat(n), lstat(n))
				}
				if err := errors.Join(runOps(probes, want, e)...); err != nil {
					result <- fmt.Errorf("after change %d (%v): %w", i, changes[i], err)
					continue
				}
				result <- nil
			}
		}()
		var failed error
		for i, o := range changes {
			o.run(want)
			o.run(got)
			check <- i
			if err := <-result; err != nil {
				failed = err
				break
			}
		}
		close(check)
		close(stop)
		fillers.Wait()
		if failed != nil {
			t.Fatalf("round %d: %v", round, failed)
		}
	}
}
