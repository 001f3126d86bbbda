//go:build unix

package overlayfs_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// deadlineReader is what os.Open's handle on a FIFO does.
type deadlineReader interface {
	io.ReadCloser
	SetReadDeadline(time.Time) error
}

// TestLowerFIFOReadHandle: a lower FIFO opened for reading through the
// overlay behaves as os.Open's handle does: a read deadline ends a read
// with os.ErrDeadlineExceeded, and Close ends a read blocked in another
// goroutine with os.ErrClosed. The oracle is os on a FIFO beside it.
func TestLowerFIFOReadHandle(t *testing.T) {
	root := t.TempDir()
	c := newCow(t, root)
	open := map[string]func(string) (deadlineReader, error){
		"os": func(p string) (deadlineReader, error) {
			return os.Open(p)
		},
		"overlay": func(p string) (deadlineReader, error) {
			f, err := c.Open(p)
			if err != nil {
				return nil, err
			}
			d, ok := f.(deadlineReader)
			if !ok {
				f.Close()
				return nil, errors.New("the handle has no SetReadDeadline")
			}
			return d, nil
		},
	}
	for _, side := range []string{"os", "overlay"} {
		for _, end := range []string{"deadline", "close"} {
			p := filepath.Join(root, side+"-"+end)
			if err := unix.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			// A writer that opens and writes nothing, so the read blocks.
			wdone := make(chan *os.File, 1)
			go func() {
				w, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					t.Error(err)
				}
				wdone <- w
			}()
			var f deadlineReader
			watchdog(t, side+" open", func() {
				var err error
				if f, err = open[side](p); err != nil {
					t.Fatalf("%s: open: %v", side, err)
				}
			})
			w := <-wdone
			rerr := make(chan error, 1)
			if end == "deadline" {
				if err := f.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
					t.Errorf("%s: SetReadDeadline: %v", side, err)
				}
			}
			go func() {
				_, err := f.Read(make([]byte, 8))
				rerr <- err
			}()
			if end == "close" {
				time.Sleep(50 * time.Millisecond)
				f.Close()
			}
			want := map[string]error{"deadline": os.ErrDeadlineExceeded, "close": os.ErrClosed}[end]
			select {
			case err := <-rerr:
				if !errors.Is(err, want) {
					t.Errorf("%s, %s: Read = %v, want %v", side, end, err, want)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("%s, %s: Read still blocked after 5 s, want %v", side, end, want)
			}
			w.Close() // ends a read still blocked
			f.Close()
		}
	}
}

// TestLowerCharDeviceReadHandle: character devices of the lower open for
// reading as with os: a read deadline where os takes one (the poller
// refuses /dev/zero: os.ErrNoDeadline on both sides), and reads that
// work, never EAGAIN from a descriptor left non-blocking.
func TestLowerCharDeviceReadHandle(t *testing.T) {
	c := newCow(t, "/dev")
	for _, name := range []string{"/dev/null", "/dev/zero", "/dev/urandom"} {
		o, err := os.Open(name)
		if err != nil {
			t.Skipf("%s: %v", name, err)
		}
		f, err := c.Open(name)
		if err != nil {
			t.Fatalf("overlay Open(%s): %v", name, err)
		}
		d, ok := f.(deadlineReader)
		if !ok {
			t.Fatalf("%s: the handle has no SetReadDeadline", name)
		}
		if got, want := d.SetReadDeadline(time.Time{}), o.SetReadDeadline(time.Time{}); !errors.Is(got, want) && got != want {
			t.Errorf("%s: SetReadDeadline = %v, os says %v", name, got, want)
		}
		bo, bf := make([]byte, 8), make([]byte, 8)
		no, eo := o.Read(bo)
		nf, ef := f.Read(bf)
		if no != nf || !errors.Is(ef, eo) && ef != eo {
			t.Errorf("%s: Read = %d, %v; os %d, %v", name, nf, ef, no, eo)
		}
		o.Close()
		f.Close()
	}
}
