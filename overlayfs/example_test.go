package overlayfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// exampleRoot makes a small real tree for the examples.
func exampleRoot() string {
	root, err := os.MkdirTemp("", "cowfs-example-")
	if err != nil {
		panic(err)
	}
	os.MkdirAll(filepath.Join(root, "docs"), 0o755)
	os.WriteFile(filepath.Join(root, "config.yaml"), []byte("port: 8080\n"), 0o644)
	os.WriteFile(filepath.Join(root, "docs", "old.md"), []byte("old\n"), 0o644)
	return root
}

func ExampleNew() {
	root := exampleRoot()
	defer os.RemoveAll(root)

	f, err := overlayfs.New(root)
	if err != nil {
		panic(err)
	}
	// The code under test writes through f with its usual paths.
	afero.WriteFile(f, filepath.Join(root, "config.yaml"), []byte("port: 9090\n"), 0o644)
	afero.WriteFile(f, filepath.Join(root, "new.txt"), []byte("hello\n"), 0o644)
	f.RemoveAll(filepath.Join(root, "docs"))

	for _, c := range f.Changes() {
		fmt.Println(c)
	}
	// The real tree is untouched.
	data, _ := os.ReadFile(filepath.Join(root, "config.yaml"))
	fmt.Printf("on disk: %s", data)
	// Output:
	// M config.yaml
	// D docs
	// D docs/old.md
	// A new.txt
	// on disk: port: 8080
}

func ExampleFs_WriteDiff() {
	root := exampleRoot()
	defer os.RemoveAll(root)

	f, _ := overlayfs.New(root)
	afero.WriteFile(f, filepath.Join(root, "config.yaml"), []byte("port: 9090\n"), 0o644)
	f.Rename(filepath.Join(root, "docs", "old.md"), filepath.Join(root, "docs", "new.md"))

	f.WriteDiff(os.Stdout)
	// Output:
	// diff --git a/config.yaml b/config.yaml
	// index 29b7b59..bcfa6e3 100644
	// --- a/config.yaml
	// +++ b/config.yaml
	// @@ -1 +1 @@
	// -port: 8080
	// +port: 9090
	// diff --git a/docs/old.md b/docs/new.md
	// similarity index 100%
	// rename from docs/old.md
	// rename to docs/new.md
}

func ExampleFs_IOFS() {
	root := exampleRoot()
	defer os.RemoveAll(root)

	f, _ := overlayfs.New(root)
	afero.WriteFile(f, filepath.Join(root, "docs", "guide.md"), []byte("guide\n"), 0o644)

	fsys := f.IOFS()
	fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		fmt.Println(name)
		return err
	})
	// Output:
	// .
	// config.yaml
	// docs
	// docs/guide.md
	// docs/old.md
}

func ExampleErrOutsideRoot() {
	root := exampleRoot()
	defer os.RemoveAll(root)

	f, _ := overlayfs.New(root)
	err := afero.WriteFile(f, filepath.Join(root, "..", "escape.txt"), []byte("x"), 0o644)
	fmt.Println(errors.Is(err, overlayfs.ErrOutsideRoot), errors.Is(err, fs.ErrPermission))
	// Output:
	// true true
}

func ExampleFs_Snapshot() {
	root := exampleRoot()
	defer os.RemoveAll(root)

	f, _ := overlayfs.New(root)
	s := f.Snapshot()
	afero.WriteFile(f, filepath.Join(root, "try.txt"), []byte("an attempt\n"), 0o644)
	fmt.Println(len(f.Changes()), "change")
	f.Restore(s)
	fmt.Println(len(f.Changes()), "changes")
	// Output:
	// 1 change
	// 0 changes
}
