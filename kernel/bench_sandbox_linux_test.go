package kernel

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// BenchmarkRunVsBwrap compares Run of true(1) on a 60-file root with
// bubblewrap running it with every namespace (issue 22's peer), in one
// run, alternating iteration by iteration so that both see the same
// machine:
//
//	go test -run '^$' -bench RunVsBwrap -count 6 ./kernel | benchstat -col /impl -
//
// The goal is Run ≤ 1.5× bwrap.
func BenchmarkRunVsBwrap(b *testing.B) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Skip("bubblewrap (bwrap) is not installed: no peer to compare with (.ci/setup installs it)")
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true(1)")
	}
	root := b.TempDir()
	writeFiles(b, root, 60)
	modes := []struct {
		name string
		opts []RunOption
	}{{"overlay", nil}, {"copy", []RunOption{WithCopyFallback()}}}
	if why := canMount(b); why != "" {
		b.Log("overlay mode skipped: ", why)
		modes = modes[1:]
	}
	bwrapCmd := func() *exec.Cmd {
		return exec.Command(bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
			"--bind", root, root, "--unshare-all", "--die-with-parent", "--new-session", truePath)
	}
	if out, err := bwrapCmd().CombinedOutput(); err != nil {
		b.Skipf("bwrap cannot run here: %v: %s", err, out)
	}
	for _, m := range modes {
		b.Run("mode="+m.name+"/impl=run", func(b *testing.B) {
			f, err := overlayfs.New(root)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := Run(context.Background(), f, exec.Command(truePath), m.opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("mode="+m.name+"/impl=bwrap", func(b *testing.B) {
			for b.Loop() {
				if out, err := bwrapCmd().CombinedOutput(); err != nil {
					b.Fatalf("bwrap: %v: %s", err, out)
				}
			}
		})
	}
}

// writeFiles writes n small files into dir, ten to a directory.
func writeFiles(b testing.TB, dir string, n int) {
	b.Helper()
	for i := range n {
		d := filepath.Join(dir, fmt.Sprint("d", i/10))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprint("f", i)), []byte(fmt.Sprint("file ", i, "\n")), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
