package helpers_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/overlayfs"
	"github.com/cowfs/cowfs/tape"
)

// bigDir is a fixture whose root holds n empty files.
func bigDir(n int) *txtar.Archive {
	ar := &txtar.Archive{}
	for i := range n {
		ar.Files = append(ar.Files, txtar.File{Name: fmt.Sprintf("file%05d", i)})
	}
	return ar
}

// BenchmarkList lists a directory of 1000 files with Readdirnames(-1):
// os and afero.OsFs on the real directory, then the Env's file system
// plain, shuffled by Chaos, recorded on a tape, and both.
func BenchmarkList(b *testing.B) {
	b.Setenv(helpers.EnvChaosSeed, "")
	root := b.TempDir()
	if err := helpers.Extract(bigDir(1000), root); err != nil {
		b.Fatal(err)
	}
	list := func(b *testing.B, fsys afero.Fs) {
		b.ReportAllocs()
		for b.Loop() {
			f, err := fsys.Open(root)
			if err != nil {
				b.Fatal(err)
			}
			names, err := f.Readdirnames(-1)
			f.Close()
			if err != nil || len(names) != 1000 {
				b.Fatal(len(names), err)
			}
		}
	}
	b.Run("os", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, err := os.Open(root)
			if err != nil {
				b.Fatal(err)
			}
			names, err := f.Readdirnames(-1)
			f.Close()
			if err != nil || len(names) != 1000 {
				b.Fatal(len(names), err)
			}
		}
	})
	b.Run("OsFs", func(b *testing.B) { list(b, afero.NewOsFs()) })
	for _, tc := range []struct {
		name  string
		tapes bool
		opts  []helpers.Option
	}{
		{"Env", false, nil},
		{"Env+chaos", false, []helpers.Option{helpers.ChaosSeed(1)}},
		{"Env+tape", true, nil},
		{"Env+tape+chaos", true, []helpers.Option{helpers.ChaosSeed(1)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dir := ""
			if tc.tapes {
				dir = b.TempDir()
			}
			b.Setenv(tape.EnvDir, dir)
			env := helpers.New(b, root, tc.opts...)
			list(b, env.Fs())
		})
	}
}

// BenchmarkNew measures setting an Env up and tearing it down (its
// cleanup) over a directory of 20 files, next to overlayfs.New alone, and
// the same with a tape file per Env and with the fixture extracted from
// txtar each time.
func BenchmarkNew(b *testing.B) {
	root := b.TempDir()
	ar := bigDir(20)
	if err := helpers.Extract(ar, root); err != nil {
		b.Fatal(err)
	}
	b.Run("overlayfs.New", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := overlayfs.New(root); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("New", func(b *testing.B) {
		b.Setenv(tape.EnvDir, "")
		b.ReportAllocs()
		for b.Loop() {
			newFake(b, "BenchmarkNew").run(func(t testing.TB) { helpers.New(t, root) })
		}
	})
	b.Run("New+tape", func(b *testing.B) {
		dir := b.TempDir()
		b.Setenv(tape.EnvDir, dir)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			newFake(b, fmt.Sprint("BenchmarkNew/", i)).run(func(t testing.TB) { helpers.New(t, root) })
		}
		if n, _ := filepath.Glob(filepath.Join(dir, "*.tape")); len(n) != i {
			b.Fatalf("%d tapes for %d Envs", len(n), i)
		}
	})
	b.Run("NewArchive", func(b *testing.B) {
		b.Setenv(tape.EnvDir, "")
		b.ReportAllocs()
		for b.Loop() {
			newFake(nil, "BenchmarkNew").run(func(t testing.TB) { helpers.NewArchive(t, ar) })
		}
	})
}
