package kernel

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"github.com/cowfs/cowfs/internal/longtest"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
)

// scenarioUnprivEnv makes the test binary run the scenario suite as the
// unprivileged child of TestHermeticScenarios; its value is a work
// directory the child owns.
const scenarioUnprivEnv = "COWFS_KERNEL_SCENARIO_UNPRIV"

// A scenario is one command run through Run. The oracle is the same
// command run directly on a plain copy of the fixture at the same path;
// what it leaves inside the root is what the overlay view must show.
type scenario struct {
	name   string
	script string
	needs  []string // programs that must exist
	// outside: the command also writes outside the root, which must fail
	// (EACCES) while its other effects stay as the oracle's.
	outside bool
	// realRoot: the command writes the real root by its absolute name.
	// In copy mode that name is outside the command's root and read-only:
	// every write fails (EROFS) and the view stays the fixture's.
	realRoot bool
	// cwdOutside: cmd.Dir is empty and the process's working directory is
	// the sentinel directory, outside the root.
	cwdOutside bool
	// skipContent lists paths whose content the oracle comparison skips
	// (git's index holds inode numbers and times).
	skipContent []string
	// check inspects the command's standard output.
	check func(t *testing.T, stdout string)
}

func scenarios() []scenario {
	return []scenario{
		{name: "relative", script: `echo new > new.txt; echo more >> a.txt; mkdir -p d/e && echo deep > d/e/f; ./exe.sh > ran.txt`},
		{name: "absolute", script: `echo abs > "$COWFS_ROOT/abs.txt"; rm "$COWFS_ROOT/b.txt"; cd / && echo from-slash > "$COWFS_ROOT/d1/slash.txt"`},
		{name: "real-root", realRoot: true, script: `echo x > "$REAL/real.txt"; rm "$REAL/main.go"; mkdir "$REAL/realdir"; echo y >> "$REAL/a.txt"`},
		{name: "outside", outside: true, script: `echo leak > "$SENTINEL/leak.txt"; rm "$SENTINEL/keep.txt"; echo in > inside.txt; mkdir "$SENTINEL/newdir"; echo tmp > "$SENTINEL/../leak-next-to-root"`},
		{name: "tmpdir", script: `echo scratch > "$TMPDIR/t" && cat "$TMPDIR/t" > from-tmp.txt && mktemp -d > /dev/null && printf %s "$TMPDIR"`,
			check: func(t *testing.T, stdout string) {
				if stdout == "" || stdout == os.TempDir() || !filepath.IsAbs(stdout) {
					t.Errorf("TMPDIR is %q, want a private absolute directory", stdout)
				}
				if _, err := os.Lstat(stdout); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the private TMPDIR %s was not removed: %v", stdout, err)
				}
			}},
		{name: "cwd-outside", cwdOutside: true, script: `echo rel > rel.txt; mkdir reldir; printf %s "$PWD" > pwd.txt`},
		{name: "rm", script: `rm -r d1 a.txt && rm link`},
		{name: "mv-dirs", script: `mv d1 d3 && mv d2/sub d3/moved && mv a.txt d3/`},
		{name: "ln-s", script: `ln -s a.txt l2 && ln -s d1/sub dirlink && ln -sf b.txt link`},
		{name: "chmod-R", script: `chmod -R go-rwx d1 && chmod 0700 exe.sh && chmod 0444 a.txt`},
		{name: "devices", script: `echo gone > /dev/null && head -c 4 /dev/zero > zeros && (echo x > /dev/full) 2>/dev/null; echo ok > after-devices`},
		{name: "git", needs: []string{"git"}, skipContent: []string{".git/index"},
			script: `git init -q -b main . && git add -A && git -c user.name=T -c user.email=t@example.com commit -q -m init && git log --format=%H > head.txt`},
		{name: "tar-x", needs: []string{"tar"}, script: `tar -x --no-same-owner -f "$TARBALL" && tar -x --no-same-owner -C d2 -f "$TARBALL"`},
		{name: "mkfifo", needs: []string{"mkfifo"}, script: `mkfifo p && mkfifo -m 0600 d1/q && rm d1/x && mkfifo d1/x && echo after > after.txt`},
		{name: "unix-socket", script: `` + bindSocketEnv + `=ctl.sock "$SELF" && ` + bindSocketEnv + `=d2/sub/srv.sock "$SELF" && echo bound > after.txt`},
	}
}

// scenarioDirs are the paths of one scenario run: base holds the root,
// a sentinel directory beside it, a tarball and the oracle's TMPDIR.
type scenarioDirs struct {
	base, root, sentinel, tarball, otmp string
}

func newScenarioDirs(t *testing.T, base string) scenarioDirs {
	t.Helper()
	d := scenarioDirs{base: base, root: filepath.Join(base, "root"), sentinel: filepath.Join(base, "sentinel"),
		tarball: filepath.Join(base, "in.tar"), otmp: filepath.Join(base, "otmp")}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Date(2021, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, h := range []*tar.Header{
		{Name: "tx/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mt},
		{Name: "tx/one.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4, ModTime: mt},
		{Name: "tx/run.sh", Typeflag: tar.TypeReg, Mode: 0o755, Size: 4, ModTime: mt},
		{Name: "tx/l", Typeflag: tar.TypeSymlink, Linkname: "one.txt", ModTime: mt},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("abc\n"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.tarball, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(d.otmp, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// build (re)creates the fixture root and the sentinel directory.
func (d scenarioDirs) build(t *testing.T) {
	t.Helper()
	for _, p := range []string{d.root, d.sentinel, filepath.Join(d.base, "leak-next-to-root")} {
		removeAllWritable(p)
	}
	mt := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, dir := range []string{"d1/sub", "d2/sub"} {
		if err := os.MkdirAll(filepath.Join(d.root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(d.sentinel, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"root/a.txt": "alpha\n", "root/b.txt": "bravo\n", "root/main.go": "package main\n",
		"root/d1/x": "x", "root/d1/sub/y": "y", "root/d2/sub/z": "z", "root/exe.sh": "#!/bin/sh\necho ran\n",
		"sentinel/keep.txt": "keep me\n",
	}
	for name, s := range files {
		if err := os.WriteFile(filepath.Join(d.base, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(d.root, "exe.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(d.root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, top := range []string{d.root, d.sentinel} {
		filepath.Walk(top, func(p string, _ os.FileInfo, _ error) error {
			os.Chtimes(p, mt, mt)
			return nil
		})
	}
}

func (d scenarioDirs) env(s scenario) []string {
	self, _ := os.Executable()
	env := append(os.Environ(), "SELF="+self, "REAL="+d.root, "SENTINEL="+d.sentinel, "TARBALL="+d.tarball,
		"GIT_AUTHOR_DATE=2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2020-01-01T00:00:00Z",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+d.sentinel, "LC_ALL=C")
	return env
}

// oracle runs the scenario directly on the fixture and returns the tree
// it leaves under the root.
func (d scenarioDirs) oracle(t *testing.T, s scenario) tree {
	t.Helper()
	d.build(t)
	cmd := exec.Command("sh", "-c", s.script)
	cmd.Dir = d.root
	cmd.Env = append(d.env(s), RootEnv+"="+d.root, "TMPDIR="+d.otmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("oracle: %v\n%s", err, out.String())
	}
	want, err := dirTree(d.root)
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// runScenarios runs every scenario in both modes. wantKind is the mode an
// overlay run must report.
func runScenarios(t *testing.T, wantKind ModeKind) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	// Can Run mount an overlay here (as root, or in a user namespace)?
	probe, err := overlayfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	noOverlay := runOverlay(context.Background(), probe, exec.Command("true"), runConfig{tempDir: os.TempDir()})
	for _, mode := range []string{"overlay", "copy"} {
		for _, s := range scenarios() {
			t.Run(mode+"/"+s.name, func(t *testing.T) {
				if mode == "overlay" && noOverlay != nil {
					t.Skip("overlay mode needs mount privileges (root, or an unprivileged user namespace): ", noOverlay)
				}
				for _, p := range s.needs {
					if _, err := exec.LookPath(p); err != nil {
						t.Skipf("%s is not installed", p)
					}
				}
				if _, err := landlockABI(runConfig{}); err != nil {
					t.Skip("Landlock is not available: ", err)
				}
				runScenario(t, s, mode, wantKind)
			})
		}
	}
}

func runScenario(t *testing.T, s scenario, mode string, wantKind ModeKind) {
	d := newScenarioDirs(t, t.TempDir())
	want := d.oracle(t, s)
	copyMode := mode == "copy"
	if s.realRoot && copyMode {
		d.build(t)
		var err error
		if want, err = dirTree(d.root); err != nil {
			t.Fatal(err)
		}
	}
	d.build(t)
	beforeRoot, err := dirTree(d.root)
	if err != nil {
		t.Fatal(err)
	}
	beforeSentinel, err := dirTree(d.sentinel)
	if err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(d.root)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", s.script)
	cmd.Env = d.env(s)
	if s.cwdOutside {
		t.Chdir(d.sentinel)
	} else {
		cmd.Dir = d.root
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var got Mode
	opts := []RunOption{WithModeReport(func(m Mode) { got = m })}
	if copyMode {
		opts = append(opts, WithCopyFallback())
	}
	runErr := Run(context.Background(), f, cmd, opts...)
	wantFail := s.outside || s.realRoot && copyMode
	// The host is read-only in the command's mount namespace (which the
	// kernel checks before Landlock's EACCES).
	refusal := "Read-only file system"
	var ee *exec.ExitError
	switch {
	case wantFail && !errors.As(runErr, &ee):
		t.Errorf("Run: %v, want the command to fail (its writes outside the root refused)", runErr)
	case wantFail && !strings.Contains(stderr.String(), refusal):
		t.Errorf("the command's errors do not say %s:\n%s", refusal, stderr.String())
	case !wantFail && runErr != nil:
		t.Errorf("Run: %v\nstderr:\n%s", runErr, stderr.String())
	}
	if !got.Confined || got.LandlockABI < 1 {
		t.Errorf("mode %v: not confined", got)
	}
	if s.cwdOutside && got.Dir != got.Root {
		t.Errorf("working directory outside the root: the command ran in %s, want the root as it sees it (%s)", got.Dir, got.Root)
	}
	if copyMode && got.Kind != ModeCopy || !copyMode && got.Kind != wantKind {
		t.Errorf("mode %v, want %v", got.Kind, map[bool]ModeKind{true: ModeCopy, false: wantKind}[copyMode])
	}
	// The real disk is byte for byte as it was: root and sentinel.
	for _, c := range []struct {
		dir    string
		before tree
	}{{d.root, beforeRoot}, {d.sentinel, beforeSentinel}} {
		after, err := dirTree(c.dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := diffTrees(c.before, after, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
			t.Errorf("%s changed on disk:\n%v", c.dir, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(d.base, "leak-next-to-root")); err == nil {
		t.Errorf("the command wrote next to the root")
	}
	view, err := viewTree(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range s.skipContent {
		if w, ok := want[p]; ok {
			w.data = ""
			want[p] = w
		}
		if g, ok := view[p]; ok {
			g.data = ""
			view[p] = g
		}
	}
	if s.cwdOutside && copyMode {
		// The command printed where it ran: the copy, not the root.
		if g, ok := view["pwd.txt"]; ok && strings.HasPrefix(g.data, got.Root) {
			g.data = d.root
			view["pwd.txt"] = g
		}
	}
	if err := diffTrees(want, view, cmpOpts{}); err != nil {
		t.Errorf("the view differs from the command run on a plain copy:\n%v\nstderr:\n%s", err, stderr.String())
	}
	if s.check != nil {
		s.check(t, stdout.String())
	}
}

// TestHermeticScenarios is the scenario suite of issue 13, run as the
// current user (root on CI) and, from root, as uid 65534 through setpriv,
// in both modes. Oracle: each command on a plain copy at the same path;
// after each run the real root and a sentinel directory beside it must be
// byte for byte unchanged.
func TestHermeticScenarios(t *testing.T) {
	if work := os.Getenv(scenarioUnprivEnv); work != "" {
		if os.Geteuid() == 0 {
			t.Fatal("child runs as root")
		}
		runScenarios(t, ModeOverlayUserNS)
		return
	}
	kind := ModeOverlay
	if os.Geteuid() != 0 {
		kind = ModeOverlayUserNS
	}
	t.Run("self", func(t *testing.T) { runScenarios(t, kind) })
	t.Run("uid65534", func(t *testing.T) {
		if !longtest.On() {
			t.Skip("as uid 65534 in the long campaigns: COWFS_LONG=1 runs it (.ci/run does)")
		}
		cmd, work := unprivChild(t, "TestHermeticScenarios", 0o755)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), scenarioUnprivEnv+"="+work, "TMPDIR="+work, "HOME="+work)
		out, err := cmd.CombinedOutput()
		text := string(out)
		if err != nil {
			t.Fatalf("unprivileged child: %v\n%s", err, lastLines(text, 80))
		}
		passed, skipped := strings.Count(text, "--- PASS"), strings.Count(text, "--- SKIP")
		t.Logf("uid 65534: %d passed, %d skipped", passed, skipped)
		if skipped > 0 {
			t.Log(lastLines(text, 40))
		}
	})
}
