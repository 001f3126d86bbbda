//go:build !linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"

	"github.com/cowfs/cowfs/overlayfs"
)

var errPlatform = fmt.Errorf("kernel: overlayfs upper dirs need Linux, not %s: %w", runtime.GOOS, errors.ErrUnsupported)

// MountPoint is a mounted overlay. On this platform it cannot be created.
type MountPoint struct{}

// Materialize returns an error wrapping [errors.ErrUnsupported].
func Materialize(f *overlayfs.Fs, upper string, opts Options) error { return errPlatform }

// Import returns an error wrapping [errors.ErrUnsupported].
func Import(upper string, f *overlayfs.Fs, opts Options) error { return errPlatform }

// Mount returns an error wrapping [errors.ErrUnsupported].
func Mount(ctx context.Context, lower, upper, work, target string, opts Options) (*MountPoint, error) {
	return nil, errPlatform
}

// Unmount returns an error wrapping [errors.ErrUnsupported].
func (m *MountPoint) Unmount() error { return errPlatform }

// Run returns an error wrapping [errors.ErrUnsupported].
func Run(ctx context.Context, f *overlayfs.Fs, cmd *exec.Cmd, opts ...RunOption) error {
	return errPlatform
}

// Cleanup returns an error wrapping [errors.ErrUnsupported].
func Cleanup(dir string) (removed []string, err error) { return nil, errPlatform }

// WriteOCILayer returns an error wrapping [errors.ErrUnsupported].
func WriteOCILayer(f *overlayfs.Fs, w io.Writer) error { return errPlatform }

// ReadOCILayer returns an error wrapping [errors.ErrUnsupported].
func ReadOCILayer(r io.Reader, f *overlayfs.Fs) error { return errPlatform }

// Target is the mount point.
func (m *MountPoint) Target() string { return "" }
