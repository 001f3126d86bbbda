//go:build !linux || !(amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x)

package overlayfs

import (
	"io/fs"
	"os"
)

// lstatHost is os.Lstat of a host path.
func lstatHost(host string) (fs.FileInfo, error) { return os.Lstat(host) }

// lstatNamed is os.Lstat of a host path whose base is name.
func lstatNamed(host, _ string) (fs.FileInfo, error) { return os.Lstat(host) }

// openLower is os.OpenFile(host, flag, 0).
func openLower(host string, flag int) (*os.File, error) { return os.OpenFile(host, flag, 0) }
