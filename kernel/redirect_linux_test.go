package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/cowfs/cowfs/internal/longtest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// opsEnv makes the test binary apply the fsOps its value encodes to the
// working directory with package os, and exit: a Go program that renames
// directories (os.Rename), for the rename differential.
const opsEnv = "COWFS_KERNEL_TEST_OPS"

func init() {
	s, ok := os.LookupEnv(opsEnv)
	if !ok {
		return
	}
	if err := applyOps(afero.NewOsFs(), ".", decodeOps(s)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		exit(1)
	}
	exit(0) // not os.Exit: under -race that waits a second (GORACE atexit_sleep_ms)
}

// fsOp is one step of a rename scenario: rename A B, write A (content B),
// mkdir A, rmtree A.
type fsOp struct{ op, a, b string }

func encodeOps(ops []fsOp) string {
	var parts []string
	for _, o := range ops {
		parts = append(parts, o.op+" "+o.a+" "+o.b)
	}
	return strings.Join(parts, ";")
}

func decodeOps(s string) []fsOp {
	var ops []fsOp
	for _, p := range strings.Split(s, ";") {
		f := strings.SplitN(p, " ", 3)
		ops = append(ops, fsOp{f[0], f[1], f[2]})
	}
	return ops
}

// applyOps applies ops to fsys, names relative to root.
func applyOps(fsys afero.Fs, root string, ops []fsOp) error {
	at := func(p string) string { return filepath.Join(root, p) }
	for _, o := range ops {
		var err error
		switch o.op {
		case "rename":
			err = fsys.Rename(at(o.a), at(o.b))
		case "write":
			err = afero.WriteFile(fsys, at(o.a), []byte(o.b), 0o644)
		case "mkdir":
			err = fsys.Mkdir(at(o.a), 0o755)
		case "rmtree":
			err = fsys.RemoveAll(at(o.a))
		case "remove":
			err = fsys.Remove(at(o.a))
		default:
			err = errors.New("unknown op " + o.op)
		}
		if err != nil {
			return fmt.Errorf("%s %s %s: %w", o.op, o.a, o.b, err)
		}
	}
	return nil
}

// pythonOps is ops as a python3 program (os.rename, as the report).
func pythonOps(ops []fsOp) string {
	var b strings.Builder
	b.WriteString("import os, shutil\n")
	for _, o := range ops {
		switch o.op {
		case "rename":
			fmt.Fprintf(&b, "os.rename(%q, %q)\n", o.a, o.b)
		case "write":
			fmt.Fprintf(&b, "open(%q, 'w').write(%q)\n", o.a, o.b)
		case "mkdir":
			fmt.Fprintf(&b, "os.mkdir(%q)\n", o.a)
		case "rmtree":
			fmt.Fprintf(&b, "shutil.rmtree(%q)\n", o.a)
		case "remove":
			fmt.Fprintf(&b, "os.remove(%q)\n", o.a)
		}
	}
	return b.String()
}

// shellOps is ops as a shell script of coreutils (mv -T).
func shellOps(ops []fsOp) string {
	var parts []string
	for _, o := range ops {
		switch o.op {
		case "rename":
			parts = append(parts, fmt.Sprintf("mv -T '%s' '%s'", o.a, o.b))
		case "write":
			parts = append(parts, fmt.Sprintf("printf %%s '%s' > '%s'", o.b, o.a))
		case "mkdir":
			parts = append(parts, fmt.Sprintf("mkdir '%s'", o.a))
		case "rmtree":
			parts = append(parts, fmt.Sprintf("rm -r '%s'", o.a))
		case "remove":
			parts = append(parts, fmt.Sprintf("rm '%s'", o.a))
		}
	}
	return "set -e; " + strings.Join(parts, "; ")
}

// renameCase is a rename scenario, run by the programs it names (all
// three where none: python and mv run a few cases only, to keep the test
// short, unless COWFS_LONG is set). pre are steps made before the command:
// in the layer (in-process, through the Fs) for Run, on disk for the plain
// run.
type renameCase struct {
	name     string
	ops      []fsOp
	programs []string
	pre      []fsOp
}

// renameCases rename lower directories of the scenario fixture (d1/x,
// d1/sub/y, d2/sub/z, a.txt, ...).
func renameCases() []renameCase {
	r := func(a, b string) fsOp { return fsOp{"rename", a, b} }
	all := []string{"go", "python", "mv"}
	return []renameCase{
		{"same-dir", []fsOp{r("d1/sub", "d1/sub2")}, all, nil},
		{"top", []fsOp{r("d1", "d3")}, nil, nil},
		{"then-modify", []fsOp{r("d1/sub", "d1/sub2"), {"write", "d1/sub2/y", "changed"}, {"write", "d1/sub2/n", "new"}, {"mkdir", "d1/sub2/nd", ""}, {"write", "d1/x", "x2"}}, nil, nil},
		{"twice", []fsOp{r("d1/sub", "d1/s2"), r("d1/s2", "d1/s3")}, nil, nil},
		{"into-other", []fsOp{r("d1/sub", "d2/sub/in")}, nil, nil},
		{"into-new", []fsOp{{"mkdir", "nd", ""}, r("d1", "nd/d1")}, nil, nil},
		{"over-whiteout", []fsOp{{"rmtree", "d2/sub", ""}, r("d1/sub", "d2/sub")}, nil, nil},
		// os.Rename refuses an existing directory as the target (EEXIST).
		{"over-empty-dir", []fsOp{{"remove", "d2/sub/z", ""}, r("d1/sub", "d2/sub")}, []string{"python"}, nil},
		{"swap", []fsOp{r("d1", "t"), r("d2", "d1"), r("t", "d2")}, nil, nil},
		{"child-then-parent", []fsOp{r("d1/sub", "d1/sub2"), r("d1", "d9"), r("d9/sub2", "s"), {"write", "s/y", "moved twice"}}, nil, nil},
		{"and-back", []fsOp{r("d1", "x1"), r("x1", "d1")}, nil, nil},
		{"recreate-old-name", []fsOp{r("d1/sub", "d1/sub2"), {"mkdir", "d1/sub", ""}, {"write", "d1/sub/fresh", "f"}}, nil, nil},
		// A layer that already changed the renamed directory.
		{"layer-then-rename", []fsOp{r("d1", "d3")}, nil, []fsOp{{"write", "d1/x", "layer"}, {"remove", "d1/sub/y", ""}, {"write", "d1/new", "n"}}},
		{"layer-moved-then-rename", []fsOp{r("d2", "d4"), r("d4/s0", "d4/s1")}, nil, []fsOp{r("d2/sub", "d2/s0"), {"mkdir", "d2/sub", ""}}},
	}
}

// renameUnprivEnv makes the test binary run TestRunDirectoryRename as the
// unprivileged child of its uid65534 subtest.
const renameUnprivEnv = "COWFS_KERNEL_RENAME_UNPRIV"

// TestRunDirectoryRename: a command renaming directories the root already
// has (python os.rename, Go os.Rename, mv) leaves the same tree as the
// command run directly on a plain copy at the same path (the oracle), in
// overlay mode (redirect_dir=on, the redirects imported as renames) and in
// copy mode; the in-process Fs applying the same steps leaves it too, and
// the two modes' Changes are equal. As uid 65534 (through setpriv) the
// copy mode does the same, and so does Run with WithDirRenames, which
// takes the copy there (its Changes equal the copy's), while the overlay
// mode without it, in a user namespace, fails with EXDEV as documented
// (the kernel refuses redirect_dir=on with userxattr).
func TestRunDirectoryRename(t *testing.T) {
	if _, err := landlockABI(runConfig{}); err != nil {
		t.Skip("Landlock is not available: ", err)
	}
	if os.Getenv(renameUnprivEnv) != "" {
		if os.Geteuid() == 0 {
			t.Fatal("child runs as root")
		}
		runRenames(t, []string{"copy", "renames"})
		t.Run("userns-exdev", renameUserNSRefused)
		return
	}
	if os.Geteuid() != 0 || !inInitUserNS() {
		t.Log("redirect_dir=on needs root in the initial user namespace (the kernel refuses it with userxattr): copy mode only")
		runRenames(t, []string{"copy"})
		return
	}
	needMount(t)
	t.Run("root", func(t *testing.T) { runRenames(t, []string{"overlay", "copy"}) })
	t.Run("uid65534", func(t *testing.T) {
		cmd, work := unprivChild(t, "TestRunDirectoryRename", 0o755)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), renameUnprivEnv+"=1", "TMPDIR="+work, "HOME="+work)
		out, err := cmd.CombinedOutput()
		text := string(out)
		if err != nil {
			t.Fatalf("unprivileged child: %v\n%s", err, lastLines(text, 60))
		}
		t.Logf("uid 65534: %d passed, %d skipped", strings.Count(text, "--- PASS"), strings.Count(text, "--- SKIP"))
	})
}

// renameUserNSRefused: in the overlay mode in a user namespace, Go's
// os.Rename of a lower directory fails with EXDEV (the documented limit),
// and the layer keeps nothing of the failed step.
func renameUserNSRefused(t *testing.T) {
	probe, err := overlayfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := runOverlay(context.Background(), probe, exec.Command("true"), runConfig{tempDir: os.TempDir()}); err != nil {
		t.Skip("no overlay in a user namespace here: ", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := newScenarioDirs(t, t.TempDir())
	d.build(t)
	f, err := overlayfs.New(d.root)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), opsEnv+"="+encodeOps([]fsOp{{"rename", "d1/sub", "d1/sub2"}}))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var ee *exec.ExitError
	if err := Run(context.Background(), f, cmd); !errors.As(err, &ee) || !strings.Contains(stderr.String(), "invalid cross-device link") {
		t.Errorf("Run: %v, stderr %q; want the rename to fail with EXDEV", err, stderr.String())
	}
	if cs := f.Changes(); len(cs) != 0 {
		t.Errorf("changes after the failed rename: %v", cs)
	}
}

// runRenames runs every rename case in the given modes of Run.
func runRenames(t *testing.T, modes []string) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	type program struct {
		name string
		cmd  func(ops []fsOp) *exec.Cmd
	}
	programs := []program{
		{"go", func(ops []fsOp) *exec.Cmd {
			c := exec.Command(self)
			c.Env = append(os.Environ(), opsEnv+"="+encodeOps(ops))
			return c
		}},
		{"python", func(ops []fsOp) *exec.Cmd { return exec.Command("python3", "-c", pythonOps(ops)) }},
		{"mv", func(ops []fsOp) *exec.Cmd { return exec.Command("sh", "-c", shellOps(ops)) }},
	}
	long := longtest.On()
	// The default slice: one case of each kind (a rename in place, into
	// another directory, a swap, nested renames, a layer already changed).
	short := []string{"same-dir", "then-modify", "into-other", "swap", "child-then-parent", "layer-moved-then-rename"}
	for _, c := range renameCases() {
		if !long && !slices.Contains(short, c.name) {
			continue
		}
		for _, p := range programs {
			if c.programs == nil && p.name != "go" && !long || c.programs != nil && !slices.Contains(c.programs, p.name) {
				continue
			}
			t.Run(c.name+"/"+p.name, func(t *testing.T) {
				if p.name == "python" {
					if _, err := exec.LookPath("python3"); err != nil {
						t.Skip("python3 is not installed")
					}
				}
				d := newScenarioDirs(t, t.TempDir())
				d.build(t)
				if err := applyOps(afero.NewOsFs(), d.root, c.pre); err != nil {
					t.Fatal(err)
				}
				oc := p.cmd(c.ops)
				oc.Dir = d.root
				if out, err := oc.CombinedOutput(); err != nil {
					t.Fatalf("plain run: %v\n%s", err, out)
				}
				want, err := dirTree(d.root)
				if err != nil {
					t.Fatal(err)
				}
				if p.name == "go" {
					// The in-process Fs, the same steps.
					d.build(t)
					f, err := overlayfs.New(d.root)
					if err != nil {
						t.Fatal(err)
					}
					if err := applyOps(f, d.root, append(slices.Clone(c.pre), c.ops...)); err != nil {
						t.Fatalf("in-process: %v", err)
					}
					checkView(t, "in-process Fs", f, want)
				}
				changes := map[string]string{}
				for _, mode := range modes {
					d.build(t)
					before, err := dirTree(d.root)
					if err != nil {
						t.Fatal(err)
					}
					f, err := overlayfs.New(d.root)
					if err != nil {
						t.Fatal(err)
					}
					if err := applyOps(f, d.root, c.pre); err != nil {
						t.Fatal(err)
					}
					cmd := p.cmd(c.ops)
					cmd.Dir = d.root
					var stderr bytes.Buffer
					cmd.Stderr = &stderr
					var got Mode
					opts := []RunOption{WithModeReport(func(m Mode) { got = m })}
					wantKind := map[string]ModeKind{"overlay": ModeOverlay, "copy": ModeCopy}[mode]
					switch mode {
					case "copy":
						opts = append(opts, WithCopyFallback())
					case "renames":
						opts = append(opts, WithDirRenames())
						wantKind = ModeOverlay
						if overlayUserXattr(runConfig{}) {
							wantKind = ModeCopy
						}
					}
					if err := Run(context.Background(), f, cmd, opts...); err != nil {
						t.Errorf("%s: Run: %v\n%s", mode, err, stderr.String())
						continue
					}
					if got.Kind != wantKind {
						t.Errorf("%s: ran as %v, want %v", mode, got.Kind, wantKind)
					}
					if mode == "renames" && wantKind == ModeCopy && got.Fallback != noRedirectFallback {
						t.Errorf("%s: Mode.Fallback %q, want %q", mode, got.Fallback, noRedirectFallback)
					}
					checkView(t, mode, f, want)
					changes[mode] = fmt.Sprint(f.Changes())
					after, err := dirTree(d.root)
					if err != nil {
						t.Fatal(err)
					}
					if err := diffTrees(before, after, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
						t.Errorf("%s: the real root changed:\n%v", mode, err)
					}
				}
				for _, mode := range modes[1:] {
					if changes[mode] != changes[modes[0]] {
						t.Errorf("the modes' Changes differ:\n%s: %s\n%s: %s", modes[0], changes[modes[0]], mode, changes[mode])
					}
				}
			})
		}
	}
}

func checkView(t *testing.T, what string, f *overlayfs.Fs, want tree) {
	t.Helper()
	view, err := viewTree(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := diffTrees(want, view, cmpOpts{owners: true}); err != nil {
		t.Errorf("%s: the view differs from the plain run:\n%v", what, err)
	}
}
