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

// BenchmarkRunTools runs real tools on a 60-file tree, in the kernel
// overlay and the copy, against a plain run of the same tool on a copy of
// the tree (issue 22's table):
//
//	go test -run '^$' -bench RunTools -count 6 ./kernel | benchstat -col /impl -
func BenchmarkRunTools(b *testing.B) {
	tools := []struct{ name, script string }{
		{"make", `make -s -B -f Makefile all`},
		{"sed-i", `sed -i 's/file/file/' d0/f0 d1/f10 d2/f20`},
		{"tar-x", `tar xf files.tar`},
		{"git-status", `git status --porcelain >/dev/null`},
	}
	for _, tool := range []string{"make", "sed", "tar", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s is not installed", tool)
		}
	}
	root := b.TempDir()
	writeFiles(b, root, 60)
	mk := "all:\n\tcat d0/* > all.txt\n"
	if err := os.WriteFile(filepath.Join(root, "Makefile"), []byte(mk), 0o644); err != nil {
		b.Fatal(err)
	}
	setup := exec.Command("sh", "-c", `tar cf files.tar d0 d1 && git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm init`)
	setup.Dir = root
	setup.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := setup.CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	plain := b.TempDir()
	if out, err := exec.Command("cp", "-a", root+"/.", plain).CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	modes := []struct {
		name string
		opts []RunOption
	}{{"overlay", nil}, {"copy", []RunOption{WithCopyFallback()}}}
	if why := canMount(b); why != "" {
		b.Log("overlay mode skipped: ", why)
		modes = modes[1:]
	}
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	for _, tool := range tools {
		b.Run("tool="+tool.name+"/impl=plain", func(b *testing.B) {
			for b.Loop() {
				c := exec.Command("sh", "-c", tool.script)
				c.Dir, c.Env = plain, env
				if out, err := c.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
		})
		for _, m := range modes {
			b.Run("tool="+tool.name+"/impl="+m.name, func(b *testing.B) {
				for b.Loop() {
					f, err := overlayfs.New(root)
					if err != nil {
						b.Fatal(err)
					}
					c := exec.Command("sh", "-c", tool.script)
					c.Dir, c.Env = root, env
					if err := Run(context.Background(), f, c, m.opts...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
