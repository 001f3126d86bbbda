package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cowfs/cowfs/internal/longtest"
	"github.com/cowfs/cowfs/overlayfs"
)

// The differential proof: random operation sequences on the in-memory
// overlay, materialized, mounted in place over the original root; the
// kernel's merged view must equal the overlay's. It runs in a child test
// process inside a private mount namespace (unshare -m) so in-place mounts
// never show outside, once as root (trusted.* xattrs) and once in a user
// namespace (unshare -Urm: user.* xattrs and userxattr), and once more as
// the unprivileged uid 65534 in its own user namespace.

const (
	diffEnv     = "COWFS_KERNEL_DIFF_CHILD" // directory to work in
	diffOps     = 80
	diffSeedEnv = "COWFS_KERNEL_DIFF_SEEDS" // "first:count", to reproduce
)

func TestKernelDifferential(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare(1) is not installed (util-linux)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Skip("cannot find the test binary: ", err)
	}
	variants := []struct {
		name  string
		args  []string
		uid   int
		seeds int
	}{
		{"root-trusted", []string{unshare, "-m", "--propagation", "private"}, 0, longtest.N(40, 300)},
		// Root in a user namespace: no trusted.* xattrs, so userxattr.
		{"userns-userxattr", []string{unshare, "-Urm", "--propagation", "private"}, 0, longtest.N(15, 100)},
		// Unprivileged for real: uid 65534 owning its own user namespace.
		{"uid65534-userns", []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", unshare, "-Urm", "--propagation", "private"}, 65534, longtest.N(40, 300)},
	}
	for _, v := range variants {
		seeds := os.Getenv(diffSeedEnv)
		if seeds == "" {
			seeds = "1:" + strconv.Itoa(v.seeds)
		}
		t.Run(v.name, func(t *testing.T) {
			if os.Geteuid() != 0 && v.uid != os.Geteuid() && v.args[0] == "setpriv" {
				t.Skip("switching to uid 65534 needs root")
			}
			if _, err := exec.LookPath(v.args[0]); err != nil {
				t.Skip(v.args[0], " is not installed")
			}
			dir := t.TempDir()
			if v.uid != 0 {
				if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(dir, v.uid, v.uid); err != nil {
					t.Skip("cannot hand a temp dir to uid ", v.uid, ": ", err)
				}
			}
			bin := self
			if v.uid != 0 {
				// The build dir is private to us: hand over a copy.
				bin = filepath.Join(dir, "kernel.test")
				if err := copyExecutable(self, bin); err != nil {
					t.Fatal(err)
				}
				dir = filepath.Join(dir, "work")
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(dir, v.uid, v.uid); err != nil {
					t.Fatal(err)
				}
			}
			args := append(v.args[1:], bin, "-test.run=^TestKernelDifferentialChild$", "-test.v")
			cmd := exec.Command(v.args[0], args...)
			cmd.Env = append(os.Environ(), diffEnv+"="+dir, diffSeedEnv+"="+seeds)
			out, err := cmd.CombinedOutput()
			text := string(out)
			switch {
			case strings.Contains(text, "--- SKIP"):
				t.Skip("child skipped: ", lastLines(text, 3))
			case err != nil && !strings.Contains(text, "=== RUN"):
				t.Skipf("cannot start the child in %v: %v\n%s", v.args, err, lastLines(text, 5))
			case err != nil:
				t.Fatalf("child failed: %v\n%s", err, lastLines(text, 150))
			}
			t.Log(lastLines(text, 4))
		})
	}
}

func copyExecutable(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func TestKernelDifferentialChild(t *testing.T) {
	dir := os.Getenv(diffEnv)
	if dir == "" {
		t.Skip("runs as a child of TestKernelDifferential")
	}
	first, count := 1, longtest.N(40, 300)
	if s := os.Getenv(diffSeedEnv); s != "" {
		a, b, _ := strings.Cut(s, ":")
		first, _ = strconv.Atoi(a)
		count, _ = strconv.Atoi(b)
	}
	opts := Options{UserXattr: !inInitUserNS()}
	if why := canMount(t); why != "" {
		t.Skip(why)
	}
	lower := filepath.Join(dir, "lower")
	if err := os.Mkdir(lower, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTree(t, lower)
	work := filepath.Join(dir, "work")
	start := time.Now()
	failures, okOps, entries := 0, 0, 0
	for seed := first; seed < first+count; seed++ {
		log, n, err := differentialSeed(lower, filepath.Join(dir, "upper"), work, uint64(seed), opts)
		entries += n
		for _, l := range log {
			if !strings.Contains(l, " -> ") {
				okOps++
			}
		}
		if err != nil {
			failures++
			t.Errorf("seed %d (reproduce with %s=%d:1): %v\nops:\n\t%s", seed, diffSeedEnv, seed, err, strings.Join(log, "\n\t"))
			if failures >= 3 {
				t.Fatal("stopping after 3 failing seeds")
			}
		}
	}
	t.Logf("%d seeds x %d ops (%d succeeded, %d layer entries in all), uid %d, opts %+v, in %v",
		count, diffOps, okOps, entries, os.Getuid(), opts, time.Since(start).Round(time.Millisecond))
	if okOps < count*diffOps/4 || entries < count*5 {
		t.Errorf("the random operations did too little to prove anything")
	}
}

func differentialSeed(lower, upper, work string, seed uint64, opts Options) (log []string, entries int, err error) {
	log, err = differentialSeed1(lower, upper, work, seed, opts, &entries)
	return log, entries, err
}

func differentialSeed1(lower, upper, work string, seed uint64, opts Options, entries *int) ([]string, error) {
	for _, d := range []string{upper, work} {
		if err := removeAllWritable(d); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(work, 0o700); err != nil {
		return nil, err
	}
	f, err := overlayfs.New(lower)
	if err != nil {
		return nil, err
	}
	log := randomOps(f, rand.New(rand.NewPCG(seed, 7)), diffOps, os.Geteuid() == 0 && inInitUserNS())
	*entries = len(f.Layer())
	want, err := viewTree(f)
	if err != nil {
		return log, fmt.Errorf("reading the overlay view: %w", err)
	}
	if err := Materialize(f, upper, opts); err != nil {
		return log, err
	}
	m, err := Mount(context.Background(), lower, upper, work, lower, opts)
	if err != nil {
		return log, err
	}
	got, err := dirTree(lower)
	if uerr := m.Unmount(); uerr != nil {
		return log, uerr
	}
	if err != nil {
		return log, fmt.Errorf("reading the kernel view: %w", err)
	}
	if err := diffTrees(want, got, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
		return log, err
	}
	// The same layer through an OCI tar and back gives the same view.
	var buf bytes.Buffer
	if err := WriteOCILayer(f, &buf); err != nil {
		return log, fmt.Errorf("WriteOCILayer: %w", err)
	}
	g, err := overlayfs.New(lower)
	if err != nil {
		return log, err
	}
	if err := ReadOCILayer(&buf, g); err != nil {
		return log, fmt.Errorf("ReadOCILayer: %w", err)
	}
	back, err := viewTree(g)
	if err != nil {
		return log, err
	}
	if err := diffTrees(want, back, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
		return log, fmt.Errorf("after an OCI round trip:\n%w", err)
	}
	return log, nil
}

func removeAllWritable(dir string) error {
	if err := os.RemoveAll(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	removeTree(dir)
	return os.RemoveAll(dir)
}

var opNames = []string{"a", "d", "e", "g", "l", "x", "n", "empty", "b", "c", "f", "y"}

func randomPath(r *rand.Rand, root string) (string, string) {
	n := []int{1, 1, 1, 2, 2, 2, 3}[r.IntN(7)]
	parts := make([]string, n)
	for i := range parts {
		parts[i] = opNames[r.IntN(len(opNames))]
	}
	rel := strings.Join(parts, "/")
	return rel, filepath.Join(root, rel)
}

func randomMode(r *rand.Rand, dir bool) fs.FileMode {
	m := fs.FileMode(r.IntN(0o1000))
	if dir {
		m |= 0o700 // keep it walkable for the comparison as non-root
	} else {
		m |= 0o600
	}
	switch r.IntN(8) {
	case 0:
		m |= fs.ModeSetuid
	case 1:
		m |= fs.ModeSetgid
	case 2:
		m |= fs.ModeSticky
	}
	return m
}

// randomOps applies n random operations through f and returns their log.
// Failing operations are part of the sequence too: they must not change
// anything.
func randomOps(f *overlayfs.Fs, r *rand.Rand, n int, chown bool) []string {
	root := f.Root()
	var log []string
	for range n {
		rel, p := randomPath(r, root)
		var line string
		var err error
		switch op := r.IntN(14); op {
		case 0, 1:
			data := strings.Repeat(strconv.Itoa(r.IntN(100)), r.IntN(20))
			mode := randomMode(r, false)
			line = fmt.Sprintf("write %s %q %v", rel, data, mode)
			var fh interface {
				WriteString(string) (int, error)
				Close() error
			}
			if fh, err = f.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode); err == nil {
				_, err = fh.WriteString(data)
				fh.Close()
			}
		case 2:
			line = "append " + rel
			var fh interface {
				WriteString(string) (int, error)
				Close() error
			}
			if fh, err = f.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0); err == nil {
				_, err = fh.WriteString("+app")
				fh.Close()
			}
		case 3, 4:
			mode := randomMode(r, true)
			line = fmt.Sprintf("mkdir %s %v", rel, mode)
			err = f.Mkdir(p, mode)
		case 5:
			line = "mkdirall " + rel
			err = f.MkdirAll(p, 0o755)
		case 6:
			line = "remove " + rel
			err = f.Remove(p)
		case 7:
			line = "removeall " + rel
			err = f.RemoveAll(p)
		case 8, 9:
			rel2, p2 := randomPath(r, root)
			line = fmt.Sprintf("rename %s %s", rel, rel2)
			err = f.Rename(p, p2)
		case 10:
			mode := randomMode(r, false)
			line = fmt.Sprintf("chmod %s %v", rel, mode)
			if fi, serr := f.Stat(p); serr == nil && fi.IsDir() {
				mode |= 0o700
			}
			err = f.Chmod(p, mode)
		case 11:
			target := []string{"a", "../a", "d/e", "nowhere", "/etc", "x/y"}[r.IntN(6)]
			line = fmt.Sprintf("symlink %s -> %s", rel, target)
			err = f.SymlinkIfPossible(target, p)
		case 12:
			mt := time.Unix(int64(r.IntN(2e9)), int64(r.IntN(1e9)))
			line = fmt.Sprintf("chtimes %s %v", rel, mt)
			err = f.Chtimes(p, time.Time{}, mt)
		case 13:
			if !chown {
				continue
			}
			uid, gid := r.IntN(3), r.IntN(3)
			line = fmt.Sprintf("chown %s %d:%d", rel, uid, gid)
			err = f.Chown(p, uid, gid)
		}
		if err != nil {
			line += " -> " + err.Error()
		}
		log = append(log, line)
	}
	return log
}
