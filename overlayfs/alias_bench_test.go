package overlayfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/overlayfs"
)

// BenchmarkOutside measures the outside path (a t.TempDir() beside the
// root, the usual target of outside reads and writes), where the resolver
// walks the name on the real file system and tells aliases of the root
// (alias.go); os on the same names is the peer.
func BenchmarkOutside(b *testing.B) {
	root, out := b.TempDir(), b.TempDir()
	name := filepath.Join(out, "f.txt")
	data := make([]byte, 4096)
	if err := os.WriteFile(name, data, 0o644); err != nil {
		b.Fatal(err)
	}
	c, err := overlayfs.New(root, overlayfs.AllowOutsideWrites())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Stat/cowfs", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Stat(name); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Stat/os", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.Stat(name); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WriteFile4K/cowfs", func(b *testing.B) {
		for b.Loop() {
			if err := afero.WriteFile(c, name, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WriteFile4K/os", func(b *testing.B) {
		for b.Loop() {
			if err := os.WriteFile(name, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
}
