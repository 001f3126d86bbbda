package tape

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
)

// TestContentCapture: small contents land in the sidecar, addressed by the
// hash recorded; contents over the bound do not.
func TestContentCapture(t *testing.T) {
	dir, side := t.TempDir(), t.TempDir()
	small, big := []byte("small file\n"), pattern(5000, 8)
	mustWrite(t, filepath.Join(dir, "in"), small)
	tp, _ := tapeOf(t, afero.NewOsFs(), dir, func(w afero.Fs) {
		afero.ReadFile(w, filepath.Join(dir, "in"))
		afero.WriteFile(w, filepath.Join(dir, "out"), []byte("written\n"), 0o644)
		afero.WriteFile(w, filepath.Join(dir, "big"), big, 0o644)
		f, err := w.OpenFile(filepath.Join(dir, "out"), os.O_RDWR, 0)
		must(t, err)
		f.WriteAt([]byte("W"), 0) // the rest is read at Close, captured from that stream
		f.Close()
	}, WithContent(side, 1024))
	for _, c := range []struct {
		hash string
		want []byte
	}{
		{only(tp, OpOpen, "in")[0].RHash, small},
		{only(tp, OpOpen, "out")[0].Hash, []byte("written\n")},
		{only(tp, OpOpen, "out")[1].Hash, []byte("Written\n")},
	} {
		got, err := ReadContent(side, c.hash)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("content %s: %q, %v; want %q", c.hash, got, err, c.want)
		}
	}
	if _, err := ReadContent(side, sum(big)); !os.IsNotExist(err) {
		t.Errorf("content over the bound was captured: %v", err)
	}
}
