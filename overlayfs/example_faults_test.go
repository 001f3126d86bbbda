package overlayfs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// A layer of 8 KiB and 3 new entries: a write past it is short and fails
// with ENOSPC, as on a full tmpfs; so does a create past the inodes.
func ExampleWithQuota() {
	root, _ := os.MkdirTemp("", "quota")
	defer os.RemoveAll(root)
	f, _ := overlayfs.New(root, overlayfs.WithQuota(8192, 3))

	h, _ := f.Create(filepath.Join(root, "big"))
	n, err := h.Write(make([]byte, 10000))
	h.Close()
	fmt.Println(n, errors.Is(err, syscall.ENOSPC))

	f.Mkdir(filepath.Join(root, "d"), 0o755)
	f.Mkdir(filepath.Join(root, "e"), 0o755)
	err = f.Mkdir(filepath.Join(root, "f"), 0o755)
	fmt.Println(errors.Is(err, syscall.ENOSPC))
	fmt.Printf("%+v\n", f.Usage())

	f.Remove(filepath.Join(root, "big"))
	fmt.Printf("%+v\n", f.Usage())
	// Output:
	// 8192 true
	// true
	// {Bytes:8192 Inodes:3}
	// {Bytes:0 Inodes:2}
}

// An fsync that fails with EIO, in os's shape, and a write cut short.
func ExampleWithFaults() {
	root, _ := os.MkdirTemp("", "faults")
	defer os.RemoveAll(root)
	f, _ := overlayfs.New(root, overlayfs.WithFaults(func(op, name string) error {
		switch {
		case op == "sync":
			return syscall.EIO
		case op == "write" && filepath.Base(name) == "short":
			return overlayfs.ShortIO{N: 3, Err: syscall.ENOSPC}
		}
		return nil
	}))

	h, _ := f.Create(filepath.Join(root, "data"))
	err := h.Sync()
	var pe *os.PathError
	fmt.Println(errors.As(err, &pe), pe.Op, errors.Is(err, syscall.EIO))
	h.Close()

	h, _ = f.Create(filepath.Join(root, "short"))
	n, err := h.Write([]byte("hello"))
	h.Close()
	content, _ := afero.ReadFile(f, filepath.Join(root, "short"))
	fmt.Println(n, errors.Is(err, syscall.ENOSPC), string(content))
	// Output:
	// true sync true
	// 3 true hel
}

// Snapshot and Restore bring the count back; a Fork counts on its own.
func ExampleFs_Usage() {
	root, _ := os.MkdirTemp("", "usage")
	defer os.RemoveAll(root)
	f, _ := overlayfs.New(root, overlayfs.WithQuota(0, 0)) // count, no limit
	s := f.Snapshot()
	afero.WriteFile(f, filepath.Join(root, "a"), make([]byte, 5000), 0o644)
	fork := f.Fork()
	afero.WriteFile(fork, filepath.Join(root, "b"), []byte("b"), 0o644)
	fmt.Printf("%+v %+v\n", f.Usage(), fork.Usage())
	f.Restore(s)
	fmt.Printf("%+v\n", f.Usage())
	// Output:
	// {Bytes:8192 Inodes:1} {Bytes:12288 Inodes:2}
	// {Bytes:0 Inodes:0}
}

func ExampleFs_Quota() {
	root, _ := os.MkdirTemp("", "quota")
	defer os.RemoveAll(root)
	f, _ := overlayfs.New(root, overlayfs.WithQuota(10000, 50))
	fmt.Println(f.Quota()) // bytes rounded up to pages, as tmpfs rounds size=
	// Output:
	// 12288 50 true
}

// A read that moves 2 bytes, then fails.
func ExampleShortIO() {
	root, _ := os.MkdirTemp("", "short")
	defer os.RemoveAll(root)
	os.WriteFile(filepath.Join(root, "f"), []byte("hello"), 0o644)
	f, _ := overlayfs.New(root, overlayfs.WithFaults(func(op, name string) error {
		if op == "read" {
			return overlayfs.ShortIO{N: 2, Err: syscall.EIO}
		}
		return nil
	}))
	h, _ := f.Open(filepath.Join(root, "f"))
	defer h.Close()
	buf := make([]byte, 5)
	n, err := h.Read(buf)
	fmt.Println(n, string(buf[:n]), errors.Is(err, syscall.EIO))
	// Output:
	// 2 he true
}
