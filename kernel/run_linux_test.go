package kernel

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// runScript uses absolute paths under the root, as a real tool would; Run
// says where the root is visible in COWFS_ROOT (in copy mode, the copy).
const runScript = `set -e
cd /
cd "$COWFS_ROOT"
cat pre > pre-seen
echo new > created
echo more >> a
rm d/b
mv d/e/c moved
chmod 600 g/y
mkdir -p newdir/sub && echo deep > newdir/sub/f
rm -r d/e/f
ln -s a sym
rm -r g && mkdir g && echo g2 > g/only
echo done > "$PWD/cwd-marker"
rm -r gone
mkdir empty && echo back > empty/again
`

var runScriptChanges = []string{
	"A created", "A cwd-marker", "A empty/again", "A g/only", "A moved", "A newdir", "A newdir/sub", "A newdir/sub/f",
	"A pre", "A pre-seen", "A sym",
	"D d/b", "D d/e/c", "D d/e/f", "D d/e/f/x", "D g/y", "M a",
}

type runMode struct {
	name string
	run  func(ctx context.Context, f *overlayfs.Fs, cmd *exec.Cmd, opts ...RunOption) error
}

// require skips the test where the mode cannot run here: an overlay mode
// where no overlay can be mounted.
func (m runMode) require(t *testing.T) {
	t.Helper()
	if strings.HasPrefix(m.name, "overlay") {
		needMount(t)
	}
}

// newOverlay returns an overlay of root, failing the test if New does.
func newOverlay(t *testing.T, root string) *overlayfs.Fs {
	t.Helper()
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// runModes are the ways to run a command that the tests compare. As root,
// "overlay" takes the re-executed init (withReexecInit) and "Run" the
// thread (thread_linux.go), so that both are covered.
func runModes() []runMode {
	cfg := runConfig{tempDir: os.TempDir()}
	ns := cfg
	ns.userNS, ns.userNSSet = true, true
	reexec := cfg
	reexec.noThread = true
	with := func(c runConfig, opts []RunOption) runConfig {
		for _, o := range opts {
			o(&c)
		}
		return c
	}
	return []runMode{
		{"overlay", func(ctx context.Context, f *overlayfs.Fs, cmd *exec.Cmd, opts ...RunOption) error {
			return runOverlay(ctx, f, cmd, with(reexec, opts))
		}},
		{"overlay-userns", func(ctx context.Context, f *overlayfs.Fs, cmd *exec.Cmd, opts ...RunOption) error {
			return runOverlay(ctx, f, cmd, with(ns, opts))
		}},
		{"copy", func(ctx context.Context, f *overlayfs.Fs, cmd *exec.Cmd, opts ...RunOption) error {
			return runCopy(ctx, f, cmd, with(cfg, opts))
		}},
		{"Run", func(ctx context.Context, f *overlayfs.Fs, cmd *exec.Cmd, opts ...RunOption) error {
			return Run(ctx, f, cmd, opts...)
		}},
		{"Run-copy", func(ctx context.Context, f *overlayfs.Fs, cmd *exec.Cmd, opts ...RunOption) error {
			return Run(ctx, f, cmd, append(opts, WithCopyFallback())...)
		}},
	}
}

func changeStrings(f *overlayfs.Fs) []string {
	var s []string
	for _, c := range f.Changes() {
		s = append(s, c.String())
	}
	slices.Sort(s)
	return s
}

func TestRunScript(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	// The oracle: the script on a real copy of the root.
	oracleRoot := t.TempDir()
	writeTree(t, oracleRoot)
	if err := os.WriteFile(filepath.Join(oracleRoot, "pre"), []byte("from the layer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(oracleRoot, "gone/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(oracleRoot, "empty")); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", runScript)
	sh.Dir = oracleRoot
	sh.Env = append(os.Environ(), "COWFS_ROOT="+oracleRoot)
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("oracle run: %v\n%s", err, out)
	}
	want, err := dirTree(oracleRoot)
	if err != nil {
		t.Fatal(err)
	}
	delete(want, ".")

	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			root := t.TempDir()
			writeTree(t, root)
			before, err := dirTree(root)
			if err != nil {
				t.Fatal(err)
			}
			f, err := overlayfs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			// The command must see the layer as it is before the run: a new
			// file, a new dir it deletes, a deleted dir it makes again.
			if err := afero.WriteFile(f, filepath.Join(root, "pre"), []byte("from the layer"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := f.MkdirAll(filepath.Join(root, "gone/sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := f.Remove(filepath.Join(root, "empty")); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", runScript)
			cmd.Dir = root
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := mode.run(context.Background(), f, cmd); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			after, err := dirTree(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffTrees(before, after, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
				t.Errorf("the real root changed:\n%v", err)
			}
			if got := changeStrings(f); !slices.Equal(got, runScriptChanges) {
				t.Errorf("changes:\n got %q\nwant %q", got, runScriptChanges)
			}
			got, err := viewTree(f)
			if err != nil {
				t.Fatal(err)
			}
			delete(got, ".")
			if err := diffTrees(want, got, cmpOpts{times: false}); err != nil {
				t.Errorf("view differs from the script run on a real copy:\n%v", err)
			}
			if why := canMount(t); why == "" {
				// What Run imported, materialized again, is what the kernel shows.
				checkKernelView(t, f, Options{UserXattr: !inInitUserNS()}, cmpOpts{times: true, dtimes: true, owners: true})
			}
		})
	}
}

func TestRunContextCancel(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep(1)")
	}
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			root := t.TempDir()
			f := newOverlay(t, root)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			var started time.Time
			go func() {
				// Cancel once the command says it has written.
				buf := make([]byte, 8)
				pr.Read(buf)
				started = time.Now()
				cancel()
			}()
			cmd := exec.Command("sh", "-c", "echo x > before; echo started; exec sleep 30")
			cmd.Stdout, cmd.Dir = pw, root
			err = mode.run(ctx, f, cmd)
			pw.Close()
			if err == nil {
				t.Fatal("a killed command reported success")
			}
			if d := time.Since(started); started.IsZero() || d > 20*time.Second {
				t.Errorf("Run returned %v after the cancel", d)
			}
			if got := changeStrings(f); !slices.Equal(got, []string{"A before"}) {
				t.Errorf("changes of a killed command: %q", got)
			}
		})
	}
}

// unprivChild returns a command that runs this test binary's test named
// run as uid 65534 with no capabilities (setpriv), and the work directory,
// owned by that user, beside the binary's copy in a directory of mode
// dirPerm. It skips where that cannot be done.
func unprivChild(t *testing.T, run string, dirPerm os.FileMode) (cmd *exec.Cmd, work string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("switching to uid 65534 needs root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv(1) is not installed (util-linux): cannot run as uid 65534")
	}
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, dirPerm); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kernel.test")
	if err := copyExecutable(self, bin); err != nil {
		t.Fatal(err)
	}
	work = filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^"+run+"$", "-test.v"), work
}

// runUnprivEnv makes the test binary run TestRunUnprivilegedChild.
const runUnprivEnv = "COWFS_KERNEL_RUN_UNPRIV"

// TestRunUnprivileged runs Run as uid 65534 with no capabilities: Run must
// create the user namespace itself and mount with userxattr.
func TestRunUnprivileged(t *testing.T) {
	cmd, work := unprivChild(t, "TestRunUnprivilegedChild", 0o777)
	cmd.Env = append(os.Environ(), runUnprivEnv+"="+work, "TMPDIR="+work)
	out, err := cmd.CombinedOutput()
	text := string(out)
	switch {
	case strings.Contains(text, "--- SKIP"):
		t.Skip("child skipped: ", lastLines(text, 3))
	case err != nil:
		t.Fatalf("child: %v\n%s", err, lastLines(text, 40))
	}
	t.Log(lastLines(text, 3))
}

func TestRunUnprivilegedChild(t *testing.T) {
	work := os.Getenv(runUnprivEnv)
	if work == "" {
		t.Skip("runs as a child of TestRunUnprivileged")
	}
	if os.Geteuid() == 0 {
		t.Fatal("child runs as root")
	}
	// Without a user namespace the mount is refused, with a hint.
	l, u, w, m := mountDirs(t, "")
	_, err := Mount(context.Background(), l, u, w, m, Options{})
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "unshare -Urm") {
		t.Errorf("unprivileged Mount: %v, want EPERM with a user-namespace hint", err)
	}
	root := filepath.Join(work, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTree(t, root)
	before, err := dirTree(root)
	if err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := afero.WriteFile(f, filepath.Join(root, "pre"), []byte("from the layer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.MkdirAll(filepath.Join(root, "gone/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(filepath.Join(root, "empty")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", runScript)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	// runOverlay, not Run: a silent fallback to the copy must fail here.
	err = runOverlay(context.Background(), f, cmd, runConfig{tempDir: work})
	var mf *mountFailed
	if errors.As(err, &mf) {
		t.Skip("no overlay for an unprivileged user here: ", err)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got := changeStrings(f); !slices.Equal(got, runScriptChanges) {
		t.Errorf("changes:\n got %q\nwant %q", got, runScriptChanges)
	}
	after, err := dirTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := diffTrees(before, after, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
		t.Errorf("the real root changed:\n%v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(work, "cowfs-*")); len(left) > 0 {
		t.Errorf("Run left temporary directories behind: %v", left)
	}
	t.Logf("uid %d ran the script in an overlay; %d changes", os.Geteuid(), len(f.Changes()))
}

func TestRunExitStatusAndFailures(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			root := t.TempDir()
			writeTree(t, root)
			f, err := overlayfs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", "echo partial > written; exit 3")
			cmd.Dir = root
			err = mode.run(context.Background(), f, cmd)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 3 {
				t.Fatalf("got %v, want exit status 3", err)
			}
			if got := changeStrings(f); !slices.Equal(got, []string{"A written"}) {
				t.Errorf("changes of a failed command: %q", got)
			}

			missing := exec.Command(filepath.Join(root, "no-such-program"))
			missing.Dir = root
			if err := mode.run(context.Background(), f, missing); err == nil {
				t.Error("running a missing program succeeded")
			}
			if got := changeStrings(f); !slices.Equal(got, []string{"A written"}) {
				t.Errorf("layer changed by a command that never ran: %q", got)
			}
		})
	}
}

// Example-style check that the helper binary passes stdin, args and the
// environment through unchanged.
func TestRunPassesIO(t *testing.T) {
	needMount(t)
	root := t.TempDir()
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `read x; printf '%s %s %s' "$x" "$1" "$COWFS_T"; env | grep -c COWFS_KERNEL_RUN_HOOK || true`, "sh", "arg1")
	cmd.Stdin = strings.NewReader("line\n")
	cmd.Env = append(os.Environ(), "COWFS_T=env")
	var out strings.Builder
	cmd.Stdout = &out
	if err := Run(context.Background(), f, cmd); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "line arg1 env0\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	_ = fmt.Sprint
}
