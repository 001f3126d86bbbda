//go:build !linux

package kernel

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

func TestUnsupportedElsewhere(t *testing.T) {
	f, err := overlayfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, mountErr := Mount(ctx, "l", "u", "w", "t", Options{})
	_, cleanupErr := Cleanup("")
	for name, err := range map[string]error{
		"Materialize":   Materialize(f, t.TempDir(), Options{}),
		"Import":        Import(t.TempDir(), f, Options{}),
		"Mount":         mountErr,
		"Cleanup":       cleanupErr,
		"Run":           Run(ctx, f, exec.Command("true")),
		"WriteOCILayer": WriteOCILayer(f, &bytes.Buffer{}),
		"ReadOCILayer":  ReadOCILayer(&bytes.Buffer{}, f),
	} {
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
}
