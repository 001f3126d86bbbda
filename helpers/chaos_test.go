package helpers_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/tape"
)

// wide is a fixture whose root has 20 files, a directory and a symlink.
func wide() *txtar.Archive {
	ar := &txtar.Archive{Comment: []byte("dir sub\nsymlink link f00\n")}
	for i := range 20 {
		ar.Files = append(ar.Files, txtar.File{Name: fmt.Sprintf("f%02d", i), Data: []byte{byte(i)}})
	}
	return ar
}

func listNames(t testing.TB, fsys afero.Fs, dir string) []string {
	t.Helper()
	f, err := fsys.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func osNames(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestChaosShuffles(t *testing.T) {
	noTapes(t)
	orders := map[string]bool{}
	for seed := range uint64(10) {
		env := helpers.NewArchive(t, wide(), helpers.ChaosSeed(seed))
		want := osNames(t, env.Root()) // sorted
		first := listNames(t, env.Fs(), env.Root())
		second := listNames(t, env.Fs(), env.Root())
		for _, got := range [][]string{first, second} {
			if slices.Equal(got, want) {
				t.Errorf("seed %d: listing in sorted order", seed)
			}
			if !slices.Equal(slices.Sorted(slices.Values(got)), want) {
				t.Errorf("seed %d: listing %q is not a permutation of %q", seed, got, want)
			}
		}
		orders[strings.Join(first, " ")] = true

		// The same seed replays the same sequence of orders.
		again := helpers.NewArchive(t, wide(), helpers.ChaosSeed(seed))
		if a, b := listNames(t, again.Fs(), again.Root()), listNames(t, again.Fs(), again.Root()); !slices.Equal(a, first) || !slices.Equal(b, second) {
			t.Errorf("seed %d: not replayed:\n%q %q\n%q %q", seed, first, second, a, b)
		}
	}
	if len(orders) < 9 {
		t.Errorf("10 seeds gave %d distinct orders", len(orders))
	}
}

func TestChaosNeverSortedForTwo(t *testing.T) {
	noTapes(t)
	ar := txtar.Parse([]byte("-- a.conf --\n-- b.conf --\n"))
	for seed := range uint64(50) {
		env := helpers.NewArchive(t, ar, helpers.ChaosSeed(seed))
		if got := listNames(t, env.Fs(), env.Root()); !slices.Equal(got, []string{"b.conf", "a.conf"}) {
			t.Fatalf("seed %d: %q", seed, got)
		}
	}
}

// firstConf is order-dependent code: it takes the first .conf file of a
// listing, assuming the listing is sorted.
func firstConf(fsys afero.Fs, dir string) (string, error) {
	f, err := fsys.Open(dir)
	if err != nil {
		return "", err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".conf") {
			return n, nil
		}
	}
	return "", fs.ErrNotExist
}

func TestChaosCatchesOrderDependence(t *testing.T) {
	noTapes(t)
	ar := txtar.Parse([]byte("-- a.conf --\n-- b.conf --\n"))
	plain := helpers.NewArchive(t, ar)
	if got, _ := firstConf(plain.Fs(), plain.Root()); got != "a.conf" {
		t.Fatalf("without chaos: %q", got)
	}
	f := newFake(t, "TestOrder").run(func(t testing.TB) {
		env := helpers.NewArchive(t, ar, helpers.Chaos())
		if got, _ := firstConf(env.Fs(), env.Root()); got != "a.conf" {
			t.Errorf("firstConf = %q, want a.conf", got)
		}
	})
	f.wantErrors(t, "firstConf = \"b.conf\"")
	if !strings.Contains(f.Logs(), "helpers: chaos: directory listings shuffled with seed ") {
		t.Errorf("no seed in the logs:\n%s", f.Logs())
	}
}

var seedRE = regexp.MustCompile(`seed (\d+) \(reproduce with ` + helpers.EnvChaosSeed + `=(\d+)\)`)

func TestChaosSeedLoggedAndReplayed(t *testing.T) {
	noTapes(t)
	run := func(opts ...helpers.Option) (order []string, seed uint64) {
		f := newFake(t, "TestSeed").run(func(tb testing.TB) {
			env := helpers.NewArchive(tb, wide(), opts...)
			order = listNames(tb, env.Fs(), env.Root())
		})
		m := seedRE.FindStringSubmatch(f.Logs())
		if m == nil || m[1] != m[2] {
			t.Fatalf("no seed in the logs:\n%s", f.Logs())
		}
		seed, _ = strconv.ParseUint(m[1], 10, 64)
		return order, seed
	}
	t.Setenv(helpers.EnvChaosSeed, "")
	order, seed := run(helpers.Chaos())
	replay, seed2 := run(helpers.ChaosSeed(seed))
	if seed2 != seed || !slices.Equal(order, replay) {
		t.Errorf("ChaosSeed(%d) gave %q, the logged run %q", seed, replay, order)
	}
	t.Setenv(helpers.EnvChaosSeed, strconv.FormatUint(seed, 10))
	fromEnv, seed3 := run(helpers.Chaos())
	if seed3 != seed || !slices.Equal(order, fromEnv) {
		t.Errorf("%s=%d gave %q (seed %d), the logged run %q", helpers.EnvChaosSeed, seed, fromEnv, seed3, order)
	}
}

// pages reads a directory handle to its end with calls of n entries,
// describing each call's result as "count/error".
func pages[T any](read func(int) ([]T, error), n int) (trace []string, all int) {
	for range 100 {
		got, err := read(n)
		trace = append(trace, fmt.Sprintf("%d/%v", len(got), err))
		all += len(got)
		if err != nil || n <= 0 {
			break
		}
	}
	got, err := read(n) // once more, past the end
	trace = append(trace, fmt.Sprintf("%d/%v", len(got), err))
	return trace, all
}

type lister interface {
	Readdir(int) ([]fs.FileInfo, error)
	Readdirnames(int) ([]string, error)
	ReadDir(int) ([]fs.DirEntry, error)
}

// TestChaosPagingLikeOS compares the paging of the shuffled listings with
// os on the same directory: page sizes, io.EOF, the shared position of
// the three calls, and Seek back to the start.
func TestChaosPagingLikeOS(t *testing.T) {
	noTapes(t)
	env := helpers.NewArchive(t, wide(), helpers.ChaosSeed(1))
	total := len(osNames(t, env.Root()))
	open := func(t *testing.T) (osf, cf lister) {
		o, err := os.Open(env.Root())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Close() })
		c, err := env.Fs().Open(env.Root())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cl, ok := c.(lister)
		if !ok {
			t.Fatalf("%T has no ReadDir", c)
		}
		return o, cl
	}
	for _, n := range []int{-1, 0, 1, 3, 7, 22, 23, 50} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			o, c := open(t)
			wo, ao := pages(o.Readdir, n)
			wc, ac := pages(c.Readdir, n)
			if !slices.Equal(wo, wc) || ao != total || ac != total {
				t.Errorf("Readdir(%d): os %q (%d), chaos %q (%d)", n, wo, ao, wc, ac)
			}
			o, c = open(t)
			wo, _ = pages(o.Readdirnames, n)
			wc, _ = pages(c.Readdirnames, n)
			if !slices.Equal(wo, wc) {
				t.Errorf("Readdirnames(%d): os %q, chaos %q", n, wo, wc)
			}
			o, c = open(t)
			wo, _ = pages(o.ReadDir, n)
			wc, _ = pages(c.ReadDir, n)
			if !slices.Equal(wo, wc) {
				t.Errorf("ReadDir(%d): os %q, chaos %q", n, wo, wc)
			}
		})
	}
	t.Run("shared position", func(t *testing.T) {
		o, c := open(t)
		for _, side := range []struct {
			name string
			l    lister
		}{{"os", o}, {"chaos", c}} {
			a, err := side.l.Readdirnames(5)
			if err != nil {
				t.Fatal(err)
			}
			b, err := side.l.ReadDir(-1)
			if err != nil {
				t.Fatal(err)
			}
			seen := slices.Clone(a)
			for _, d := range b {
				seen = append(seen, d.Name())
				fi, err := os.Lstat(filepath.Join(env.Root(), d.Name()))
				if err != nil || fi.Mode().Type() != d.Type() {
					t.Errorf("%s: %s has type %v, os says %v (%v)", side.name, d.Name(), d.Type(), fi.Mode().Type(), err)
				}
			}
			slices.Sort(seen)
			if len(a) != 5 || !slices.Equal(seen, osNames(t, env.Root())) {
				t.Errorf("%s: Readdirnames(5) then ReadDir(-1) saw %q", side.name, seen)
			}
			if _, err := side.l.(io.Seeker).Seek(0, io.SeekStart); err != nil {
				t.Fatalf("%s: Seek: %v", side.name, err)
			}
			again, err := side.l.Readdirnames(-1)
			if err != nil || len(again) != total {
				t.Errorf("%s: after Seek(0, 0): %d names, %v; want %d", side.name, len(again), err, total)
			}
		}
	})
	t.Run("not a directory", func(t *testing.T) {
		o, err := os.Open(filepath.Join(env.Root(), "f01"))
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		c, err := env.Fs().Open(env.Path("f01"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, oerr := o.Readdirnames(-1)
		_, cerr := c.Readdirnames(-1)
		if oerr == nil || tape.ErrorOutcome(oerr) != tape.ErrorOutcome(cerr) {
			t.Errorf("Readdirnames of a file: os %v, chaos %v", oerr, cerr)
		}
	})
}

func TestChaosKeepsFsInterfaces(t *testing.T) {
	noTapes(t)
	env := helpers.NewArchive(t, wide(), helpers.ChaosSeed(1))
	fsys := env.Fs()
	if err := fsys.(afero.Linker).SymlinkIfPossible("f01", env.Path("newlink")); err != nil {
		t.Fatal(err)
	}
	target, err := fsys.(afero.LinkReader).ReadlinkIfPossible(env.Path("newlink"))
	if err != nil || target != "f01" {
		t.Errorf("readlink: %q, %v", target, err)
	}
	fi, lstat, err := fsys.(afero.Lstater).LstatIfPossible(env.Path("link"))
	if err != nil || !lstat || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("lstat of a symlink: %v, %v, %v", fi, lstat, err)
	}
	if err := afero.WriteFile(fsys, env.Path("sub/x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	env.Changed("A newlink", "A sub/x")
	if _, err := fsys.Open(env.Path("missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open of a missing file: %v", err)
	}
}

// TestChaosBelowTape: the tape records the overlay's listing, so a run
// with chaos and one without make the same tape.
func TestChaosBelowTape(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(tape.EnvDir, dir)
	run := func(name string, opts ...helpers.Option) *tape.Tape {
		var file string
		newFake(t, name).run(func(tb testing.TB) {
			env := helpers.NewArchive(tb, wide(), opts...)
			file = env.TapeFile()
			for _, n := range listNames(tb, env.Fs(), env.Root()) {
				afero.ReadFile(env.Fs(), env.Path(n))
			}
			// Names first, then FileInfos, on one handle.
			f, err := env.Fs().Open(env.Root())
			if err != nil {
				tb.Fatal(err)
			}
			defer f.Close()
			f.Readdirnames(3)
			if rest, err := f.Readdir(-1); err != nil || len(rest) != 19 {
				tb.Errorf("Readdir after Readdirnames(3): %d, %v", len(rest), err)
			}
		}).wantClean(t)
		return readTape(t, file)
	}
	plain, chaotic := run("TestPlain"), run("TestChaotic", helpers.ChaosSeed(5))
	// Files are read in listing order: only the interleaving may differ.
	if class, d := tape.Classify(plain, chaotic); class == tape.Data {
		t.Errorf("chaos changed what the tape records:\n%s", d)
	}
	if d := tape.Compare(plain, chaotic, tape.ModeGlobal); d == nil {
		t.Errorf("the files were read in the same order with chaos")
	}
}
