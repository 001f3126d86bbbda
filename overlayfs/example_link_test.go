//go:build linux

package overlayfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/overlayfs"
)

func ExampleFs_Link() {
	root := exampleRoot()
	defer os.RemoveAll(root)

	f, _ := overlayfs.New(root)
	config := filepath.Join(root, "config.yaml")
	backup := filepath.Join(root, "config.yaml.bak")
	if err := f.Link(config, backup); err != nil {
		panic(err)
	}
	// One file, two names: a write through one shows through the other.
	afero.WriteFile(f, config, []byte("port: 9090\n"), 0o644)
	data, _ := afero.ReadFile(f, backup)
	fi, _ := f.Stat(backup)
	fmt.Printf("%s: %slinks: %d\n", filepath.Base(backup), data, fi.Sys().(*syscall.Stat_t).Nlink)
	for _, c := range f.Changes() {
		fmt.Println(c, "linked to", c.LinkTo)
	}
	// Commit makes a real hard link.
	if err := f.Commit(); err != nil {
		panic(err)
	}
	a, _ := os.Stat(config)
	b, _ := os.Stat(backup)
	fmt.Println("same file on disk:", os.SameFile(a, b))
	// Output:
	// config.yaml.bak: port: 9090
	// links: 2
	// M config.yaml linked to config.yaml.bak
	// A config.yaml.bak linked to config.yaml
	// same file on disk: true
}
