package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

func main() {
	root, _ := os.MkdirTemp("", "sb")
	defer os.RemoveAll(root)
	name := filepath.Join(root, "file4k")
	os.WriteFile(name, make([]byte, 4096), 0o644)
	os.Mkdir(filepath.Join(root, "layer"), 0o755)
	c, _ := overlayfs.New(root)
	for i := range 100 {
		afero.WriteFile(c, filepath.Join(root, "layer", fmt.Sprintf("w%03d", i)), []byte("w"), 0o644)
	}
	const N = 200000
	var tc, to time.Duration
	for r := 0; r < 10; r++ {
		t0 := time.Now()
		for range N / 10 {
			c.Stat(name)
		}
		t1 := time.Now()
		for range N / 10 {
			os.Stat(name)
		}
		t2 := time.Now()
		for range N / 10 {
			os.Lstat(name)
		}
		t3 := time.Now()
		tc += t1.Sub(t0)
		to += t2.Sub(t1)
		_ = t3
	}
	fmt.Printf("cowfs %v os %v ratio %.3f\n", tc/N, to/N, float64(tc)/float64(to))
}
