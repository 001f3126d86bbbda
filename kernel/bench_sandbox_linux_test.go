package kernel

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
)

// BenchmarkRunVsBwrap compares Run of true(1) on a 60-file root with
// bubblewrap running it with every namespace (issue 22's peer), in one
// run, alternating iteration by iteration (and which goes first) so that
// both see the same machine. Each sub-benchmark reports the mean time of
// each way per run and the ratios (run/bwrap: the goal is ≤ 1.5):
//
//	go test -run '^$' -bench RunVsBwrap -benchtime 40x -count 3 ./kernel/
//
// In overlay mode as root, "reexec" is Run with the PID namespace's init
// started by executing this program again (the way before the thread,
// still taken with a quota or a SysProcAttr): the trick's own measure.
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
	type way struct {
		name string
		opts []RunOption
	}
	modes := []struct {
		name string
		ways []way
	}{
		{"overlay", []way{{"run", nil}, {"reexec", []RunOption{withReexecInit()}}}},
		{"copy", []way{{"run", []RunOption{WithCopyFallback()}}}},
	}
	if why := canMount(b); why != "" {
		b.Log("overlay mode skipped: ", why)
		modes = modes[1:]
	} else if os.Geteuid() != 0 || !inInitUserNS() {
		modes[0].ways = modes[0].ways[:1] // the thread needs root
	}
	bwrapCmd := func() *exec.Cmd {
		return exec.Command(bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
			"--bind", root, root, "--unshare-all", "--die-with-parent", "--new-session", truePath)
	}
	if out, err := bwrapCmd().CombinedOutput(); err != nil {
		b.Skipf("bwrap cannot run here: %v: %s", err, out)
	}
	for _, m := range modes {
		b.Run("mode="+m.name, func(b *testing.B) {
			f, err := overlayfs.New(root)
			if err != nil {
				b.Fatal(err)
			}
			steps := []func(){func() {
				if out, err := bwrapCmd().CombinedOutput(); err != nil {
					b.Fatalf("bwrap: %v: %s", err, out)
				}
			}}
			for _, w := range m.ways {
				steps = append(steps, func() {
					if err := Run(context.Background(), f, exec.Command(truePath), w.opts...); err != nil {
						b.Fatal(err)
					}
				})
			}
			spent := make([]time.Duration, len(steps))
			i := 0
			for b.Loop() {
				for k := range steps {
					k = (k + i) % len(steps) // each way first in turn
					t0 := time.Now()
					steps[k]()
					spent[k] += time.Since(t0)
				}
				i++
			}
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(i) }
			b.ReportMetric(per(spent[0]), "bwrap-ns/op")
			for k, w := range m.ways {
				b.ReportMetric(per(spent[k+1]), w.name+"-ns/op")
				b.ReportMetric(per(spent[k+1])/per(spent[0]), w.name+"/bwrap")
			}
		})
	}
}

// BenchmarkRunLargeCaller compares Run of true(1) in a thread (its init a
// fork, which copies the caller's page tables) with the re-executed init
// (os/exec's vfork copies none), alternating within each iteration, in a
// caller with 512 MiB of its own memory resident: the measure of
// threadMaxRSS, above which Run takes the re-executed init.
//
//	go test -run '^$' -bench RunLargeCaller -benchtime 20x ./kernel/
func BenchmarkRunLargeCaller(b *testing.B) {
	if os.Geteuid() != 0 || !inInitUserNS() {
		b.Skip("the thread runs as root in the initial user namespace only")
	}
	if why := canMount(b); why != "" {
		b.Skip(why)
	}
	big := make([]byte, 512<<20)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	f, err := overlayfs.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ways := [][]RunOption{
		{func(c *runConfig) { c.maxRSS = 1 << 62 }}, // the thread whatever the memory
		{withReexecInit()},
	}
	spent := make([]time.Duration, len(ways))
	i := 0
	for b.Loop() {
		for k := range ways {
			k = (k + i) % len(ways)
			t0 := time.Now()
			if err := Run(context.Background(), f, exec.Command("true"), ways[k]...); err != nil {
				b.Fatal(err)
			}
			spent[k] += time.Since(t0)
		}
		i++
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(i), "thread-ns/op")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(i), "reexec-ns/op")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "thread/reexec")
	runtime.KeepAlive(big)
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
