package overlayfs_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzPaths is the small alphabet of names FuzzOps works on, over the
// "small" fixture (a, x, d/b, d/c, d/e/, l -> a, ld -> d, m -> missing).
// Symlink targets come from the names without "..", so nothing made by a
// sequence can point out of the root.
var fuzzPaths = []string{
	"a", "x", "d", "d/b", "d/c", "d/e", "d/e/f", "l", "ld", "ld/b",
	"m", "missing", "n", "n/f", "d/n", "a/", "d/", "d/../a", "ld/../x", "d/e/../../x",
}

var fuzzData = []string{"", "Z", "hello", "0123456789abcdefghij", "alpha\n"}

var fuzzPerms = []fs.FileMode{0o644, 0o600, 0o755, 0o700, 0o444, 0}

// opDecoder turns fuzz bytes into ops; past the end it reads zeros.
type opDecoder struct{ b []byte }

func (d *opDecoder) next() int {
	if len(d.b) == 0 {
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return int(v)
}

func (d *opDecoder) path() string       { return fuzzPaths[d.next()%len(fuzzPaths)] }
func (d *opDecoder) data() string       { return fuzzData[d.next()%len(fuzzData)] }
func (d *opDecoder) perm() fs.FileMode  { return fuzzPerms[d.next()%len(fuzzPerms)] }
func (d *opDecoder) slot() int          { return d.next() % 2 }
func (d *opDecoder) small() int         { return d.next()%24 - 2 }
func (d *opDecoder) offset() int64      { return int64(d.next()%40) - 4 }
func (d *opDecoder) linkTarget() string { return safeTargets[d.next()%len(safeTargets)] }

var safeTargets = func() []string {
	var out []string
	for _, p := range fuzzPaths {
		if !strings.Contains(p, "..") {
			out = append(out, p)
		}
	}
	return out
}()

const maxFuzzOps = 24

// decodeOps reads at most maxFuzzOps ops from data.
func decodeOps(data []byte) []op {
	d := &opDecoder{b: data}
	var ops []op
	for len(d.b) > 0 && len(ops) < maxFuzzOps {
		var o op
		switch d.next() % 23 {
		case 0:
			flag := d.next()
			acc := []int{rdonly, wronly, rdwr}[flag%3]
			for i, bit := range []int{creat, excl, trunc, appnd} {
				if flag&(4<<i) != 0 {
					acc |= bit
				}
			}
			o = openFile(d.slot(), d.path(), acc, d.perm())
		case 1:
			o = read(d.slot(), d.small()+2)
		case 2:
			o = readAt(d.slot(), d.small()+2, d.offset())
		case 3:
			o = write(d.slot(), d.data())
		case 4:
			o = writeAt(d.slot(), d.data(), d.offset())
		case 5:
			o = seek(d.slot(), d.offset(), d.next()%3)
		case 6:
			o = truncH(d.slot(), d.offset())
		case 7:
			o = closeH(d.slot())
		case 8:
			o = fstat(d.slot())
		case 9:
			o = readdirnames(d.slot(), d.next()%4-1)
		case 10:
			o = mkdir(d.path(), d.perm())
		case 11:
			o = mkdirAll(d.path(), d.perm())
		case 12:
			o = remove(d.path())
		case 13:
			o = removeAll(d.path())
		case 14:
			o = rename(d.path(), d.path())
		case 15:
			o = chmod(d.path(), d.perm())
		case 16:
			o = symlink(d.linkTarget(), d.path())
		case 17:
			o = readlink(d.path())
		case 18:
			o = lstat(d.path())
		case 19:
			o = stat(d.path())
		case 20:
			o = readFile(d.path())
		case 21:
			o = writeFile(d.path(), d.data(), d.perm())
		case 22:
			o = open(d.slot(), d.path())
		}
		ops = append(ops, o)
	}
	return ops
}

// knownFuzzOps names corpus entries (testdata/fuzz/FuzzOps) whose
// divergence from os is still open in overlayfs, with what differs.
var knownFuzzOps = map[string]string{}

// FuzzOps runs a decoded op sequence on os (a fresh copy of the "small"
// fixture) and on cowfs, and compares every step, the trees and Changes();
// then a sequence of the random differential drawn from the same bytes.
// It changes the working directory while it runs (never in parallel with
// another test: fuzz targets are not).
func FuzzOps(f *testing.F) {
	// The seed corpus is in testdata/fuzz/FuzzOps (seed-* files, one op
	// sequence each, decoded by decodeOps; indices into fuzzPaths: a=0 x=1
	// d=2 d/b=3 d/c=4 d/e=5 d/e/f=6 l=7 ld=8 ld/b=9 m=10 missing=11 n=12
	// n/f=13 d/n=14 a/=15 d/=16).
	orig := origTree(f, "small")
	view := mustWalk(f, osTarget{}, orig)
	sum := hashTree(f, orig)
	f.Fuzz(func(t *testing.T, data []byte) {
		if why := knownFuzzOps[path.Base(t.Name())]; why != "" {
			t.Skip("known divergence: " + why)
		}
		ops := decodeOps(data)
		if len(ops) == 0 {
			return
		}
		errs := differentialView(t, orig, view, ops)
		if got := hashTree(t, orig); got != sum {
			errs = append(errs, errors.New("the original tree was modified"))
		}
		if err := errors.Join(errs...); err != nil {
			t.Errorf("ops:\n\t%s\nmismatches:\n%v", opList(ops), err)
		}
		// The same bytes drive the random differential's generator
		// (random_test.go, Linux only): decorated names, three handles,
		// Chdir and relative names, setgid and sticky dirs, links out of
		// the root, FIFOs and sockets, io.Copy and ReadFrom.
		fuzzRandom(t, data)
	})
}

// FuzzResolve: any name, joined to the root, resolves like os does on a copy
// (Lstat and Stat outcome), and a write to it never touches the disk.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		"a", "d/b", "d//b", "./a", "d/./b", "d/../a", "../root/a", "../outside/file.txt",
		"out/file.txt", "out/../root/a", "abs/file.txt", "ld/../../outside", "l/", "a/.", "m",
		"d/e/../../../root/x", "..", "../..", "/", "ld/b/", "lp/lp/lp", "l//", "loop", "loop/x",
		strings.Repeat("ld/", 50) + "b", strings.Repeat("../", 30) + "etc", "d/\x00", strings.Repeat("n", 300),
		"../alias/d/b", "../alias/../root/a", "../alias/..", "../alias/l/", "../alias/ld/../a", "../dalias/../outside",
	} {
		f.Add(s)
	}
	base := f.TempDir()
	// "abs" is absolute, so both sides point at one shared directory.
	shared := filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "file.txt"), []byte("shared"), 0o644); err != nil {
		f.Fatal(err)
	}
	mk := func(side string) (root string) {
		parent := filepath.Join(base, side)
		if err := os.Mkdir(parent, 0o755); err != nil {
			f.Fatal(err)
		}
		root = filepath.Join(parent, "root")
		writeTree(f, "small", root)
		outside := filepath.Join(parent, "outside")
		if err := os.Mkdir(outside, 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, "file.txt"), []byte("outside"), 0o644); err != nil {
			f.Fatal(err)
		}
		for link, target := range map[string]string{"out": "../outside", "abs": shared, "lp": "lp", "loop": "loop2", "loop2": "loop"} {
			if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
				f.Fatal(err)
			}
		}
		return root
	}
	origRoot, copyRoot := mk("A"), mk("B")
	for _, root := range []string{origRoot, copyRoot} {
		// Beside each root, bind mounts of it and of its d: names through
		// them resolve in os as in the overlay (alias.go).
		undo, err := bindBeside(root, map[string]string{"alias": "", "dalias": "d"})
		if err != nil {
			f.Logf("no bind-mount aliases: mounting needs CAP_SYS_ADMIN: %v", err)
		}
		f.Cleanup(undo)
	}
	origParent := filepath.Dir(origRoot)
	sum := hashTree(f, origParent)
	sharedSum := hashTree(f, shared)
	f.Fuzz(func(t *testing.T, name string) {
		c := newCow(t, origRoot)
		want := newEnv(osTarget{}, copyRoot, false)
		got := newEnv(c, c.Root(), true)
		ops := []op{lstat(name), stat(name), readlink(name)}
		if errs := runOps(ops, want, got); len(errs) > 0 {
			t.Errorf("name %q:\n%v", name, errors.Join(errs...))
		}
		// The io/fs view: invalid names are fs.ErrInvalid, valid ones
		// resolve like os.DirFS over the copy (a NUL byte is "invalid
		// argument" both ways, as EINVAL or fs.ErrInvalid).
		for call, stat := range map[string]func(fs.FS, string) (fs.FileInfo, error){"Stat": fs.Stat, "Lstat": fs.Lstat} {
			wi, werr := stat(os.DirFS(copyRoot), name)
			gi, gerr := stat(c.IOFS(), name)
			if !fs.ValidPath(name) {
				if !errors.Is(gerr, fs.ErrInvalid) {
					t.Errorf("IOFS %s(%q) = %v, want fs.ErrInvalid", call, name, gerr)
				}
				continue
			}
			if strings.Contains(name, "\x00") {
				if werr == nil || gerr == nil {
					t.Errorf("IOFS %s(%q) = %v, os.DirFS %v; want errors", call, name, gerr, werr)
				}
				continue
			}
			if errClass(werr) != errClass(gerr) || info(wi) != info(gi) {
				t.Errorf("IOFS %s(%q) = %s, %v; os.DirFS says %s, %v", call, name, info(gi), gerr, info(wi), werr)
			}
		}
		target := filepath.Clean(origRoot + "/" + name)
		_, beforeErr := os.Lstat(target)
		if fh, err := c.OpenFile(origRoot+"/"+name, os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
			io.WriteString(fh, "x")
			fh.Close()
		}
		c.Mkdir(origRoot+"/"+name, 0o755)
		c.MkdirAll(origRoot+"/"+name+"/sub", 0o755)
		c.Remove(origRoot + "/" + name)
		if got := hashTree(t, origParent); got != sum {
			t.Fatalf("name %q: a write reached the disk under %s", name, origParent)
		}
		if got := hashTree(t, shared); got != sharedSum {
			t.Fatalf("name %q: a write reached the disk under %s", name, shared)
		}
		if errors.Is(beforeErr, fs.ErrNotExist) {
			if _, err := os.Lstat(target); err == nil {
				os.Remove(target)
				t.Fatalf("name %q: a write created %s on disk", name, target)
			}
		}
	})
}
