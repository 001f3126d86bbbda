package overlayfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

func ExampleFs_DirTimes() {
	root := exampleRoot()
	defer os.RemoveAll(root)
	f, err := overlayfs.New(root)
	if err != nil {
		panic(err)
	}
	// A file made and removed again leaves no layer entry, but the
	// directory's time moved, as on Linux.
	afero.WriteFile(f, filepath.Join(root, "docs", "tmp"), nil, 0o644)
	f.Remove(filepath.Join(root, "docs", "tmp"))
	fi, _ := f.Stat(filepath.Join(root, "docs"))
	for rel, t := range f.DirTimes() {
		fmt.Println(rel, t.Equal(fi.ModTime()))
	}
	fmt.Println("layer entries:", len(f.Layer()), "changes:", len(f.Changes()))
	// Output:
	// docs true
	// layer entries: 0 changes: 0
}

func ExampleFs_PutDirTime() {
	root := exampleRoot()
	defer os.RemoveAll(root)
	f, err := overlayfs.New(root)
	if err != nil {
		panic(err)
	}
	// An upper the kernel wrote in says when docs last changed.
	t := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := f.PutDirTime("docs", t); err != nil {
		panic(err)
	}
	fi, _ := f.Stat(filepath.Join(root, "docs"))
	fmt.Println(fi.ModTime().UTC(), len(f.Layer()))
	fmt.Println(f.PutDirTime("config.yaml", t))
	// Output:
	// 2024-05-06 07:08:09 +0000 UTC 0
	// putdirtime config.yaml: not a directory
}
