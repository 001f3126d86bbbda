package overlayfs_test

import (
	"errors"
	"fmt"
	"github.com/cowfs/cowfs/internal/longtest"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
)

// A workload is a large layer's worth of operations, generated against a
// model of the tree so that every one succeeds, and runnable on any
// afero.Fs: on the overlay (then committed) and on os over a copy (the
// oracle of the committed tree). Every file written gets a fixed time, so
// the two trees agree on file times too.

// wlOp is one operation of a workload, on root-relative slash paths.
type wlOp struct {
	Op   string // write, mkdirall, remove, removeall, rename, chmod, symlink
	A, B string
	Data string
	Mode fs.FileMode
}

// wlTime is the modification time every written file gets.
var wlTime = time.Unix(1_700_000_000, 0)

// wlBase writes the base tree of a workload at dir: nDirs directories of
// two levels, nFiles files spread over them, a few symlinks.
func wlBase(t testing.TB, dir string, nDirs, nFiles int) {
	t.Helper()
	files := map[string]string{}
	for i := range nFiles {
		d := fmt.Sprintf("d%02d", i%nDirs)
		if i%3 == 0 {
			d += "/s"
		}
		files[fmt.Sprintf("%s/f%03d", d, i)] = strings.Repeat(fmt.Sprintf("base %d\n", i), 1+i%7)
	}
	mkTree(t, dir, files)
	for i := range 4 {
		if err := os.Symlink(fmt.Sprintf("d%02d/f%03d", i, i), filepath.Join(dir, fmt.Sprintf("l%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Type().IsRegular() {
			err = os.Chtimes(p, wlTime, wlTime.Add(-time.Hour))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// wlGenerate makes a workload over the tree at dir: new files and
// directories, rewrites, deletions (of files and of whole directories),
// renames (of files and of a directory), symlinks, and at the end mode
// changes with setuid, setgid and sticky bits, the root's own included.
func wlGenerate(t testing.TB, dir string, r *rand.Rand, size int) []wlOp {
	t.Helper()
	files, dirs := map[string]bool{}, map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			dirs[filepath.ToSlash(rel)] = true
		} else if d.Type().IsRegular() {
			files[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pick := func(m map[string]bool) string {
		keys := sortedKeys(m)
		return keys[r.IntN(len(keys))]
	}
	exists := func(p string) bool { return files[p] || dirs[p] }
	var ops []wlOp
	n := 0
	fresh := func(d string) string {
		n++
		return path.Join(d, fmt.Sprintf("new%03d", n))
	}
	drop := func(p string) {
		for k := range files {
			if k == p || strings.HasPrefix(k, p+"/") {
				delete(files, k)
			}
		}
		for k := range dirs {
			if k == p || strings.HasPrefix(k, p+"/") {
				delete(dirs, k)
			}
		}
	}
	for range size {
		switch k := r.IntN(20); {
		case k < 6:
			p := fresh(pick(dirs))
			ops = append(ops, wlOp{Op: "write", A: p, Data: fmt.Sprintf("new file %s\n", p), Mode: 0o644})
			files[p] = true
		case k < 7:
			p := fresh(pick(dirs))
			deep := p + "/x/y"
			ops = append(ops, wlOp{Op: "mkdirall", A: deep, Mode: 0o755})
			dirs[p], dirs[p+"/x"], dirs[deep] = true, true, true
			for i := range 3 {
				f := fmt.Sprintf("%s/g%d", deep, i)
				ops = append(ops, wlOp{Op: "write", A: f, Data: strings.Repeat("deep\n", i+1), Mode: 0o600})
				files[f] = true
			}
		case k < 11:
			p := pick(files)
			ops = append(ops, wlOp{Op: "write", A: p, Data: fmt.Sprintf("rewritten %d\n", r.IntN(1000)), Mode: 0o644})
		case k < 13:
			p := pick(files)
			ops = append(ops, wlOp{Op: "remove", A: p})
			drop(p)
		case k < 16:
			p := pick(files)
			q := fresh(pick(dirs))
			ops = append(ops, wlOp{Op: "rename", A: p, B: q})
			drop(p)
			files[q] = true
		case k < 17:
			p := fresh(pick(dirs))
			ops = append(ops, wlOp{Op: "symlink", A: "../" + path.Base(p), B: p})
		case k < 18:
			continue
		default:
			if len(dirs) < 8 {
				continue
			}
			d := pick(dirs)
			if r.IntN(6) == 0 {
				ops = append(ops, wlOp{Op: "removeall", A: d})
				drop(d)
				continue
			}
			q := fresh(path.Dir(d))
			if exists(q) || strings.HasPrefix(q, d+"/") {
				continue
			}
			ops = append(ops, wlOp{Op: "rename", A: d, B: q})
			var moved []string
			for k := range files {
				if strings.HasPrefix(k, d+"/") {
					moved = append(moved, q+k[len(d):])
				}
			}
			for k := range dirs {
				if k == d || strings.HasPrefix(k, d+"/") {
					dirs[q+k[len(d):]] = true
				}
			}
			drop(d)
			for _, k := range moved {
				files[k] = true
			}
		}
	}
	modes := []fs.FileMode{0o600, 0o755, 0o644 | fs.ModeSetuid, 0o755 | fs.ModeSetgid, 0o777 | fs.ModeSticky, 0o750 | fs.ModeSetgid | fs.ModeSticky}
	for range size / 4 {
		m := modes[r.IntN(len(modes))]
		if r.IntN(3) == 0 {
			ops = append(ops, wlOp{Op: "chmod", A: pick(dirs), Mode: m | 0o700})
		} else {
			ops = append(ops, wlOp{Op: "chmod", A: pick(files), Mode: m})
		}
	}
	ops = append(ops, wlOp{Op: "chmod", A: ".", Mode: 0o750 | fs.ModeSetgid})
	return ops
}

// wlRun runs a workload on fsys over root.
func wlRun(fsys afero.Fs, root string, ops []wlOp) error {
	name := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
	for _, o := range ops {
		var err error
		switch o.Op {
		case "write":
			err = afero.WriteFile(fsys, name(o.A), []byte(o.Data), o.Mode)
			if err == nil {
				err = fsys.Chtimes(name(o.A), wlTime, wlTime)
			}
		case "mkdirall":
			err = fsys.MkdirAll(name(o.A), o.Mode)
		case "remove":
			err = fsys.Remove(name(o.A))
		case "removeall":
			err = fsys.RemoveAll(name(o.A))
		case "rename":
			err = fsys.Rename(name(o.A), name(o.B))
		case "chmod":
			err = fsys.Chmod(name(o.A), o.Mode)
		case "symlink":
			l, ok := fsys.(afero.Linker)
			if !ok {
				return fmt.Errorf("%T cannot make symlinks", fsys)
			}
			err = l.SymlinkIfPossible(o.A, name(o.B))
		default:
			err = fmt.Errorf("unknown op %q", o.Op)
		}
		if err != nil {
			return fmt.Errorf("%s %s %s: %w", o.Op, o.A, o.B, err)
		}
	}
	return nil
}

// wlOracle runs a workload with os on a copy of base and returns the
// state of the result: what a commit of the same workload must give.
func wlOracle(t testing.TB, base, scratch string, ops []wlOp) treeState {
	t.Helper()
	dir := filepath.Join(scratch, "oracle")
	if err := copyTree(base, dir); err != nil {
		t.Fatal(err)
	}
	if err := wlRun(afero.NewOsFs(), dir, ops); err != nil {
		t.Fatalf("the workload on os: %v", err)
	}
	s := snapTree(t, dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	return s
}

// resetTree makes dir a fresh copy of base.
func resetTree(t testing.TB, base, dir string) {
	t.Helper()
	unlockAll(dir)
	if err := errors.Join(os.RemoveAll(dir), copyTree(base, dir)); err != nil {
		t.Fatal(err)
	}
}

// unlockAll gives the owner full access to every directory under dir, so
// that os.RemoveAll can remove it as any user.
func unlockAll(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
}

// TestCommitWorkloadDifferential commits large random workloads and
// compares the disk with os on a copy that ran the same operations: types,
// every mode bit (setuid, setgid, sticky, the root's own mode), bytes,
// symlink targets, owners, file times. Changes() is empty afterwards, and
// nothing is left beside or inside the root.
func TestCommitWorkloadDifferential(t *testing.T) {
	for seed := range uint64(longtest.N(3, 8)) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			scratch := t.TempDir()
			base, root := filepath.Join(scratch, "base"), filepath.Join(scratch, "root")
			wlBase(t, base, 12, 200)
			ops := wlGenerate(t, base, rand.New(rand.NewPCG(seed, 11)), 300)
			want := wlOracle(t, base, scratch, ops)
			t.Logf("root %s; %d paths; ops %d", want["."], len(want), len(ops))
			resetTree(t, base, root)
			c := newCow(t, root)
			if err := wlRun(c, root, ops); err != nil {
				t.Fatalf("the workload on the overlay: %v", err)
			}
			if err := c.Commit(); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			if d := want.diff(snapTree(t, root)); len(d) > 0 {
				t.Errorf("the committed root differs from os (want vs got):\n%s", strings.Join(d, "\n"))
			}
			if cs := c.Changes(); len(cs) != 0 {
				t.Errorf("Changes() after Commit = %v, want none", cs)
			}
			beside, _ := os.ReadDir(scratch)
			var names []string
			for _, e := range beside {
				names = append(names, e.Name())
			}
			if !slices.Equal(names, []string{"base", "root"}) {
				t.Errorf("beside the root after Commit: %q, want only base and root", names)
			}
		})
	}
}
