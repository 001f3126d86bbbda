package kernel

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// bytes as the command left them. Confined, the sandbox mounts the copy
// and the writable paths apart, so the link itself fails (EXDEV) and the
// layer keeps the output; unconfined, the link is made and the import
// must not keep the shared inode.
func TestRunCopyHardLinkedOutputIsPrivate(t *testing.T) {
	if _, err := landlockABI(runConfig{}); err != nil {
		t.Skip("Landlock is not available: ", err)
	}
	for _, confined := range []bool{true, false} {
		t.Run(map[bool]string{true: "confined", false: "unconfined"}[confined], func(t *testing.T) {
			base := t.TempDir() // the cache and Run's temporary directory
			root, cache := filepath.Join(t.TempDir(), "root"), filepath.Join(base, "cache")
			tmp := filepath.Join(base, "tmp")
			for _, d := range []string{root, cache, tmp} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			f, err := overlayfs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", `head -c 2097152 /dev/urandom > out && cat out > "$CACHE/expect" && ln out "$CACHE/out"`)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CACHE="+cache)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			// The cache and Run's temporary directory (the copy) under one
			// writable directory, so that nothing but the sandbox's mounts
			// stands between them.
			opts := []RunOption{WithCopyFallback(), WithTempDir(tmp), WithWritable(base)}
			if !confined {
				opts = append(opts, Unconfined())
			}
			runErr := Run(context.Background(), f, cmd, opts...)
			want, err := os.ReadFile(filepath.Join(cache, "expect"))
			if err != nil || len(want) != 2<<20 {
				t.Fatalf("the command left %d bytes (%v); Run: %v\n%s", len(want), err, runErr, stderr.String())
			}
			switch {
			case confined && runErr != nil && strings.Contains(stderr.String(), "Invalid cross-device link"):
				t.Log("the sandbox refused the hard link (EXDEV)")
			case runErr != nil:
				t.Fatalf("Run: %v\n%s", runErr, stderr.String())
			default:
				overwriteInPlace(t, filepath.Join(cache, "out"))
			}
			got, err := afero.ReadFile(f, filepath.Join(root, "out"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the layer's out is not what the command wrote (first bytes %q): a write to the cache after Run reached it", got[:8])
			}
		})
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
