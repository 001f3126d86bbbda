package overlayfs_test

// Peers in one file so one run gives the ratios (issue 2, "Speed"):
//
//	go test -run '^$' -bench . -benchmem -count 6 ./overlayfs/ | tee new.txt
//	benchstat -col /impl new.txt   (or compare the sub-benchmarks by eye)

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"

	"github.com/spf13/afero"
)

const size4K = 4096

// peers are the file systems every benchmark compares, by sub-benchmark name.
type peer struct {
	name string
	fs   afero.Fs
}

// benchRoot makes a root with a 4 KiB file and a 500-entry directory, and
// the same content in a MemMapFs under the same names.
func benchRoot(b *testing.B) (root string, mem afero.Fs) {
	b.Helper()
	root = b.TempDir()
	mem = afero.NewMemMapFs()
	data := bytes.Repeat([]byte("0123456789abcdef"), size4K/16)
	put := func(name string, data []byte) {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		if err := afero.WriteFile(mem, p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	put("file4k", data)
	for _, d := range []string{"big", "new"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := mem.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 500; i++ {
		put(fmt.Sprintf("big/lower-%04d", i), []byte("x"))
	}
	return root, mem
}

func aferoCoW() afero.Fs {
	return afero.NewCopyOnWriteFs(afero.NewReadOnlyFs(afero.NewOsFs()), afero.NewMemMapFs())
}

func readPeers(b *testing.B, root string, mem afero.Fs) []peer {
	return []peer{
		{"cowfs", newCow(b, root)},
		{"OsFs", afero.NewOsFs()},
		{"MemMapFs", mem},
		{"CopyOnWriteFs", aferoCoW()},
	}
}

func BenchmarkReadFile4K(b *testing.B) {
	root, mem := benchRoot(b)
	name := filepath.Join(root, "file4k")
	b.Run("os", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(size4K)
		for b.Loop() {
			if _, err := os.ReadFile(name); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, p := range readPeers(b, root, mem) {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(size4K)
			for b.Loop() {
				data, err := afero.ReadFile(p.fs, name)
				if err != nil || len(data) != size4K {
					b.Fatal(len(data), err)
				}
			}
		})
	}
}

func BenchmarkStat(b *testing.B) {
	root, mem := benchRoot(b)
	name := filepath.Join(root, "file4k")
	b.Run("os", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := os.Stat(name); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, p := range readPeers(b, root, mem) {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.fs.Stat(name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWriteFile4K writes a new 4 KiB file per iteration; the layer is
// dropped every 4096 files, outside the timer, so memory stays bounded.
func BenchmarkWriteFile4K(b *testing.B) {
	root, _ := benchRoot(b)
	data := bytes.Repeat([]byte{'w'}, size4K)
	names := make([]string, 4096)
	for i := range names {
		names[i] = filepath.Join(root, "new", fmt.Sprintf("f%04d", i))
	}
	c := newCow(b, root)
	for _, p := range []struct {
		name  string
		fresh func() afero.Fs
	}{
		{"cowfs", func() afero.Fs { c.Reset(); return c }},
		{"MemMapFs", func() afero.Fs {
			m := afero.NewMemMapFs()
			m.MkdirAll(filepath.Join(root, "new"), 0o755)
			return m
		}},
		{"CopyOnWriteFs", aferoCoW},
	} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(size4K)
			fsys := p.fresh()
			i := 0
			for b.Loop() {
				if i == len(names) {
					b.StopTimer()
					fsys, i = p.fresh(), 0
					b.StartTimer()
				}
				if err := afero.WriteFile(fsys, names[i], data, 0o644); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkFirstWrite4K: open a 4 KiB lower file for writing, change 4 bytes,
// close, on a fresh layer every time: the copy-up.
func BenchmarkFirstWrite4K(b *testing.B) {
	root, _ := benchRoot(b)
	name := filepath.Join(root, "file4k")
	c := newCow(b, root)
	for _, p := range []struct {
		name  string
		fresh func() afero.Fs
	}{
		{"cowfs", func() afero.Fs { c.Reset(); return c }},
		{"CopyOnWriteFs", aferoCoW},
	} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(size4K)
			for b.Loop() {
				fsys := p.fresh()
				f, err := fsys.OpenFile(name, os.O_WRONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.WriteAt([]byte("EDIT"), 100); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReaddir1000: Readdir(-1) of a directory with 500 lower entries
// and 500 layer entries (for os: 1000 entries on disk).
func BenchmarkReaddir1000(b *testing.B) {
	root, _ := benchRoot(b)
	dir := filepath.Join(root, "big")
	osDir := b.TempDir()
	for i := 0; i < 1000; i++ {
		if err := os.WriteFile(filepath.Join(osDir, fmt.Sprintf("e%04d", i)), []byte("x"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	c := newCow(b, root)
	cow := aferoCoW()
	for i := 0; i < 500; i++ {
		for _, fsys := range []afero.Fs{c, cow} {
			if err := afero.WriteFile(fsys, filepath.Join(dir, fmt.Sprintf("layer-%04d", i)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	readdir := func(b *testing.B, fsys afero.Fs, dir string, sorted bool) {
		b.ReportAllocs()
		for b.Loop() {
			f, err := fsys.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			fis, err := f.Readdir(-1)
			f.Close()
			if err != nil || len(fis) != 1000 {
				b.Fatal(len(fis), err)
			}
			if sorted {
				sort.Slice(fis, func(i, j int) bool { return fis[i].Name() < fis[j].Name() })
			}
		}
	}
	b.Run("os", func(b *testing.B) { readdir(b, afero.NewOsFs(), osDir, false) })
	b.Run("os+sort", func(b *testing.B) { readdir(b, afero.NewOsFs(), osDir, true) })
	b.Run("cowfs", func(b *testing.B) { readdir(b, c, dir, false) })
	b.Run("CopyOnWriteFs", func(b *testing.B) { readdir(b, cow, dir, false) })
}

// BenchmarkLayerEntryBytes reports the heap held per layer entry: empty
// files, 4 KiB files' overhead beyond their bytes, directories, and
// whiteouts of lower files.
func BenchmarkLayerEntryBytes(b *testing.B) {
	root, _ := benchRoot(b)
	const n = 2000
	kinds := []struct {
		name    string
		payload int
		make    func(fsys afero.Fs, i int) error
	}{
		{"empty-file", 0, func(fsys afero.Fs, i int) error {
			return afero.WriteFile(fsys, filepath.Join(root, "new", fmt.Sprintf("f%05d", i)), nil, 0o644)
		}},
		{"file-4K-overhead", size4K, func(fsys afero.Fs, i int) error {
			return afero.WriteFile(fsys, filepath.Join(root, "new", fmt.Sprintf("f%05d", i)), make([]byte, size4K), 0o644)
		}},
		{"dir", 0, func(fsys afero.Fs, i int) error {
			return fsys.Mkdir(filepath.Join(root, "new", fmt.Sprintf("d%05d", i)), 0o755)
		}},
		{"whiteout", 0, func(fsys afero.Fs, i int) error {
			if i >= 500 {
				return nil
			}
			return fsys.Remove(filepath.Join(root, "big", fmt.Sprintf("lower-%04d", i)))
		}},
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			count := n
			if k.name == "whiteout" {
				count = 500
			}
			var perEntry float64
			for b.Loop() {
				c := newCow(b, root)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := 0; i < count; i++ {
					if err := k.make(c, i); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perEntry = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(count)
				runtime.KeepAlive(c)
			}
			b.ReportMetric(perEntry-float64(k.payload), "B/entry")
		})
	}
}
