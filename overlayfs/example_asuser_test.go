//go:build unix

package overlayfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/overlayfs"
)

func ExampleAsUser() {
	// A tree owned by this process: a file all may read, in a directory
	// only its owner may write.
	root, _ := os.MkdirTemp("", "asuser-")
	defer os.RemoveAll(root)
	os.Chmod(root, 0o755)
	notes := filepath.Join(root, "notes.txt")
	os.WriteFile(notes, []byte("hello\n"), 0o644)

	// Every operation checked as Linux checks it for nobody (65534),
	// whatever this process is, root in a CI container included.
	f, _ := overlayfs.New(root, overlayfs.AsUser(65534, 65534))
	data, err := afero.ReadFile(f, notes)
	fmt.Printf("read: %q %v\n", data, err)
	errno := func(err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	_, err = f.OpenFile(notes, os.O_WRONLY, 0)
	fmt.Println("open for writing:", errno(err))
	fmt.Println("create:", errno(afero.WriteFile(f, filepath.Join(root, "new.txt"), nil, 0o644)))
	fmt.Println("chmod:", errno(f.Chmod(notes, 0o666)))
	fmt.Println("remove:", errno(f.Remove(notes)))
	fmt.Println("changes:", len(f.Changes()))
	// Output:
	// read: "hello\n" <nil>
	// open for writing: permission denied
	// create: permission denied
	// chmod: operation not permitted
	// remove: permission denied
	// changes: 0
}
