package overlayfs_test

// BenchmarkCommit measures Commit of a layer against its peers in the same
// run, writing the same files with os: a plain os.WriteFile loop, and the
// same loop with an fsync per file and per directory (what a durable writer
// pays). Two layers: new files in new directories (shape=new), and
// rewrites of existing files (shape=rewrite). One run gives the ratios:
//
//	go test -run '^$' -bench BenchmarkCommit -benchtime 20x -count 6 ./overlayfs >commit.txt
//	go tool -modfile=tools/go.mod benchstat -col /op commit.txt

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// commitBenchFiles is the layer committed: this many 1 KiB files in
// directories of 50.
const commitBenchFiles = 500

func commitBenchName(root string, i int) string {
	return filepath.Join(root, fmt.Sprintf("d%02d", i/50), fmt.Sprintf("f%03d", i))
}

func BenchmarkCommit(b *testing.B) {
	data := make([]byte, 1024)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	for _, shape := range []string{"new", "rewrite"} {
		for _, op := range []string{"Commit", "os.WriteFile", "os.WriteFile+fsync"} {
			b.Run("shape="+shape+"/op="+op, func(b *testing.B) { benchCommit(b, shape, op, data) })
		}
	}
}

func benchCommit(b *testing.B, shape, op string, data []byte) {
	{
		{
			scratch := b.TempDir()
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				root := filepath.Join(scratch, fmt.Sprint(n))
				n++
				if err := os.Mkdir(root, 0o755); err != nil {
					b.Fatal(err)
				}
				if shape == "rewrite" {
					for i := range commitBenchFiles {
						name := commitBenchName(root, i)
						if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
							b.Fatal(err)
						}
						if err := os.WriteFile(name, []byte("old\n"), 0o644); err != nil {
							b.Fatal(err)
						}
					}
				}
				var c *overlayfs.Fs
				if op == "Commit" {
					var err error
					if c, err = overlayfs.New(root); err != nil {
						b.Fatal(err)
					}
					for i := range commitBenchFiles {
						name := commitBenchName(root, i)
						if err := c.MkdirAll(filepath.Dir(name), 0o755); err != nil {
							b.Fatal(err)
						}
						if err := writeBenchFile(c.OpenFile, name, data, false); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StartTimer()
				switch op {
				case "Commit":
					if err := c.Commit(); err != nil {
						b.Fatal(err)
					}
				default:
					sync := op == "os.WriteFile+fsync"
					for i := range commitBenchFiles {
						name := commitBenchName(root, i)
						if i%50 == 0 {
							if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
								b.Fatal(err)
							}
						}
						if err := writeBenchFile(osOpenFile, name, data, sync); err != nil {
							b.Fatal(err)
						}
						if sync && i%50 == 49 {
							if err := syncBenchDir(filepath.Dir(name)); err != nil {
								b.Fatal(err)
							}
						}
					}
					if sync {
						if err := syncBenchDir(root); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		}
	}
}

type benchFile interface {
	Write([]byte) (int, error)
	Sync() error
	Close() error
}

func osOpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

// writeBenchFile is os.WriteFile through open, optionally with an fsync.
func writeBenchFile[F benchFile](open func(string, int, os.FileMode) (F, error), name string, data []byte, sync bool) error {
	fh, err := open(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = fh.Write(data)
	if err == nil && sync {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncBenchDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
