//go:build unix

package overlayfs_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cowfs/cowfs/overlayfs"
)

// specialTree materializes the "small" fixture plus FIFOs and sockets:
// pipe and sock at the top, d/pipe and d/sock below, a symlink lp -> pipe,
// and an empty dir q holding only a FIFO.
func specialTree(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "orig")
	writeTree(t, "small", dir)
	addSpecials(t, dir)
	sum := hashTree(t, dir)
	t.Cleanup(func() { checkUnchanged(t, dir, sum) })
	return dir
}

// addSpecials adds the FIFOs and sockets of specialTree under dir.
func addSpecials(t testing.TB, dir string) {
	t.Helper()
	for _, p := range []string{"pipe", "d/pipe", "q/pipe"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := unix.Mkfifo(filepath.Join(dir, p), 0o644); err != nil {
			t.Fatalf("mkfifo %s: %v", p, err)
		}
	}
	for _, p := range []string{"sock", "d/sock"} {
		if err := unix.Mknod(filepath.Join(dir, p), unix.S_IFSOCK|0o755, 0); err != nil {
			t.Fatalf("mknod %s: %v", p, err)
		}
	}
	if err := os.Symlink("pipe", filepath.Join(dir, "lp")); err != nil {
		t.Fatal(err)
	}
	if err := setTimes(dir); err != nil {
		t.Fatal(err)
	}
}

// watchdog fails the test if fn does not return within a few seconds: an
// operation that opens a FIFO for reading blocks forever.
func watchdog(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s blocked: a FIFO was opened", what)
	}
}

// TestSpecialFilesDifferential: FIFOs and sockets keep their type through
// Stat, Lstat, listings, Chmod, Chtimes, Chown, Rename (of themselves and
// of a directory holding them) and Remove, against os on a copy; the final
// trees and Changes() match os too. No step may open a FIFO.
func TestSpecialFilesDifferential(t *testing.T) {
	orig := specialTree(t)
	view := mustWalk(t, osTarget{}, orig)
	then := time.Date(2021, 5, 6, 7, 8, 9, 0, time.UTC)
	scs := []scenario{
		{name: "stat", ops: []op{lstat("pipe"), stat("pipe"), lstat("sock"), stat("sock"), stat("lp"), lstat("lp"), stat("d/pipe/"), stat("sock/.")}},
		{name: "list", ops: []op{open(0, ""), readdir(0, -1), open(1, "d"), readDirH(1, 2)}},
		{name: "chmod", ops: []op{chmod("pipe", 0o600), lstat("pipe"), chmod("sock", 0o700|fs.ModeSetgid), lstat("sock"), chmod("lp", 0o640), lstat("pipe"), open(0, ""), readdir(0, -1)}},
		{name: "chtimes", ops: []op{chtimes("pipe", then), mtime("pipe"), chtimes("d/sock", then), mtime("d/sock"), owner("pipe")}},
		{name: "chown", ops: []op{chown("pipe", 123, 456), owner("pipe"), chown("d/sock", 7, -1), owner("d/sock")}},
		{name: "rename", ops: []op{rename("pipe", "p2"), lstat("p2"), lstat("pipe"), stat("lp"), rename("sock", "d/s2"), lstat("d/s2"), open(0, "d"), readdirnames(0, -1)}},
		{name: "rename-over", ops: []op{rename("pipe", "a"), lstat("a"), rename("x", "sock"), lstat("sock"), rename("d/pipe", "d/sock"), lstat("d/sock")}},
		{name: "rename-dir", ops: []op{rename("d", "dd"), lstat("dd/pipe"), lstat("dd/sock"), chmod("dd/pipe", 0o604), rename("q", "d"), lstat("d/pipe")}},
		{name: "remove", ops: []op{remove("pipe"), lstat("pipe"), remove("d/sock/"), remove("d/sock"), removeAll("q"), lstat("q/pipe")}},
		{name: "replace", ops: []op{remove("pipe"), writeFile("pipe", "now a file", 0o644), lstat("pipe"), remove("sock"), mkdir("sock", 0o755), lstat("sock")}},
		{name: "open", ops: []op{openFile(0, "sock", rdonly, 0), openFile(0, "sock", rdwr, 0), openFile(0, "sock/", rdonly, 0), openFile(0, "pipe", wronly|creat|excl, 0o644), openFile(0, "pipe/", rdonly, 0), readFile("sock")}},
	}
	for _, sc := range scs {
		t.Run(sc.name, func(t *testing.T) {
			watchdog(t, sc.name, func() {
				if err := errors.Join(differentialView(t, orig, view, sc.ops)...); err != nil {
					t.Errorf("ops:\n\t%s\nmismatches:\n%v", opList(sc.ops), err)
				}
			})
		})
	}
}

// TestSpecialFilesOpen: where os would block on a FIFO the layer holds,
// the open fails with ErrSpecialFile; any FIFO opened for writing does
// too (its bytes could not stay in the layer).
func TestSpecialFilesOpen(t *testing.T) {
	orig := specialTree(t)
	c := newCow(t, orig)
	watchdog(t, "open", func() {
		for _, flag := range []int{os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC, os.O_RDWR | os.O_CREATE} {
			if _, err := c.OpenFile(filepath.Join(orig, "pipe"), flag, 0); !errors.Is(err, overlayfs.ErrSpecialFile) || !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("OpenFile(pipe, %s) = %v, want ErrSpecialFile", flagString(flag), err)
			}
		}
		if err := c.Chmod(filepath.Join(orig, "pipe"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := c.Open(filepath.Join(orig, "pipe"))
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Op != "open" || pe.Path != filepath.Join(orig, "pipe") || !errors.Is(err, overlayfs.ErrSpecialFile) {
			t.Errorf("Open of a chmod-ed FIFO = %v, want *fs.PathError wrapping ErrSpecialFile", err)
		}
		if _, err := c.Open(filepath.Join(orig, "lp")); !errors.Is(err, overlayfs.ErrSpecialFile) {
			t.Errorf("Open through a symlink to a chmod-ed FIFO = %v, want ErrSpecialFile", err)
		}
	})
}

// TestSpecialFilesLayer: Layer() reports FIFOs and sockets with their type,
// PutEntry accepts them, and the view shows them as os shows real ones.
func TestSpecialFilesLayer(t *testing.T) {
	orig := specialTree(t)
	c := newCow(t, orig)
	if err := c.Chmod(filepath.Join(orig, "pipe"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(filepath.Join(orig, "sock"), filepath.Join(orig, "d/s2")); err != nil {
		t.Fatal(err)
	}
	got := map[string]overlayfs.LayerEntry{}
	for _, e := range c.Layer() {
		got[e.Path] = e
	}
	if e := got["pipe"]; e.Type != overlayfs.EntryFIFO || e.Mode != 0o640 {
		t.Errorf("Layer()[pipe] = %v %v, want fifo 0640", e.Type, e.Mode)
	}
	if e := got["d/s2"]; e.Type != overlayfs.EntrySocket || e.Mode != 0o755 {
		t.Errorf("Layer()[d/s2] = %v %v, want socket 0755", e.Type, e.Mode)
	}
	if e := got["sock"]; e.Type != overlayfs.EntryWhiteout {
		t.Errorf("Layer()[sock] = %v, want whiteout", e.Type)
	}
	if _, err := got["pipe"].Open(); err == nil {
		t.Errorf("LayerEntry.Open of a FIFO entry succeeded")
	}

	// PutEntry builds the same view in another overlay; os, with mkfifo
	// and mknod on a copy, is the oracle for what Lstat and listings show.
	mt := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)
	c2 := newCow(t, orig)
	for _, e := range []overlayfs.LayerEntry{
		{Path: "newpipe", Type: overlayfs.EntryFIFO, Mode: 0o620, ModTime: mt},
		{Path: "d/b", Type: overlayfs.EntrySocket, Mode: 0o711, ModTime: mt},
		{Path: "a", Type: overlayfs.EntryFIFO, Mode: 0o644, ModTime: mt},
	} {
		if err := c2.PutEntry(e, nil); err != nil {
			t.Fatalf("PutEntry(%v): %v", e, err)
		}
	}
	cp := osCopy(t, orig)
	for _, step := range []error{
		unix.Mkfifo(filepath.Join(cp, "newpipe"), 0o620),
		os.Remove(filepath.Join(cp, "d/b")),
		unix.Mknod(filepath.Join(cp, "d/b"), unix.S_IFSOCK|0o711, 0),
		os.Remove(filepath.Join(cp, "a")),
		unix.Mkfifo(filepath.Join(cp, "a"), 0o644),
		os.Chmod(filepath.Join(cp, "newpipe"), 0o620),
		os.Chmod(filepath.Join(cp, "d/b"), 0o711),
		os.Chmod(filepath.Join(cp, "a"), 0o644),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	want, gotTree := mustWalk(t, osTarget{}, cp), mustWalk(t, c2, c2.Root())
	if err := errors.Join(diffTrees(want, gotTree)...); err != nil {
		t.Errorf("view after PutEntry differs from os:\n%v", err)
	}
	if err := errors.Join(checkChanges(c2, view0(t, orig), want)...); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"newpipe", "d/b", "a"} {
		fi, err := c2.Lstat(filepath.Join(orig, name))
		if err != nil {
			t.Fatal(err)
		}
		wfi, err := os.Lstat(filepath.Join(cp, name))
		if err != nil {
			t.Fatal(err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		wst := wfi.Sys().(*syscall.Stat_t)
		if !ok || st.Mode != wst.Mode {
			t.Errorf("Lstat(%s).Sys() mode = %v, os says %#o", name, fi.Sys(), wst.Mode)
		}
	}
}

func view0(t testing.TB, orig string) map[string]entry { return mustWalk(t, osTarget{}, orig) }

// TestSpecialFilesWriteDiff: changes touching FIFOs and sockets are left
// out of the patch, every other change is in it: real git apply in a copy
// of the root reproduces the view's files and symlinks, and the special
// files of the copy are left as they were where git cannot express them.
func TestSpecialFilesWriteDiff(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("git not found in PATH (%v): WriteDiff is checked with git apply", err)
	}
	orig := specialTree(t)
	c := newCow(t, orig)
	at := func(p string) string { return filepath.Join(orig, p) }
	for _, step := range []error{
		c.Remove(at("d/pipe")),                  // a deleted FIFO
		c.Chmod(at("sock"), 0o700),              // a socket's mode
		c.Rename(at("pipe"), at("moved")),       // a FIFO moved
		writeThrough(c, at("a"), "changed\n"),   // a file changed
		writeThrough(c, at("new.txt"), "new\n"), // a file added
		c.Remove(at("d/sock")),                  // a deleted socket
		c.Remove(at("x")),                       // a deleted file
		c.PutEntry(overlayfs.LayerEntry{Path: "x", Type: overlayfs.EntryFIFO, Mode: 0o600}, nil), // file -> FIFO
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	var patch bytes.Buffer
	if err := c.WriteDiff(&patch); err != nil {
		t.Fatalf("WriteDiff: %v", err)
	}
	for _, p := range []string{"pipe", "sock", "moved"} {
		if strings.Contains(patch.String(), " b/"+p+"\n") {
			t.Errorf("patch names special file %s:\n%s", p, patch.String())
		}
	}
	kinds := map[string]overlayfs.ChangeKind{}
	for _, ch := range c.Changes() {
		kinds[ch.Path] = ch.Kind
	}
	for p, k := range map[string]overlayfs.ChangeKind{"d/pipe": overlayfs.Deleted, "sock": overlayfs.Modified, "pipe": overlayfs.Deleted, "moved": overlayfs.Added, "d/sock": overlayfs.Deleted, "x": overlayfs.Modified} {
		if kinds[p] != k {
			t.Errorf("Changes()[%s] = %v, want %v", p, kinds[p], k)
		}
	}
	dir := filepath.Join(t.TempDir(), "apply")
	if err := copyTree(orig, dir); err != nil {
		t.Fatal(err)
	}
	if err := patchGitApply(git, dir, patch.Bytes(), false); err != nil {
		t.Fatalf("%v\npatch:\n%s", err, patch.String())
	}
	// Oracle: the files and symlinks git sees in the copy equal the view's.
	want := regularView(t, c, orig)
	got := regularView(t, osTarget{}, dir)
	if d := diffMaps(want, got); d != "" {
		t.Errorf("after git apply, files and symlinks differ from the view:\n%s", d)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "d/pipe")); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("git apply touched the FIFO d/pipe: %v %v", fi, err)
	}
}

// writeThrough writes a file through fsys's own calls.
func writeThrough(fsys target, name, data string) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(data))
	return errors.Join(err, f.Close())
}

// regularView is the walk of root through fsys restricted to files and
// symlinks, with only the executable bit of files: what git expresses.
func regularView(t testing.TB, fsys target, root string) map[string]string {
	out := map[string]string{}
	for k, e := range mustWalk(t, fsys, root) {
		switch {
		case e.mode&fs.ModeSymlink != 0:
			out[k] = "link " + e.content
		case e.mode.IsRegular():
			out[k] = "file " + map[bool]string{true: "x ", false: "- "}[e.mode&0o100 != 0] + e.content
		}
	}
	return out
}

func diffMaps(want, got map[string]string) string {
	var b strings.Builder
	for _, k := range sortedKeys(want, got) {
		if want[k] != got[k] {
			b.WriteString(k + ": want " + want[k] + ", got " + got[k] + "\n")
		}
	}
	return b.String()
}
