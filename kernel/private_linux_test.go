package kernel

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// overwriteInPlace writes over the start of the file at p without
// replacing it (same inode), as a later user of a cache would.
func overwriteInPlace(t *testing.T, p string) {
	t.Helper()
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(bytes.Repeat([]byte("X"), 4096), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRunCopyHardLinkedOutputIsPrivate (issue 23): in copy mode a command
// hard-links its 2 MiB output into a WithWritable cache; a later write to
// the cache must not change the layer's file. Oracle: the cache file's
// bytes as the command left them.
func TestRunCopyHardLinkedOutputIsPrivate(t *testing.T) {
	if _, err := landlockABI(runConfig{}); err != nil {
		t.Skip("Landlock is not available: ", err)
	}
	base := t.TempDir()
	root, cache := filepath.Join(base, "root"), filepath.Join(base, "cache")
	for _, d := range []string{root, cache} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `head -c 2097152 /dev/urandom > out && ln out "$CACHE/out"`)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CACHE="+cache)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := Run(context.Background(), f, cmd, WithCopyFallback(), WithWritable(cache)); err != nil {
		t.Fatalf("Run: %v\n%s", err, stderr.String())
	}
	want, err := os.ReadFile(filepath.Join(cache, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 2<<20 {
		t.Fatalf("the command left %d bytes in the cache", len(want))
	}
	overwriteInPlace(t, filepath.Join(cache, "out"))
	got, err := afero.ReadFile(f, filepath.Join(root, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the layer's out changed with the cache file written after Run (first bytes %q)", got[:8])
	}
}

// TestImportLargeFileIsPrivate: Import of an upper holding a 2 MiB file;
// writing the upper's file in place afterwards, or truncating it, must not
// change the layer's file. Oracle: the bytes written to the upper.
func TestImportLargeFileIsPrivate(t *testing.T) {
	base := t.TempDir()
	root, upper := filepath.Join(base, "root"), filepath.Join(base, "upper")
	for _, d := range []string{root, upper} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := make([]byte, 2<<20)
	rand.Read(want)
	for _, name := range []string{"big", "cut"} {
		if err := os.WriteFile(filepath.Join(upper, name), want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(upper, f, Options{}); err != nil {
		t.Fatal(err)
	}
	overwriteInPlace(t, filepath.Join(upper, "big"))
	if err := os.Truncate(filepath.Join(upper, "cut"), 10); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"big", "cut"} {
		got, err := afero.ReadFile(f, filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the layer's file changed with the upper's (%d bytes, first %q)", name, len(got), got[:min(8, len(got))])
		}
	}
}
