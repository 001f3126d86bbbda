//go:build linux

package overlayfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cowfs/cowfs/overlayfs"
)

// Appends at the end of a lower file keep its content on the lower until
// something needs it. These tests hold that to os on a real copy.

// appendFixture writes a small lower tree: a 4 KiB file, a short one and
// one in a directory.
func appendFixture(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "d"), 0o755))
	big := bytes.Repeat([]byte("0123456789abcde\n"), 256)
	require.NoError(t, os.WriteFile(filepath.Join(root, "a"), big, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "b"), []byte("bravo\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "d/c"), []byte("charlie"), 0o755)) // git keeps 0644 and 0755 only
	require.NoError(t, setTimes(root))
	return root
}

// appendLog records what a scenario observes, errors by class.
type appendLog struct{ b strings.Builder }

func (l *appendLog) add(what string, v any, err error) {
	fmt.Fprintf(&l.b, "%s: %v %s\n", what, v, errClass(err))
}

// appendOps are handle operations a scenario runs on either side.
type appendOps struct {
	fsys afero.Fs
	root string
	log  *appendLog
	t    *testing.T
}

func (o appendOps) p(name string) string { return filepath.Join(o.root, name) }

func (o appendOps) open(name string, flag int) afero.File {
	f, err := o.fsys.OpenFile(o.p(name), flag, 0o644)
	o.log.add("open "+name, err == nil, err)
	if err != nil {
		o.t.Fatalf("open %s: %v", name, err)
	}
	return f
}

func (o appendOps) write(f afero.File, s string) {
	n, err := f.Write([]byte(s))
	o.log.add("write", n, err)
	off, err := f.Seek(0, io.SeekCurrent)
	o.log.add("offset", off, err)
}

func (o appendOps) writeAt(f afero.File, s string, off int64) {
	n, err := f.WriteAt([]byte(s), off)
	o.log.add("writeat", n, err)
}

func (o appendOps) stat(name string) {
	fi, err := o.fsys.Stat(o.p(name))
	if err == nil {
		o.log.add("stat "+name, fi.Size(), nil)
		return
	}
	o.log.add("stat "+name, nil, err)
}

func (o appendOps) fstat(f afero.File) {
	fi, err := f.Stat()
	if err == nil {
		o.log.add("fstat", fi.Size(), nil)
		return
	}
	o.log.add("fstat", nil, err)
}

func (o appendOps) seek(f afero.File, off int64, whence int) {
	abs, err := f.Seek(off, whence)
	o.log.add(fmt.Sprintf("seek %d %d", off, whence), abs, err)
}

func (o appendOps) read(f afero.File, n int) {
	p := make([]byte, n)
	m, err := f.Read(p)
	o.log.add("read", fmt.Sprintf("%q", p[:m]), err)
}

func (o appendOps) readAt(f afero.File, n int, off int64) {
	p := make([]byte, n)
	m, err := f.ReadAt(p, off)
	o.log.add(fmt.Sprintf("readat %d", off), fmt.Sprintf("%q", p[:m]), err)
}

func (o appendOps) readFile(name string) {
	data, err := afero.ReadFile(o.fsys, o.p(name))
	o.log.add("readfile "+name, fmt.Sprintf("%d %x", len(data), data[max(0, len(data)-40):]), err)
}

func (o appendOps) close(f afero.File) { o.log.add("close", "", f.Close()) }

// appendScenarios each run the same operations on cowfs and on os.
var appendScenarios = []struct {
	name string
	run  func(o appendOps)
}{
	{"reads-through-other-handles", func(o appendOps) {
		early := o.open("a", os.O_RDONLY) // opened on the lower before any copy-up
		w := o.open("a", os.O_WRONLY|os.O_APPEND)
		o.write(w, "one\n")
		o.stat("a")
		o.fstat(w)
		o.fstat(early)
		o.seek(early, -6, io.SeekEnd)
		o.read(early, 10)
		late := o.open("a", os.O_RDONLY)
		o.readAt(late, 8, 4096)
		o.write(w, "two\n")
		o.readAt(late, 12, 4094)
		o.read(early, 10)
		o.seek(late, 0, io.SeekEnd)
		o.close(early)
		o.close(late)
		o.close(w)
		o.readFile("a")
	}},
	{"writeat-at-size", func(o appendOps) {
		w := o.open("b", os.O_WRONLY)
		o.writeAt(w, "x", 6)
		o.writeAt(w, "yz", 7)
		o.fstat(w)
		o.write(w, "B") // at offset 0: inside the content
		o.writeAt(w, "!", 20)
		o.close(w)
		o.readFile("b")
	}},
	{"seek-end-then-write", func(o appendOps) {
		w := o.open("d/c", os.O_WRONLY)
		o.seek(w, 0, io.SeekEnd)
		o.write(w, " tango")
		o.write(w, " uniform")
		o.stat("d/c")
		o.close(w)
		o.readFile("d/c")
	}},
	{"truncate-after-append", func(o appendOps) {
		w := o.open("a", os.O_WRONLY|os.O_APPEND)
		o.write(w, "tail\n")
		o.log.add("truncate", "", w.Truncate(4090))
		o.fstat(w)
		o.write(w, "more")
		o.log.add("truncate", "", w.Truncate(5000))
		o.write(w, "end")
		o.close(w)
		o.readFile("a")
	}},
	{"truncate-by-name-after-append", func(o appendOps) {
		w := o.open("b", os.O_WRONLY|os.O_APPEND)
		o.write(w, "charlie\n")
		other := o.open("b", os.O_WRONLY)
		o.log.add("truncate", "", other.Truncate(3))
		o.close(other)
		o.write(w, "delta\n")
		o.close(w)
		o.readFile("b")
	}},
	{"rename-after-append", func(o appendOps) {
		w := o.open("a", os.O_WRONLY|os.O_APPEND)
		o.write(w, "before\n")
		o.log.add("rename", "", o.fsys.Rename(o.p("a"), o.p("d/moved")))
		o.write(w, "after\n")
		o.stat("a")
		o.stat("d/moved")
		o.close(w)
		o.readFile("d/moved")
	}},
	{"remove-after-append", func(o appendOps) {
		w := o.open("b", os.O_RDWR|os.O_APPEND)
		o.write(w, "gone\n")
		o.log.add("remove", "", o.fsys.Remove(o.p("b")))
		o.write(w, "still\n")
		o.fstat(w)
		o.seek(w, 0, io.SeekStart)
		o.read(w, 64)
		o.close(w)
		o.stat("b")
	}},
	{"concurrent-handles", func(o appendOps) {
		w1 := o.open("b", os.O_WRONLY|os.O_APPEND)
		w2 := o.open("b", os.O_WRONLY|os.O_APPEND)
		rw := o.open("b", os.O_RDWR)
		o.write(w1, "1\n")
		o.write(w2, "2\n")
		o.write(w1, "3\n")
		o.read(rw, 4)
		o.write(rw, "X")
		o.write(w2, "4\n")
		o.seek(rw, 0, io.SeekEnd)
		o.write(rw, "5\n") // at the end, from a read-write handle
		o.write(w1, "6\n")
		for _, f := range []afero.File{w1, w2, rw} {
			o.close(f)
		}
		o.readFile("b")
	}},
	{"empty-writes", func(o appendOps) {
		w := o.open("b", os.O_WRONLY|os.O_APPEND)
		o.write(w, "")
		o.writeAt(w, "", 0)
		o.write(w, "x")
		o.write(w, "")
		o.close(w)
		o.readFile("b")
	}},
	{"io-copy-in-and-out", func(o appendOps) {
		w := o.open("a", os.O_WRONLY|os.O_APPEND)
		n, err := io.Copy(w, strings.NewReader("copied in\n"))
		o.log.add("copy in", n, err)
		r := o.open("a", os.O_RDONLY)
		var buf bytes.Buffer
		n, err = io.Copy(&buf, r)
		o.log.add("copy out", fmt.Sprintf("%d %q", n, buf.Bytes()[buf.Len()-20:]), err)
		o.close(r)
		o.close(w)
	}},
}

// TestLazyAppendAgainstOS runs each scenario on cowfs and on os on a copy,
// then compares what each observed, the trees, Changes(), WriteDiff
// applied by real git, and the root after Commit.
func TestLazyAppendAgainstOS(t *testing.T) {
	git, gitErr := exec.LookPath("git")
	for _, sc := range appendScenarios {
		t.Run(sc.name, func(t *testing.T) {
			orig := appendFixture(t)
			before, err := walkTarget(osTarget{}, orig)
			require.NoError(t, err)
			root, osRoot := osCopy(t, orig), osCopy(t, orig)
			var got, want appendLog
			c := newCow(t, root)
			sc.run(appendOps{fsys: c, root: root, log: &got, t: t})
			sc.run(appendOps{fsys: osTarget{}, root: osRoot, log: &want, t: t})
			require.Equal(t, want.b.String(), got.b.String(), "observations")

			after, err := walkTarget(osTarget{}, osRoot)
			require.NoError(t, err)
			view, err := walkTarget(c, root)
			require.NoError(t, err)
			require.Empty(t, diffTrees(after, view), "view against os")
			require.Empty(t, checkChanges(c, before, after))

			if gitErr != nil {
				t.Log("git not found, WriteDiff not checked with git apply:", gitErr)
			} else {
				var patch bytes.Buffer
				require.NoError(t, c.WriteDiff(&patch))
				applied := osCopy(t, orig)
				require.NoError(t, patchGitApply(git, applied, patch.Bytes(), false))
				got, err := walkTarget(osTarget{}, applied)
				require.NoError(t, err)
				require.Empty(t, diffTrees(after, got), "git apply of WriteDiff")
			}

			require.NoError(t, c.Commit())
			committed, err := walkTarget(osTarget{}, root)
			require.NoError(t, err)
			require.Empty(t, diffTrees(after, committed), "root after Commit")
			require.Empty(t, c.Changes())
		})
	}
}

// TestLazyAppendSnapshots appends between Snapshot, Fork and Restore: each
// view must hold what os holds after the same appends.
func TestLazyAppendSnapshots(t *testing.T) {
	orig := appendFixture(t)
	c := newCow(t, orig)
	name := filepath.Join(orig, "b")
	appendTo := func(fsys afero.Fs, name, s string) {
		t.Helper()
		f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.Write([]byte(s))
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	// The os oracle: one copy per state.
	states := map[string]string{}
	osState := func(label string, appends ...string) {
		dir := osCopy(t, orig)
		for _, s := range appends {
			appendTo(osTarget{}, filepath.Join(dir, "b"), s)
		}
		data, err := os.ReadFile(filepath.Join(dir, "b"))
		require.NoError(t, err)
		states[label] = string(data)
	}
	osState("one", "1\n")
	osState("two", "1\n", "2\n")
	osState("fork", "1\n", "f\n")
	osState("fork2", "1\n", "f\n", "g\n")
	check := func(fsys afero.Fs, label string) {
		t.Helper()
		data, err := afero.ReadFile(fsys, name)
		require.NoError(t, err)
		require.Equal(t, states[label], string(data), label)
		fi, err := fsys.Stat(name)
		require.NoError(t, err)
		require.Equal(t, int64(len(states[label])), fi.Size(), label)
	}

	appendTo(c, name, "1\n")
	s1 := c.Snapshot()
	fork := c.Fork()
	appendTo(c, name, "2\n")
	appendTo(fork, name, "f\n")
	s2 := c.Snapshot()
	appendTo(fork, name, "g\n")
	check(fork, "fork2")
	check(c, "two")
	c.Restore(s1)
	check(c, "one")
	c.Restore(s2)
	check(c, "two")
	c.Restore(s1)
	appendTo(c, name, "2\n") // the same append again, after a restore
	check(c, "two")
	check(fork, "fork2")
}

// TestLazyAppendCommitConflict: a file appended to still depends on the
// lower it was copied from; a change to that lower is a conflict.
func TestLazyAppendCommitConflict(t *testing.T) {
	root := appendFixture(t)
	c := newCow(t, root)
	f, err := c.OpenFile(filepath.Join(root, "b"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte("tail\n"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.WriteFile(filepath.Join(root, "b"), []byte("changed on disk\n"), 0o644))
	err = c.Commit()
	require.ErrorIs(t, err, overlayfs.ErrConflict)
	data, err := os.ReadFile(filepath.Join(root, "b"))
	require.NoError(t, err)
	require.Equal(t, "changed on disk\n", string(data), "nothing written")
}

// TestLazyAppendConcurrent: appenders on their own handles lose nothing,
// as on os: the same length and the same lines.
func TestLazyAppendConcurrent(t *testing.T) {
	orig := appendFixture(t)
	root, osRoot := osCopy(t, orig), osCopy(t, orig)
	c := newCow(t, root)
	run := func(fsys afero.Fs, dir string) []string {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				f, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Error(err)
					return
				}
				defer f.Close()
				for i := range 50 {
					if _, err := fmt.Fprintf(f, "writer %d line %d\n", g, i); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		data, err := afero.ReadFile(fsys, filepath.Join(dir, "a"))
		require.NoError(t, err)
		lines := strings.SplitAfter(string(data), "\n")
		slices.Sort(lines)
		return lines
	}
	require.Equal(t, run(osTarget{}, osRoot), run(c, root))
}

// TestLazyAppendReadsLowerOnce counts the opens of the lower file with
// inotify: none for appends, Stat, Seek and Changes; one at the first read;
// none after.
func TestLazyAppendReadsLowerOnce(t *testing.T) {
	root := appendFixture(t)
	lower := filepath.Join(root, "a")
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skip("inotify unavailable:", err)
	}
	defer unix.Close(fd)
	_, err = unix.InotifyAddWatch(fd, lower, unix.IN_OPEN)
	require.NoError(t, err)
	opens := func() int {
		n := 0
		buf := make([]byte, 4096)
		for {
			m, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EAGAIN) {
				return n
			}
			require.NoError(t, err)
			for off := 0; off+unix.SizeofInotifyEvent <= m; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&unix.IN_OPEN != 0 {
					n++
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
	total := 0
	step := func(what string, want int) {
		t.Helper()
		total += opens()
		require.Equal(t, want, total, "opens of the lower after %s", what)
	}

	c := newCow(t, root)
	step("New", 0)
	w, err := c.OpenFile(lower, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	for range 3 {
		_, err = w.Write([]byte("line\n"))
		require.NoError(t, err)
	}
	fi, err := c.Stat(lower)
	require.NoError(t, err)
	require.Equal(t, int64(4096+15), fi.Size())
	off, err := w.Seek(0, io.SeekEnd)
	require.NoError(t, err)
	require.Equal(t, int64(4096+15), off)
	require.Len(t, c.Changes(), 1)
	s := c.Snapshot()
	f2 := c.Fork()
	_, err = w.Write([]byte("after snapshot\n"))
	require.NoError(t, err)
	step("appends, Stat, Seek, Changes, Snapshot and Fork", 0)

	data, err := afero.ReadFile(c, lower)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(data), "line\nline\nline\nafter snapshot\n"))
	step("the first read", 1)
	_, err = w.Write([]byte("more\n"))
	require.NoError(t, err)
	data2, err := afero.ReadFile(c, lower)
	require.NoError(t, err)
	require.Equal(t, string(data)+"more\n", string(data2))
	require.NoError(t, w.Close())
	step("a second read", 1)

	// The fork and the snapshot hold their own content version: each is
	// read from the lower at most once.
	forked, err := afero.ReadFile(f2, lower)
	require.NoError(t, err)
	require.Equal(t, 4096+15, len(forked))
	_, err = afero.ReadFile(f2, lower)
	require.NoError(t, err)
	step("two reads in the fork", 2)
	// A restored snapshot still holds the lazy version it was taken with.
	c.Restore(s)
	restored, err := afero.ReadFile(c, lower)
	require.NoError(t, err)
	require.Equal(t, forked, restored)
}
