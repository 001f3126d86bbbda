//go:build linux

package overlayfs_test

// The quota differential: seeded sequences of writes, appends, writes
// past the end (holes), truncates (shrinking and extending), creates,
// mkdirs, symlinks (short and long targets), removes and renames run on an
// overlay of an empty directory with WithQuota(bytes, inodes) and, through
// os, on a real tmpfs mounted with size=bytes,nr_inodes=inodes+1. After
// every operation: the same errno (or none), the same byte count written,
// and Usage equal to what statfs says the tmpfs holds (blocks and inodes
// used, less its root); at the end the same tree. A Snapshot taken midway
// and restored at the end must report the usage the tmpfs had then, and
// a Fork counts on its own.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cowfs/cowfs/internal/longtest"
	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs with opts at a new directory, or skips.
func mountTmpfs(t testing.TB, opts string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Skipf("mounting a tmpfs needs privileges: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// tmpfsUsage is what the tmpfs at dir holds: data bytes (in pages) and
// inodes, less its root directory.
func tmpfsUsage(t testing.TB, dir string) overlayfs.Usage {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return overlayfs.Usage{Bytes: int64(st.Blocks-st.Bfree) * int64(st.Bsize), Inodes: int64(st.Files-st.Ffree) - 1}
}

type quotaOp struct {
	kind     string
	a, b     string
	off, n   int64
	longLink bool
	slot     int // hold, heldwrite, release: which held handle
}

// held are the handles a sequence keeps open across operations: a file
// removed while one is open keeps its pages until the last close (tmpfs).
type held [2]afero.File

// closeAll closes the held handles.
func (h *held) closeAll() {
	for i, f := range h {
		if f != nil {
			f.Close()
			h[i] = nil
		}
	}
}

func (o quotaOp) String() string {
	return fmt.Sprintf("%s(%s,%s,off=%d,n=%d,long=%v,slot=%d)", o.kind, o.a, o.b, o.off, o.n, o.longLink, o.slot)
}

var quotaNames = []string{"a", "b", "c", "d", "d/x", "d/y", "e", "e/z", "d/e", "d/e/w"}

func genQuotaOp(r *rand.Rand) quotaOp {
	name := func() string { return quotaNames[r.IntN(len(quotaNames))] }
	size := func() int64 {
		switch r.IntN(4) {
		case 0:
			return r.Int64N(100)
		case 1:
			return r.Int64N(3) * 4096
		default:
			return r.Int64N(5 * 4096)
		}
	}
	kinds := []string{"write", "write", "append", "append", "writeat", "truncate", "create", "mkdir", "mkdir", "symlink", "remove", "rename", "removeall", "link",
		"hold", "hold", "heldwrite", "heldwrite", "release"}
	o := quotaOp{kind: kinds[r.IntN(len(kinds))], a: name(), b: name(), n: size(), off: size(), longLink: r.IntN(3) == 0, slot: r.IntN(2)}
	return o
}

// applyQuotaOp runs o on fsys under dir, with the handles h holds,
// returning the bytes it wrote and its error.
func applyQuotaOp(fsys afero.Fs, dir string, o quotaOp, h *held) (int64, error) {
	a, b := filepath.Join(dir, o.a), filepath.Join(dir, o.b)
	data := make([]byte, o.n)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	write := func(flag int, at int64) (int64, error) {
		fh, err := fsys.OpenFile(a, flag, 0o644)
		if err != nil {
			return 0, err
		}
		var n int
		if at >= 0 {
			n, err = fh.WriteAt(data, at)
		} else {
			n, err = fh.Write(data)
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		return int64(n), err
	}
	switch o.kind {
	case "write":
		return write(os.O_WRONLY|os.O_CREATE|os.O_TRUNC, -1)
	case "append":
		return write(os.O_WRONLY|os.O_CREATE|os.O_APPEND, -1)
	case "writeat":
		return write(os.O_WRONLY|os.O_CREATE, o.off)
	case "truncate":
		fh, err := fsys.OpenFile(a, os.O_WRONLY, 0)
		if err != nil {
			return 0, err
		}
		err = fh.Truncate(o.off)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		return 0, err
	case "create":
		fh, err := fsys.OpenFile(a, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return 0, err
		}
		return 0, fh.Close()
	case "mkdir":
		return 0, fsys.Mkdir(a, 0o755)
	case "symlink":
		target := "t-" + o.b
		if o.longLink {
			target = strings.Repeat("x", 200)
		}
		return 0, fsys.(afero.Linker).SymlinkIfPossible(target, a)
	case "remove":
		return 0, fsys.Remove(a)
	case "removeall":
		return 0, fsys.RemoveAll(a)
	case "rename":
		return 0, fsys.Rename(a, b)
	case "hold":
		fh, err := fsys.OpenFile(a, os.O_RDWR, 0)
		if err != nil {
			return 0, err
		}
		if h[o.slot] != nil {
			h[o.slot].Close()
		}
		h[o.slot] = fh
		return 0, nil
	case "heldwrite":
		if h[o.slot] == nil {
			return 0, nil
		}
		n, err := h[o.slot].WriteAt(data, o.off)
		return int64(n), err
	case "release":
		if h[o.slot] == nil {
			return 0, nil
		}
		err := h[o.slot].Close()
		h[o.slot] = nil
		return 0, err
	case "link":
		if l, ok := fsys.(interface{ Link(string, string) error }); ok {
			return 0, l.Link(a, b)
		}
		return 0, os.Link(a, b)
	}
	panic(o.kind)
}

// quotaErrClass is the errno inside err, "" for none.
func quotaErrClass(err error) string {
	if err == nil {
		return ""
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e.Error()
	}
	return "other: " + err.Error()
}

// TestQuotaTmpfsDifferential runs random sequences on WithQuota and on a
// real tmpfs of the same size: 100 by default, 1,000 with COWFS_LONG=1.
func TestQuotaTmpfsDifferential(t *testing.T) {
	n := longtest.N(100, 1000)
	mountTmpfs(t, "size=4k") // skips without privileges
	divergences := 0
	var tally quotaTally
	first := 0
	if s := os.Getenv("QUOTA_SEED"); s != "" {
		fmt.Sscan(s, &first)
		n = first + 1
	}
	for seed := first; seed < n; seed++ {
		if err := quotaSequence(t, rand.New(rand.NewPCG(uint64(seed), 25)), &tally); err != nil {
			divergences++
			if divergences <= 5 {
				t.Errorf("seed %d: %v", seed, err)
			}
		}
	}
	t.Logf("%d sequences (%d operations: %d ENOSPC, %d of them short writes), %d divergences", n-first, tally.ops, tally.full, tally.short, divergences)
}

// quotaTally counts what the sequences exercised.
type quotaTally struct{ ops, full, short int }

// quotaSequence runs one sequence drawn from r (limits, then operations)
// on a fresh overlay and a fresh tmpfs, and returns the first divergence.
func quotaSequence(t *testing.T, r *rand.Rand, tally *quotaTally) error {
	pages := 1 + r.Int64N(12)
	bytes := pages*4096 - r.Int64N(4096) // tmpfs rounds size= up to pages
	inodes := 2 + r.Int64N(8)
	mem := mountTmpfs(t, fmt.Sprintf("size=%d,nr_inodes=%d", bytes, inodes+1))
	lower := t.TempDir()
	ov, err := overlayfs.New(lower, overlayfs.WithQuota(bytes, inodes))
	if err != nil {
		t.Fatal(err)
	}
	osfs := afero.NewOsFs()
	var snap *overlayfs.Snapshot
	var atSnap overlayfs.Usage
	steps := 20 + r.IntN(40)
	var log []string
	var wh, gh held
	defer wh.closeAll()
	defer gh.closeAll()
	for i := range steps {
		o := genQuotaOp(r)
		var pre string
		if fi, err := os.Lstat(filepath.Join(mem, o.a)); err == nil {
			pre = fmt.Sprintf(" [before: %s size %d, tmpfs %+v, limit %d/%d]", fi.Mode(), fi.Size(), tmpfsUsage(t, mem), bytes, inodes)
		}
		log = append(log, o.String()+pre)
		wn, werr := applyQuotaOp(osfs, mem, o, &wh)
		gn, gerr := applyQuotaOp(ov, lower, o, &gh)
		tally.ops++
		if errors.Is(werr, syscall.ENOSPC) {
			tally.full++
			if wn > 0 {
				tally.short++
			}
		}
		if quotaErrClass(werr) != quotaErrClass(gerr) || wn != gn {
			return fmt.Errorf("limits %d/%d, step %d %v: os wrote %d (%v), overlay %d (%v)\n%s", bytes, inodes, i, o, wn, werr, gn, gerr, strings.Join(log, "\n"))
		}
		if want, got := tmpfsUsage(t, mem), ov.Usage(); want != got {
			return fmt.Errorf("step %d %v: tmpfs holds %+v, overlay counts %+v\n%s", i, o, want, got, strings.Join(log, "\n"))
		}
		if i >= steps/2 && snap == nil && wh == (held{}) {
			// No handle open: the tmpfs holds what the snapshot counts
			// (a file removed while open is not the snapshot's).
			snap, atSnap = ov.Snapshot(), tmpfsUsage(t, mem)
		}
	}
	if want, got := treeOf(t, osfs, mem), treeOf(t, ov, lower); want != got {
		return fmt.Errorf("final trees differ:\ntmpfs:\n%s\noverlay:\n%s", want, got)
	}
	wh.closeAll()
	gh.closeAll()
	if want, got := tmpfsUsage(t, mem), ov.Usage(); want != got {
		return fmt.Errorf("all handles closed: tmpfs holds %+v, overlay counts %+v\n%s", want, got, strings.Join(log, "\n"))
	}
	fork := ov.Fork()
	before := ov.Usage()
	if err := afero.WriteFile(fork, filepath.Join(lower, "forked"), nil, 0o644); err == nil && fork.Usage().Inodes != before.Inodes+1 {
		return fmt.Errorf("a fork's new file: fork counts %+v, parent had %+v", fork.Usage(), before)
	}
	if ov.Usage() != before {
		return fmt.Errorf("a fork's write changed its parent's count: %+v, was %+v", ov.Usage(), before)
	}
	if snap == nil {
		snap, atSnap = ov.Snapshot(), ov.Usage()
	}
	ov.Restore(snap)
	if got := ov.Usage(); got != atSnap {
		return fmt.Errorf("restored: overlay counts %+v, the tmpfs held %+v at the snapshot", got, atSnap)
	}
	ov.Reset()
	if got := ov.Usage(); got != (overlayfs.Usage{}) {
		return fmt.Errorf("reset: overlay counts %+v", got)
	}
	return nil
}

// bytesSource is a rand.Source reading the fuzzer's bytes, 8 at a time,
// so that mutations of the input change the limits and the operations
// drawn; once they run out, a PCG seeded by their length goes on (a
// constant would make rand's bounded draws loop for ever).
type bytesSource struct {
	data []byte
	rest *rand.PCG
}

func (s *bytesSource) Uint64() uint64 {
	if len(s.data) == 0 {
		return s.rest.Uint64()
	}
	var b [8]byte
	n := copy(b[:], s.data)
	s.data = s.data[n:]
	return binary.LittleEndian.Uint64(b[:])
}

// FuzzQuota runs the quota differential on sequences decoded from the
// fuzzer's bytes (see TestQuotaTmpfsDifferential).
func FuzzQuota(f *testing.F) {
	for seed := range 4 {
		r := rand.New(rand.NewPCG(uint64(seed), 25))
		b := make([]byte, 512)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mountTmpfs(t, "size=4k") // skips without privileges
		var tally quotaTally
		if err := quotaSequence(t, rand.New(&bytesSource{data: data, rest: rand.NewPCG(uint64(len(data)), 25)}), &tally); err != nil {
			t.Fatal(err)
		}
	})
}

// TestQuotaConcurrent: goroutines append, create and remove under one
// quota at once. The count never passes the limit, and equals what a
// real tmpfs holding the final tree (copied into it) says it holds.
func TestQuotaConcurrent(t *testing.T) {
	mem := mountTmpfs(t, "size=64m")
	lower := t.TempDir()
	const limit = 40 * 4096
	ov, err := overlayfs.New(lower, overlayfs.WithQuota(limit, 100))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			name := filepath.Join(lower, fmt.Sprintf("f%d", g))
			for i := range 50 {
				fh, err := ov.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
				if err != nil {
					continue
				}
				fh.Write(make([]byte, 1000+i*37))
				fh.Close()
				if u := ov.Usage(); u.Bytes > limit {
					t.Errorf("usage %+v passes the limit %d", u, limit)
				}
				d := filepath.Join(lower, fmt.Sprintf("d%d-%d", g, i%5))
				if i%2 == 0 {
					ov.Mkdir(d, 0o755)
				} else {
					ov.Remove(d)
				}
				if i%17 == 16 {
					ov.Remove(name)
				}
			}
		})
	}
	wg.Wait()
	// The oracle: the final tree written into a real tmpfs.
	err = afero.Walk(ov, lower, func(p string, fi fs.FileInfo, err error) error {
		if err != nil || p == lower {
			return err
		}
		dst := filepath.Join(mem, strings.TrimPrefix(p, lower+"/"))
		if fi.IsDir() {
			return os.Mkdir(dst, 0o755)
		}
		data, err := afero.ReadFile(ov, p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if want, got := tmpfsUsage(t, mem), ov.Usage(); want != got {
		t.Errorf("a tmpfs holding the final tree holds %+v; the overlay counts %+v", want, got)
	}
}

// TestQuotaCopyUpKernel: copy-ups counted against the kernel's overlay
// with its upper on a tmpfs of the quota's size (the oracle): opening a
// lower file for writing, a Chmod (the kernel copies data up too, with
// metacopy=off), truncating a lower file, and a copy-up that no longer
// fits, which both refuse with ENOSPC. Usage is what the upper's tmpfs
// holds, less what the mount itself takes there.
func TestQuotaCopyUpKernel(t *testing.T) {
	lower := t.TempDir()
	for name, size := range map[string]int{"a": 5000, "b": 100, "c": 9000, "d": 5000} {
		if err := os.WriteFile(filepath.Join(lower, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const pages, inodes = 6, 10
	mem := mountTmpfs(t, fmt.Sprintf("size=%d,nr_inodes=%d", pages*4096, inodes+6))
	upper, work, merged := filepath.Join(mem, "upper"), filepath.Join(mem, "work"), t.TempDir()
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,index=off,metacopy=off,redirect_dir=nofollow", lower, upper, work)
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Skipf("mounting an overlay: %v", err)
	}
	defer unix.Unmount(merged, unix.MNT_DETACH)
	base := tmpfsUsage(t, mem)
	ov, err := overlayfs.New(lower, overlayfs.WithQuota(pages*4096, inodes))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		run  func(fsys afero.Fs, root string) error
	}{
		{"open a for writing", func(fsys afero.Fs, root string) error {
			fh, err := fsys.OpenFile(filepath.Join(root, "a"), os.O_WRONLY, 0)
			if err == nil {
				err = fh.Close()
			}
			return err
		}},
		{"chmod b", func(fsys afero.Fs, root string) error { return fsys.Chmod(filepath.Join(root, "b"), 0o600) }},
		{"truncate c to 4097", func(fsys afero.Fs, root string) error {
			fh, err := fsys.OpenFile(filepath.Join(root, "c"), os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer fh.Close()
			return fh.Truncate(4097)
		}},
		{"open d for writing (does not fit)", func(fsys afero.Fs, root string) error {
			fh, err := fsys.OpenFile(filepath.Join(root, "d"), os.O_WRONLY, 0)
			if err == nil {
				err = fh.Close()
			}
			return err
		}},
		{"open d with O_TRUNC (fits)", func(fsys afero.Fs, root string) error {
			fh, err := fsys.OpenFile(filepath.Join(root, "d"), os.O_WRONLY|os.O_TRUNC, 0)
			if err == nil {
				err = fh.Close()
			}
			return err
		}},
	}
	for _, s := range steps {
		werr, gerr := s.run(afero.NewOsFs(), merged), s.run(ov, lower)
		if quotaErrClass(werr) != quotaErrClass(gerr) {
			t.Errorf("%s: the kernel's overlay says %v, ours %v", s.name, werr, gerr)
		}
		k := tmpfsUsage(t, mem)
		want := overlayfs.Usage{Bytes: k.Bytes - base.Bytes, Inodes: k.Inodes - base.Inodes}
		if got := ov.Usage(); got != want {
			t.Errorf("%s: the upper's tmpfs holds %+v more; the overlay counts %+v", s.name, want, got)
		}
		t.Logf("%s: %v, %+v", s.name, werr, want)
	}
}

// TestQuotaCases runs short sequences the fuzzer found, each against a
// real tmpfs as the differential does.
func TestQuotaCases(t *testing.T) {
	mountTmpfs(t, "size=4k") // skips without privileges
	for _, tc := range []struct {
		name string
		ops  []quotaOp
	}{
		// A long symlink's page counted once across three names
		// (FuzzQuota, CI of stop 28: the third name freed it).
		// A file removed while open keeps its pages and inode, and each
		// removed directory above the name it was opened by keeps its
		// inode, until the last close (FuzzQuota, this session's
		// generator: hold and release).
		{"removed while open", []quotaOp{
			{kind: "mkdir", a: "d"},
			{kind: "mkdir", a: "d/e"},
			{kind: "write", a: "d/e/w", n: 5000},
			{kind: "hold", a: "d/e/w"},
			{kind: "removeall", a: "d"},
			{kind: "mkdir", a: "d"},
			{kind: "removeall", a: "d"},
			{kind: "heldwrite", off: 4096 * 3, n: 10},
			{kind: "release"},
		}},
		{"opened by a name in a removed directory", []quotaOp{
			{kind: "mkdir", a: "d"},
			{kind: "write", a: "a", n: 10},
			{kind: "link", a: "a", b: "d/x"},
			{kind: "hold", a: "d/x", slot: 1},
			{kind: "remove", a: "d/x"},
			{kind: "remove", a: "a"},
			{kind: "removeall", a: "d"},
			{kind: "release", slot: 1},
		}},
		{"symlink linked twice", []quotaOp{
			{kind: "symlink", a: "c", longLink: true},
			{kind: "link", a: "c", b: "e"},
			{kind: "append", a: "a", n: 79},
			{kind: "link", a: "c", b: "b"},
			{kind: "remove", a: "e"},
			{kind: "remove", a: "c"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := mountTmpfs(t, "size=26024,nr_inodes=5")
			lower := t.TempDir()
			ov, err := overlayfs.New(lower, overlayfs.WithQuota(26024, 4))
			if err != nil {
				t.Fatal(err)
			}
			step := quotaStepper(t, mem, ov, lower)
			for _, o := range tc.ops {
				step(o)
			}
		})
	}
}

// TestQuotaOrphanSnapshot: a file removed while a handle is open is
// counted until the last close, as a tmpfs counts it; a Snapshot and a
// Fork taken meanwhile do not count it, so restoring the snapshot after
// the close, and the fork, count what the tmpfs holds then.
func TestQuotaOrphanSnapshot(t *testing.T) {
	mem := mountTmpfs(t, "size=64k,nr_inodes=9")
	lower := t.TempDir()
	ov, err := overlayfs.New(lower, overlayfs.WithQuota(64<<10, 8))
	if err != nil {
		t.Fatal(err)
	}
	step := quotaStepper(t, mem, ov, lower)
	step(quotaOp{kind: "write", a: "a", n: 3 * 4096})
	step(quotaOp{kind: "write", a: "b", n: 100})
	step(quotaOp{kind: "hold", a: "a"})
	step(quotaOp{kind: "remove", a: "a"})
	step(quotaOp{kind: "heldwrite", off: 5 * 4096, n: 10})
	snap, fork := ov.Snapshot(), ov.Fork()
	step(quotaOp{kind: "release"})
	want := tmpfsUsage(t, mem)
	if got := fork.Usage(); got != want {
		t.Errorf("fork taken while a removed file was open counts %+v, the tmpfs holds %+v after its close", got, want)
	}
	step(quotaOp{kind: "write", a: "c", n: 4096})
	ov.Restore(snap)
	if got := ov.Usage(); got != want {
		t.Errorf("restored a snapshot taken while a removed file was open: counts %+v, the tmpfs held %+v after its close", got, want)
	}
}

// quotaStepper returns a function that runs one operation on the tmpfs
// mem and on ov over lower, each side with its own held handles (closed
// when t ends), and fails t when the outcomes or the counts differ.
func quotaStepper(t *testing.T, mem string, ov *overlayfs.Fs, lower string) func(quotaOp) {
	var wh, gh held
	t.Cleanup(wh.closeAll)
	t.Cleanup(gh.closeAll)
	return func(o quotaOp) {
		t.Helper()
		wn, werr := applyQuotaOp(afero.NewOsFs(), mem, o, &wh)
		gn, gerr := applyQuotaOp(ov, lower, o, &gh)
		if quotaErrClass(werr) != quotaErrClass(gerr) || wn != gn {
			t.Fatalf("%v: os wrote %d (%v), overlay %d (%v)", o, wn, werr, gn, gerr)
		}
		if want, got := tmpfsUsage(t, mem), ov.Usage(); want != got {
			t.Fatalf("%v: tmpfs holds %+v, overlay counts %+v", o, want, got)
		}
	}
}
