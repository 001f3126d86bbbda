package overlayfs_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/spf13/afero"
)

// TestRaceCloseDuringUse: goroutines use one handle on a layer file (write,
// read, seek, stat, truncate) while another closes it and another unlinks
// the file. As on an *os.File (run the same way beside it), the only errors
// are "file already closed", Close succeeds once, and with -race nothing
// races: a handle's state is guarded by the layer's lock alone.
func TestRaceCloseDuringUse(t *testing.T) {
	root := t.TempDir()
	c := newCow(t, root)
	osDir := t.TempDir()
	for trial := range 100 {
		for _, side := range []struct {
			name string
			fsys afero.Fs
			path string
		}{
			{"cowfs", c, filepath.Join(root, "f")},
			{"os", afero.NewOsFs(), filepath.Join(osDir, "f")},
		} {
			if err := afero.WriteFile(side.fsys, side.path, []byte("0123456789"), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := side.fsys.OpenFile(side.path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			use := []func() error{
				func() error { _, err := f.Write([]byte("abc")); return err },
				func() error { _, err := f.ReadAt(make([]byte, 4), 1); return ignoreEOF(err) },
				func() error { _, err := f.Seek(2, io.SeekStart); return err },
				func() error { _, err := f.Stat(); return err },
				func() error { return f.Truncate(5) },
			}
			for _, op := range use {
				wg.Go(func() {
					for range 20 {
						if err := op(); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			closes := make(chan error, 2)
			wg.Go(func() { closes <- f.Close() })
			wg.Go(func() {
				if trial%2 == 0 {
					_ = side.fsys.Remove(side.path)
				}
			})
			wg.Wait()
			closes <- f.Close()
			close(errs)
			for err := range errs {
				if !errors.Is(err, os.ErrClosed) {
					t.Errorf("%s, trial %d: %v; want only ErrClosed", side.name, trial, err)
				}
			}
			if err := <-closes; err != nil {
				t.Errorf("%s, trial %d: first Close: %v", side.name, trial, err)
			}
			if err := <-closes; !errors.Is(err, os.ErrClosed) {
				t.Errorf("%s, trial %d: second Close: %v; want ErrClosed", side.name, trial, err)
			}
		}
	}
}

func ignoreEOF(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}
