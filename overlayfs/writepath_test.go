package overlayfs_test

// Edges of the write path's fast paths (issue 14): an O_TRUNC that keeps the
// file's buffer, checked against os on a real file for what handles see,
// and against the content each frozen copy (Snapshot, Fork, Layer) had.

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/overlayfs"
)

// truncSeq writes name three times through fsys (longer, shorter, empty,
// then again), with a read handle opened before the first rewrite, and
// returns what the handle and ReadFile saw after each step.
func truncSeq(t *testing.T, fsys afero.Fs, name string) []string {
	t.Helper()
	var seen []string
	must(t, afero.WriteFile(fsys, name, []byte("the first version, long"), 0o644))
	h, err := fsys.Open(name)
	must(t, err)
	defer h.Close()
	for _, content := range []string{"second, longer than the first one", "third", "", "fourth version"} {
		must(t, afero.WriteFile(fsys, name, []byte(content), 0o644))
		got, err := io.ReadAll(io.NewSectionReader(h, 0, 1<<10))
		must(t, err)
		all, err := afero.ReadFile(fsys, name)
		must(t, err)
		seen = append(seen, string(got), string(all))
	}
	return seen
}

func TestTruncReuseMatchesOs(t *testing.T) {
	for _, lower := range []bool{false, true} {
		root := t.TempDir()
		name := filepath.Join(root, "f")
		if lower {
			must(t, os.WriteFile(name, []byte("lower content"), 0o644))
		}
		c := newCow(t, root)
		got := truncSeq(t, c, name)
		want := truncSeq(t, afero.NewOsFs(), filepath.Join(t.TempDir(), "f"))
		if !slices.Equal(got, want) {
			t.Errorf("lower=%v: handle and ReadFile saw\n%q\nos saw\n%q", lower, got, want)
		}
	}
}

// TestTruncReuseKeepsFrozenCopies: overwriting a file with O_TRUNC reuses
// its buffer only while nothing else holds it: a snapshot, a fork and a
// Layer listing taken before keep the old bytes.
func TestTruncReuseKeepsFrozenCopies(t *testing.T) {
	root := t.TempDir()
	name := filepath.Join(root, "f")
	c := newCow(t, root)
	old := []byte("0123456789abcdef, the old content")
	must(t, afero.WriteFile(c, name, old, 0o644))
	s := c.Snapshot()
	fork := c.Fork()
	layer := c.Layer()

	// Same length, shorter, longer: each rewrite may land in the old buffer.
	for _, content := range []string{"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefg", "short", "a longer content than the old one was"} {
		must(t, afero.WriteFile(c, name, []byte(content), 0o644))
		if got, err := afero.ReadFile(c, name); err != nil || string(got) != content {
			t.Fatalf("ReadFile after rewrite = %q, %v; want %q", got, err, content)
		}
	}
	if got, err := afero.ReadFile(fork, name); err != nil || !bytes.Equal(got, old) {
		t.Errorf("fork reads %q, %v; want the content at Fork %q", got, err, old)
	}
	for _, e := range layer {
		if e.Path != "f" {
			continue
		}
		r, err := e.Open()
		must(t, err)
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, old) {
			t.Errorf("Layer entry reads %q, %v; want %q", got, err, old)
		}
	}
	c.Restore(s)
	if got, err := afero.ReadFile(c, name); err != nil || !bytes.Equal(got, old) {
		t.Errorf("after Restore ReadFile = %q, %v; want %q", got, err, old)
	}
	// The restored content is shared with the snapshot again: rewriting it
	// must not reach the snapshot.
	must(t, afero.WriteFile(c, name, []byte("XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"), 0o644))
	c.Restore(s)
	if got, err := afero.ReadFile(c, name); err != nil || !bytes.Equal(got, old) {
		t.Errorf("after a second Restore ReadFile = %q, %v; want %q", got, err, old)
	}
}

// TestMetadataAfterSnapshot: directories and symlinks share their
// metadata with the snapshots and forks taken before a Chmod or Chtimes of
// them, which must not reach those copies. What is expected is what os
// gives the same calls on a real tree.
func TestMetadataAfterSnapshot(t *testing.T) {
	root, osRoot := t.TempDir(), t.TempDir()
	c := newCow(t, root, overlayfs.WithUmask(0o022))
	old := setUmask(0o022)
	defer setUmask(old)
	then := time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC)
	later := then.Add(time.Hour)
	type state struct {
		mode fs.FileMode
		time time.Time
	}
	at := func(lstat func(string) (fs.FileInfo, error), p string) state {
		t.Helper()
		fi, err := lstat(p)
		must(t, err)
		return state{fi.Mode(), fi.ModTime().UTC()}
	}
	cowLstat := func(fsys *overlayfs.Fs) func(string) (fs.FileInfo, error) {
		return func(p string) (fs.FileInfo, error) { return fsys.Lstat(filepath.Join(root, p)) }
	}
	osLstat := func(p string) (fs.FileInfo, error) { return os.Lstat(filepath.Join(osRoot, p)) }

	must(t, c.Mkdir(filepath.Join(root, "d"), 0o755))
	must(t, c.Chtimes(filepath.Join(root, "d"), then, then))
	must(t, c.SymlinkIfPossible("d", filepath.Join(root, "l")))
	must(t, os.Mkdir(filepath.Join(osRoot, "d"), 0o755))
	must(t, os.Chtimes(filepath.Join(osRoot, "d"), then, then))
	want := at(osLstat, "d")
	s := c.Snapshot()
	fork := c.Fork()

	must(t, c.Chmod(filepath.Join(root, "l"), 0o700)) // through the symlink
	must(t, c.Chtimes(filepath.Join(root, "d"), later, later))
	must(t, os.Chmod(filepath.Join(osRoot, "d"), 0o700))
	must(t, os.Chtimes(filepath.Join(osRoot, "d"), later, later))
	if got, osGot := at(cowLstat(c), "d"), at(osLstat, "d"); got != osGot {
		t.Errorf("after Chmod and Chtimes: %v; os gives %v", got, osGot)
	}
	if got := at(cowLstat(fork), "d"); got != want {
		t.Errorf("fork: %v; want it as at Fork: %v", got, want)
	}
	c.Restore(s)
	if got := at(cowLstat(c), "d"); got != want {
		t.Errorf("restored: %v; want it as at Snapshot: %v", got, want)
	}
}

// TestHandleBlobAcrossFreezes writes through one handle kept open across
// the things that freeze or replace the layer's content (Snapshot, Fork,
// Layer, Restore) and an unlink: a handle finds its content without a
// search while the layer owns it, so each of them must end that. What the
// handle and the tree hold is checked against os on a real file (for the
// live side) and against the bytes each frozen copy had.
func TestHandleBlobAcrossFreezes(t *testing.T) {
	root, osRoot := t.TempDir(), t.TempDir()
	c := newCow(t, root)
	name, osName := filepath.Join(root, "f"), filepath.Join(osRoot, "f")
	h, err := c.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	must(t, err)
	defer h.Close()
	oh, err := os.OpenFile(osName, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	must(t, err)
	defer oh.Close()
	write := func(s string) {
		t.Helper()
		if _, err := h.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if _, err := oh.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	same := func(step string) {
		t.Helper()
		got, err := io.ReadAll(io.NewSectionReader(h, 0, 1<<10))
		must(t, err)
		want, err := io.ReadAll(io.NewSectionReader(oh, 0, 1<<10))
		must(t, err)
		if string(got) != string(want) {
			t.Errorf("%s: handle reads %q; os gives %q", step, got, want)
		}
		tree, err := afero.ReadFile(c, name)
		osTree, oserr := os.ReadFile(osName)
		if string(tree) != string(osTree) || (err == nil) != (oserr == nil) {
			t.Errorf("%s: ReadFile gives %q, %v; os gives %q, %v", step, tree, err, osTree, oserr)
		}
	}
	frozen := func(fsys afero.Fs, want, step string) {
		t.Helper()
		if got, err := afero.ReadFile(fsys, name); err != nil || string(got) != want {
			t.Errorf("%s: frozen copy reads %q, %v; want %q", step, got, err, want)
		}
	}

	write("one ")
	s := c.Snapshot()
	write("two ")
	same("after Snapshot")
	fork := c.Fork()
	write("three ")
	same("after Fork")
	frozen(fork, "one two ", "Fork")
	_ = c.Layer()
	write("four ")
	same("after Layer")
	c.Restore(s)
	frozen(c, "one ", "Restore") // the restored content, not the handle's
	must(t, os.WriteFile(osName, []byte("one "), 0o644))
	write("five ")
	same("after Restore")
	must(t, c.Remove(name))
	must(t, os.Remove(osName))
	write("six ")
	same("after Remove")
	c.Restore(s)
	frozen(c, "one ", "second Restore")
	fork2 := c.Fork()
	frozen(fork2, "one ", "Fork after Restore")
}

// TestOpenLayerFileFastPath: opens for writing of a name the layer has a
// regular file at, in a directory with no layer entry above it, go
// through the resolver's fast path (it pinned the index of files, which
// is gone; the scenarios still hold). Each scenario writes its files
// twice, then puts them next to
// what the fast path must not take for them (a flag, a name's form, what
// replaced the file, a changed directory, a handle still open), against
// os on a copy.
func TestOpenLayerFileFastPath(t *testing.T) {
	made := []op{
		writeFile("d/n", "made in the layer\n", 0o644), writeFile("top", "at the root\n", 0o644),
		writeFile("d/n", "made in the layer, again\n", 0o644), writeFile("top", "at the root, again\n", 0o644),
	}
	with := func(ops ...op) []op { return append(slices.Clone(made), ops...) }
	runScenarios(t, []scenario{
		{name: "overwrite", fixture: "small", ops: with(
			openFile(0, "d/n", wronly|creat|trunc, 0o600), write(0, "new"), fstat(0), closeH(0), readFile("d/n"), lstat("d/n"),
			openFile(0, "top", rdwr|creat|trunc, 0o600), write(0, "T"), seek(0, 0, io.SeekStart), read(0, 10), closeH(0), readFile("top"))},
		{name: "copied-up", fixture: "small", ops: []op{
			writeFile("d/b", "bravo, again\n", 0o644),
			openFile(0, "d/b", wronly|creat|trunc, 0o600), write(0, "B"), closeH(0), readFile("d/b"),
			remove("d/b"), openFile(1, "d/b", wronly|trunc, 0), openFile(2, "d/b", wronly|creat, 0o600), write(2, "new b"), closeH(2),
			readFile("d/b"), lstat("d/b")}},
		{name: "no-create-no-trunc", fixture: "small", ops: with(
			openFile(0, "d/n", wronly, 0), write(0, "XY"), closeH(0), readFile("d/n"),
			openFile(0, "d/n", rdwr|appnd, 0), write(0, "end"), seek(0, 0, io.SeekStart), read(0, 100), closeH(0), readFile("d/n"))},
		{name: "excl", fixture: "small", ops: with(
			openFile(0, "d/n", wronly|creat|excl, 0o600), openFile(1, "top", rdwr|creat|excl|trunc, 0o600), readFile("d/n"))},
		{name: "name-forms", fixture: "small", ops: with(
			openFile(0, "d/n/", wronly|creat, 0o600), openFile(1, "d/n/", wronly, 0), openFile(2, "d/n/.", wronly|creat, 0o600),
			openFile(3, "d//n", wronly|trunc, 0), write(3, "slashes"), closeH(3),
			openFile(4, "d/./n", wronly|appnd, 0), write(4, "+dot"), closeH(4),
			openFile(5, "d/e/../n", wronly|appnd, 0), write(5, "+up"), closeH(5),
			openFile(6, "ld/n", wronly|appnd, 0), write(6, "+link"), closeH(6), readFile("d/n"))},
		{name: "through-symlink-then-retargeted", fixture: "small", ops: with(
			writeFile("ld/n", "through ld\n", 0o644), writeFile("ld/n", "through ld, again\n", 0o644),
			writeFile("d//n", "doubled slash\n", 0o644), writeFile("d//n", "doubled slash, again\n", 0o644),
			remove("ld"), symlink("d/e", "ld"), openFile(0, "ld/n", wronly, 0), openFile(1, "ld/n", wronly|creat|trunc, 0o600),
			write(1, "in d/e now"), closeH(1), readFile("d/n"), readFile("d/e/n"), readFile("ld/n"))},
		{name: "replaced-by-dir", fixture: "small", ops: with(
			remove("d/n"), mkdir("d/n", 0o755), openFile(0, "d/n", wronly|creat|trunc, 0o600), openFile(1, "d/n", rdwr, 0), lstat("d/n"))},
		{name: "replaced-by-symlink", fixture: "small", ops: with(
			remove("d/n"), symlink("../a", "d/n"), openFile(0, "d/n", wronly|creat|trunc, 0o600), write(0, "through"), closeH(0),
			readFile("a"), lstat("d/n"))},
		{name: "removed", fixture: "small", ops: with(
			remove("d/n"), openFile(0, "d/n", wronly|trunc, 0), openFile(1, "d/n", wronly|creat|trunc, 0o600), write(1, "again"), closeH(1),
			readFile("d/n"), lstat("d/n"))},
		{name: "chmod-of-file", fixture: "small", ops: with(
			chmod("d/n", 0o600), openFile(0, "d/n", wronly|trunc, 0), write(0, "x"), closeH(0), lstat("d/n"),
			chmod("d/n", 0o400), openFile(1, "d/n", wronly|appnd, 0), lstat("d/n"), readFile("d/n"))},
		{name: "renamed-away", fixture: "small", ops: with(
			rename("d/n", "d/moved"), openFile(0, "d/n", wronly, 0), openFile(1, "d/moved", wronly|appnd, 0), write(1, "+"), closeH(1),
			rename("d/moved", "d/n"), openFile(2, "d/n", wronly|appnd, 0), write(2, "back"), closeH(2), readFile("d/n"))},
		{name: "renamed-onto", fixture: "small", ops: with(
			writeFile("d/o", "other\n", 0o600), rename("d/o", "d/n"), openFile(0, "d/n", wronly|appnd, 0), write(0, "+"), closeH(0),
			readFile("d/n"), lstat("d/n"), lstat("d/o"))},
		{name: "dir-changed", fixture: "small", ops: with(
			chmod("d", 0o700), openFile(0, "d/n", rdwr|trunc, 0), write(0, "in a changed dir"), closeH(0), chmod("d", 0o755), readFile("d/n"),
			removeAll("d"), mkdir("d", 0o755), openFile(1, "d/n", wronly|trunc, 0), openFile(2, "d/n", wronly|creat, 0o600), write(2, "in a new dir"), closeH(2),
			readFile("d/n"))},
		{name: "handles-open", fixture: "small", ops: with(
			open(0, "d/n"), openFile(1, "d/n", wronly|trunc, 0), read(0, 100), write(1, "seen by both"), seek(0, 0, io.SeekStart), read(0, 100),
			closeH(1), openFile(2, "d/n", wronly|creat|trunc, 0o600), closeH(2), seek(0, 0, io.SeekStart), read(0, 100), fstat(0), closeH(0), readFile("d/n"))},
		{name: "unlinked-while-open", fixture: "small", ops: with(
			openFile(0, "d/n", rdwr, 0), remove("d/n"), openFile(1, "d/n", rdwr|creat|trunc, 0o600), write(1, "the new file"),
			write(0, "OLD"), seek(0, 0, io.SeekStart), read(0, 100), closeH(0),
			openFile(2, "d/n", rdwr|creat, 0o600), read(2, 100), closeH(1), closeH(2), readFile("d/n"))},
	})
}

// TestMtimesFollowTheClock: the times the layer gives changes are the wall
// clock's, as time.Now reads it before and after the change (the clock
// reads the wall clock once a millisecond and the monotonic clock in
// between: see clock), and never go back from one change to the next.
// Writes are spread over several milliseconds so that the clock is read
// again on the way.
func TestMtimesFollowTheClock(t *testing.T) {
	root := t.TempDir()
	c := newCow(t, root)
	name := filepath.Join(root, "f")
	var last time.Time
	for i := range 60 {
		before := time.Now().Round(0) // the wall clock alone
		must(t, afero.WriteFile(c, name, []byte{byte(i)}, 0o644))
		after := time.Now().Round(0)
		fi, err := c.Stat(name)
		must(t, err)
		m := fi.ModTime()
		// A step of the wall clock within the last millisecond is the
		// one thing clock may not have seen yet.
		if m.Before(before.Add(-time.Millisecond)) || m.After(after.Add(time.Millisecond)) {
			t.Fatalf("write %d: mtime %v, outside [%v, %v]", i, m, before, after)
		}
		if m.Before(last) {
			t.Fatalf("write %d: mtime %v went back from %v", i, m, last)
		}
		last = m
		time.Sleep(time.Duration(i%4) * 200 * time.Microsecond)
	}
}

// TestLayerFileIndexLifecycle: after Restore, Fork, Reset and Commit an
// open for writing finds what the layer has then, not what the fast
// path's records filled before say (it pinned the index of files, which
// is gone). Each state is checked against os on a copy in that state.
func TestLayerFileIndexLifecycle(t *testing.T) {
	orig := origTree(t, "small")
	c := newCow(t, orig)
	got := newEnv(c, c.Root(), true)
	apply := func(ops []op, envs ...*env) {
		for _, o := range ops {
			for _, e := range envs {
				o.run(e)
			}
		}
	}
	// probes opens each name for writing (twice: the second is the index's)
	// and reads it, through handles that are closed again.
	probes := func() []op {
		var ops []op
		for _, n := range []string{"f", "g", "d/b", "top"} {
			ops = append(ops,
				openFile(0, n, wronly, 0), closeH(0),
				openFile(0, n, wronly|appnd, 0), write(0, "."), closeH(0),
				openFile(0, n, rdwr, 0), read(0, 100), closeH(0), readFile(n))
		}
		return ops
	}
	check := func(label string, want, got *env) {
		t.Helper()
		want.closeAll() // the envs go from state to state: no handle of the last one
		got.closeAll()
		if err := errors.Join(runOps(probes(), want, got)...); err != nil {
			t.Errorf("%s:\n%v", label, err)
		}
	}
	twice := func(name, data string) []op {
		return []op{writeFile(name, data, 0o644), writeFile(name, data, 0o644)}
	}

	// A: f and d/b in the layer, indexed. B: f gone, d/b rewritten, g and
	// top made.
	dirA := osCopy(t, orig)
	wantA := newEnv(osTarget{}, dirA, false)
	apply(append(twice("f", "f in A\n"), twice("d/b", "b in A\n")...), wantA, got)
	check("A", wantA, got)
	sA := c.Snapshot()
	dirB := osCopy(t, dirA)
	wantB := newEnv(osTarget{}, dirB, false)
	// d/b is overwritten in place of A's content, which sA keeps.
	apply(append(append([]op{remove("f"), writeFile("d/b", "B!\n", 0o644)}, twice("g", "g in B\n")...), twice("top", "top in B\n")...), wantB, got)
	check("B", wantB, got)
	sB := c.Snapshot()

	c.Restore(sA)
	check("A restored over B's index", wantA, got)
	c.Restore(sB)
	check("B restored over A's index", wantB, got)

	fk := c.Fork()
	fkEnv := newEnv(fk, fk.Root(), true)
	wantFork := newEnv(osTarget{}, osCopy(t, dirB), false)
	apply([]op{remove("g"), mkdir("g", 0o755)}, wantFork, fkEnv)
	check("fork changed", wantFork, fkEnv)
	check("parent after the fork changed", wantB, got)
	apply([]op{remove("top"), symlink("d/b", "top")}, wantB, got)
	check("parent changed", wantB, got)
	check("fork after the parent changed", wantFork, fkEnv)

	c.Reset()
	check("reset", newEnv(osTarget{}, osCopy(t, orig), false), got)

	// Commit writes the layer to a copy of the root (the original stays
	// as it is), then the overlay goes on over it.
	root := osCopy(t, orig)
	cc := newCow(t, root)
	ccEnv := newEnv(cc, cc.Root(), true)
	wantC := newEnv(osTarget{}, osCopy(t, orig), false)
	apply(append(twice("f", "f before Commit\n"), twice("top", "top before Commit\n")...), wantC, ccEnv)
	check("before Commit", wantC, ccEnv)
	must(t, cc.Commit())
	check("after Commit", wantC, ccEnv)
	apply([]op{remove("f")}, wantC, ccEnv)
	check("after Commit, f removed", wantC, ccEnv)
}
