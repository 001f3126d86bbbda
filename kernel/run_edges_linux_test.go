package kernel

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cowfs/cowfs/internal/longtest"
	"github.com/spf13/afero"
)

// TestRunPassedFilesStayReadOnly: a confined command given
// descriptors opened read-only (as extra files) on a file of the real root
// and on one outside every writable path may read them, but reopening them
// for writing by /proc/self/fd/N must fail as any other write there does:
// confineSelf grants write rights on every regular file passed, whatever
// the descriptor's access mode, so the command wrote the real root (under
// the overlay, unseen by the layer) and the outside file. Oracle: the disk
// around the root, as os sees it, before and after.
func TestRunPassedFilesStayReadOnly(t *testing.T) {
	needLandlock(t)
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			base, root, out := rootBesideOutside(t)
			for _, p := range []string{filepath.Join(root, "in.txt"), filepath.Join(out, "out.txt")} {
				if err := os.WriteFile(p, []byte("keep\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before, err := dirTree(base)
			if err != nil {
				t.Fatal(err)
			}
			in, err := os.Open(filepath.Join(root, "in.txt"))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			outF, err := os.Open(filepath.Join(out, "out.txt"))
			if err != nil {
				t.Fatal(err)
			}
			defer outF.Close()
			f := newOverlay(t, root)
			cmd := exec.Command("sh", "-c", `cat <&3 >/dev/null; echo pwned >> /proc/self/fd/3; echo pwned >> /proc/self/fd/4; true`)
			cmd.Dir, cmd.ExtraFiles = root, []*os.File{in, outF}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := mode.run(context.Background(), f, cmd); err != nil {
				t.Logf("Run: %v\n%s", err, stderr.String())
			}
			after, err := dirTree(base)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffTrees(before, after, cmpOpts{times: true, owners: true}); err != nil {
				t.Errorf("a write through a read-only descriptor reached the disk:\n%v", err)
			}
		})
	}
}

// unreadableLinkEnv makes the test binary run TestRunUnreadableLinkChild;
// its value is a work directory the child owns.
const unreadableLinkEnv = "COWFS_KERNEL_REVIEW_LINK"

// reviewLinkScript leaves a file its own user cannot read under two hard
// links.
const reviewLinkScript = `echo s > a && ln a b && chmod 0 a`

// TestRunUnreadableHardLink runs, as uid 65534, a command that leaves
// an unreadable file under two names. makeReadable gives the owner read
// permission on the first name it meets and records its mode; the second
// name is the same inode, now readable, so nothing is recorded for it and
// it is imported with the mode makeReadable gave it (0400) instead of the
// one the command left (0). Oracle: the same command by os/exec on a plain
// copy, modes read before any is given back.
func TestRunUnreadableHardLink(t *testing.T) {
	runUnprivChild(t, "TestRunUnreadableLinkChild", unreadableLinkEnv)
}

func TestRunUnreadableLinkChild(t *testing.T) {
	work := os.Getenv(unreadableLinkEnv)
	if work == "" {
		t.Skip("runs as a child of TestRunUnreadableHardLink")
	}
	unreadableAgainstPlain(t, work, reviewLinkScript, []string{"a", "b"})
}

// TestRunDirNotADirectoryLikeOS: a cmd.Dir that cannot be entered
// fails as os/exec fails, in every mode. os/exec stats Dir before the fork
// (only when SysProcAttr is nil): a Dir it cannot stat (missing, dangling
// symlink, a file on the way, a parent it cannot search) gives "chdir DIR:
// ERR"; one it can stat but the child cannot enter (a regular file, a
// directory without search permission) gives "fork/exec PROG: ERR". Run's
// hook used to report every chdir failure as "chdir DIR", and the copy
// modes named the test binary instead of the program. Oracle: os/exec on
// a plain copy of the view (the view's paths put back in its message).
// As root the search-permission cases succeed, for os/exec as for Run; they
// fail for real in TestRunDirUnprivileged.
func TestRunDirNotADirectoryLikeOS(t *testing.T) {
	if !longtest.On() {
		t.Skip("a long campaign: COWFS_LONG=1 runs it (.ci/run does)")
	}
	runDirCases(t)
}

// reviewDirEnv makes the test binary run TestRunDirUnprivilegedChild;
// its value is a work directory the child owns.
const reviewDirEnv = "COWFS_KERNEL_REVIEW_DIR"

// TestRunDirUnprivileged runs the cases of TestRunDirNotADirectoryLikeOS
// as uid 65534, where a directory without search permission stops os/exec.
// The hook runs as uid 0 of a user namespace, whose capabilities let it
// enter a directory of the caller's that the caller cannot.
func TestRunDirUnprivileged(t *testing.T) {
	if !longtest.On() {
		t.Skip("a long campaign: COWFS_LONG=1 runs it (.ci/run does)")
	}
	if os.Geteuid() != 0 {
		t.Skip("TestRunDirNotADirectoryLikeOS runs the cases unprivileged already")
	}
	cmd, work := unprivChild(t, "TestRunDirUnprivilegedChild", 0o755)
	cmd.Env = append(os.Environ(), reviewDirEnv+"="+work, "TMPDIR="+work)
	out, err := cmd.CombinedOutput()
	text := string(out)
	switch {
	case err != nil:
		t.Fatalf("child: %v\n%s", err, lastLines(text, 60))
	case strings.Contains(text, "--- SKIP"):
		t.Log("child skipped some: ", lastLines(text, 40))
	}
}

func TestRunDirUnprivilegedChild(t *testing.T) {
	if os.Getenv(reviewDirEnv) == "" {
		t.Skip("runs as a child of TestRunDirUnprivileged")
	}
	runDirCases(t)
}

// dirCase is a cmd.Dir: in, a path in the tree (the root, or the plain
// copy for os/exec), or out, one beside it; relative passes in as a
// relative Dir from the tree; attr sets SysProcAttr.
type dirCase struct {
	name, in, out  string
	relative, attr bool
}

var dirCases = []dirCase{
	{name: "dir", in: "d"},
	{name: "file", in: "f"},
	{name: "missing", in: "missing"},
	{name: "under-file", in: "f/sub"},
	{name: "dangling-symlink", in: "dangling"},
	{name: "symlink-to-file", in: "lf"},
	{name: "symlink-loop", in: "loop"},
	{name: "layer-file-over-dir", in: "ld"},
	{name: "layer-dir-over-file", in: "lfile"},
	{name: "layer-removed", in: "gone"},
	{name: "not-searchable", in: "ns"},
	{name: "not-searchable-outside", out: "ns"},
	{name: "parent-not-searchable-outside", out: "locked/sub"},
	{name: "relative-file", in: "f", relative: true},
	{name: "relative-missing", in: "missing", relative: true},
	{name: "attr-missing", in: "missing", attr: true},
	{name: "attr-file", in: "f", attr: true},
	{name: "attr-dangling-symlink", in: "dangling", attr: true},
}

// dirTreeFixture makes the tree of dirCases under dir, and what lies
// beside it under out when out is not empty.
func dirTreeFixture(t *testing.T, dir, out string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"d", "ld", "gone", "ns"} {
		must(os.Mkdir(filepath.Join(dir, d), 0o755))
	}
	for _, p := range []string{"f", "lfile"} {
		must(os.WriteFile(filepath.Join(dir, p), []byte("x\n"), 0o644))
	}
	must(os.Symlink("nowhere", filepath.Join(dir, "dangling")))
	must(os.Symlink("f", filepath.Join(dir, "lf")))
	must(os.Symlink("loop", filepath.Join(dir, "loop")))
	must(os.Chmod(filepath.Join(dir, "ns"), 0o600)) // readable (it can be copied), not searchable
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "ns"), 0o755) })
	if out == "" {
		return
	}
	must(os.MkdirAll(filepath.Join(out, "locked", "sub"), 0o755))
	must(os.Mkdir(filepath.Join(out, "ns"), 0o755))
	for _, d := range []string{"locked", "ns"} {
		must(os.Chmod(filepath.Join(out, d), 0o600))
		t.Cleanup(func() { os.Chmod(filepath.Join(out, d), 0o755) })
	}
}

// dirLayer changes the tree at dir through fsys as the layer does: ld
// becomes a file, lfile a directory, gone goes.
func dirLayer(fsys afero.Fs, dir string) error {
	for _, p := range []string{"ld", "lfile", "gone"} {
		if err := fsys.RemoveAll(filepath.Join(dir, p)); err != nil {
			return err
		}
	}
	if err := afero.WriteFile(fsys, filepath.Join(dir, "ld"), []byte("layer\n"), 0o644); err != nil {
		return err
	}
	return fsys.Mkdir(filepath.Join(dir, "lfile"), 0o755)
}

func runDirCases(t *testing.T) {
	prog, err := exec.LookPath("true")
	if err != nil {
		t.Skip(err)
	}
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			// Not mode.require: it mounts as the caller, where an
			// unprivileged caller can mount in a user namespace. A mode
			// that cannot mount says so (a *mountFailed) and is skipped.
			for _, tc := range dirCases {
				t.Run(tc.name, func(t *testing.T) {
					base := t.TempDir()
					root, plain, out := filepath.Join(base, "root"), filepath.Join(base, "plain"), filepath.Join(base, "out")
					for _, d := range []string{root, plain, out} {
						if err := os.Mkdir(d, 0o755); err != nil {
							t.Fatal(err)
						}
					}
					dirTreeFixture(t, root, out)
					dirTreeFixture(t, plain, "")
					f := newOverlay(t, root)
					if err := dirLayer(f, root); err != nil {
						t.Fatal(err)
					}
					if err := dirLayer(afero.NewOsFs(), plain); err != nil {
						t.Fatal(err)
					}
					dirIn := func(tree string) string {
						switch {
						case tc.out != "":
							return filepath.Join(out, tc.out)
						case tc.relative:
							t.Chdir(tree)
							return tc.in
						}
						return filepath.Join(tree, tc.in)
					}
					command := func(tree string) *exec.Cmd {
						c := exec.Command(prog)
						c.Dir = dirIn(tree)
						if tc.attr {
							c.SysProcAttr = &syscall.SysProcAttr{}
						}
						return c
					}
					want := command(plain).Run()
					got := mode.run(context.Background(), f, command(root))
					if errors.As(got, new(*mountFailed)) {
						t.Skip("no overlay here: ", got)
					}
					switch {
					case want == nil && got == nil:
					case want == nil || got == nil,
						got.Error() != strings.ReplaceAll(want.Error(), plain, root),
						!errors.Is(got, errors.Unwrap(want)):
						t.Errorf("Run: %v, want %v as os/exec gives on a plain copy", got, want)
					}
				})
			}
		})
	}
}
