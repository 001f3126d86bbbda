package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/cowfs/cowfs/internal/longtest"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// twin is a root with an overlay on it and, as the oracle, a plain
// directory holding the same tree with the same changes made by os.
type twin struct {
	root, plain string
	f           *overlayfs.Fs
}

// newTwin builds writeTree twice, then applies setup to the overlay and,
// through afero.OsFs, to the plain copy, each given its own root.
func newTwin(t *testing.T, setup func(fsys afero.Fs, root string) error) *twin {
	t.Helper()
	tw := &twin{root: t.TempDir(), plain: t.TempDir()}
	writeTree(t, tw.root)
	writeTree(t, tw.plain)
	tw.f = newOverlay(t, tw.root)
	if setup != nil {
		if err := setup(tw.f, tw.root); err != nil {
			t.Fatalf("setup on the overlay: %v", err)
		}
		if err := setup(afero.NewOsFs(), tw.plain); err != nil {
			t.Fatalf("setup on the plain copy: %v", err)
		}
	}
	return tw
}

// commands returns the command for the overlay and the same for the plain
// copy, each told its root in $0 and run in rel below it ("" for the root).
// The plain one gets COWFS_ROOT as Run gives it (the root as the command
// sees it).
func (tw *twin) commands(script, rel string) (ov, plain *exec.Cmd) {
	ov = exec.Command("sh", "-c", script, tw.root)
	plain = exec.Command("sh", "-c", script, tw.plain)
	plain.Env = append(os.Environ(), RootEnv+"="+tw.plain)
	ov.Dir, plain.Dir = filepath.Join(tw.root, rel), filepath.Join(tw.plain, rel)
	return ov, plain
}

// check compares the overlay's view with the plain copy (types, modes,
// contents, targets; times and owners when o says so).
func (tw *twin) check(t *testing.T, o cmpOpts) {
	t.Helper()
	want, err := dirTree(tw.plain)
	if err != nil {
		t.Fatal(err)
	}
	got, err := viewTree(tw.f)
	if err != nil {
		t.Fatal(err)
	}
	if err := diffTrees(want, got, o); err != nil {
		t.Errorf("the view after Run differs from os on a plain copy:\n%v", err)
	}
}

// TestRunDirOnlyInLayer runs a command in a directory that only the layer
// holds (the supervisors used to start in it on the real file system and
// failed naming the test binary), and in one that the layer deleted: the
// same outcome as the command run by os/exec on a plain copy.
func TestRunDirOnlyInLayer(t *testing.T) {
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			tw := newTwin(t, func(fsys afero.Fs, root string) error {
				if err := fsys.MkdirAll(filepath.Join(root, "new/sub"), 0o755); err != nil {
					return err
				}
				if err := afero.WriteFile(fsys, filepath.Join(root, "new/sub/in"), []byte("layer only\n"), 0o644); err != nil {
					return err
				}
				return fsys.RemoveAll(filepath.Join(root, "d/e"))
			})
			const script = `cat in; echo made > out; pwd | sed "s|^$COWFS_ROOT|ROOT|"`
			cmd, plain := tw.commands(script, "new/sub")
			var got, want bytes.Buffer
			cmd.Stdout, cmd.Stderr, plain.Stdout, plain.Stderr = &got, &got, &want, &want
			var m Mode
			if err := mode.run(context.Background(), tw.f, cmd, WithModeReport(func(r Mode) { m = r })); err != nil {
				t.Fatalf("Run in a directory only the layer holds: %v\n%s", err, got.String())
			}
			if err := plain.Run(); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("output %q, os on a plain copy %q", got.String(), want.String())
			}
			if strings.HasPrefix(mode.name, "overlay") && m.Kind == ModeCopy {
				t.Errorf("ran as %v, want an overlay (no fallback)", m)
			}
			tw.check(t, cmpOpts{})

			// Deleted in the layer, present on disk: os/exec's chdir failure,
			// naming the directory as given, and nothing runs.
			marker := filepath.Join(t.TempDir(), "ran")
			cmd, plain = tw.commands(`touch "$1"`, "d/e")
			cmd.Args, plain.Args = append(cmd.Args, marker), append(plain.Args, marker)
			wantErr := plain.Run()
			err := mode.run(context.Background(), tw.f, cmd, WithWritable(filepath.Dir(marker)))
			var pe *fs.PathError
			if !errors.As(err, &pe) || pe.Op != "chdir" || pe.Path != cmd.Dir || !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Run in a directory the layer deleted: %v (%T), want %q as os/exec says for the plain copy", err, err,
					strings.ReplaceAll(wantErr.Error(), tw.plain, tw.root))
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the command ran in a directory the layer deleted")
			}
			tw.check(t, cmpOpts{})
		})
	}
}

// TestRunStartFailureLikeOS: a program Run cannot start fails as os/exec
// says it (one *fs.PathError, "fork/exec PATH: reason", each thing once),
// in every mode; the hook used to repeat the errno's text.
func TestRunStartFailureLikeOS(t *testing.T) {
	dir := t.TempDir()
	for name, perm := range map[string]os.FileMode{"not-executable": 0o644, "no-interpreter": 0o755} {
		body := "echo hi\n"
		if name == "no-interpreter" {
			body = "#!/nonexistent/interpreter\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), perm); err != nil {
			t.Fatal(err)
		}
	}
	progs := []string{filepath.Join(dir, "missing"), filepath.Join(dir, "not-executable"), filepath.Join(dir, "no-interpreter"), dir}
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			f := newOverlay(t, t.TempDir())
			for _, prog := range progs {
				want := exec.Command(prog).Run()
				err := mode.run(context.Background(), f, exec.Command(prog))
				var pe *fs.PathError
				if err == nil || want == nil || err.Error() != want.Error() || !errors.As(err, &pe) || !errors.Is(err, errors.Unwrap(want)) {
					t.Errorf("%s: %v (%T), want %v as os/exec gives", filepath.Base(prog), err, err, want)
				}
			}
			if len(f.Changes()) != 0 {
				t.Errorf("changes after failed starts: %q", changeStrings(f))
			}
		})
	}
}

// TestRunUnconfinedOverlayRealRoot: without Landlock (or with Unconfined)
// a command in the overlay modes is root of its mount namespace and can
// unmount the overlay and write the real root beneath it. Run used to
// import that run as if nothing happened; now it checks the real root as
// the copy fallback does and refuses to import, naming the paths.
func TestRunUnconfinedOverlayRealRoot(t *testing.T) {
	for _, how := range []string{"no Landlock", "Unconfined"} {
		for _, mode := range runModes()[:2] {
			t.Run(how+"/"+mode.name, func(t *testing.T) {
				mode.require(t)
				var opts []RunOption
				if how == "Unconfined" {
					opts = append(opts, Unconfined())
				} else {
					t.Setenv(NoLandlockEnv, "1")
				}
				root := t.TempDir()
				writeTree(t, root)
				f := newOverlay(t, root)
				if err := afero.WriteFile(f, filepath.Join(root, "layer-only"), []byte("kept"), 0o644); err != nil {
					t.Fatal(err)
				}
				before := changeStrings(f)
				cmd := exec.Command("sh", "-c", `echo in > "$0/in-overlay"; cd /; umount "$0" || exit 3; echo out > "$0/escaped"`, root)
				err := mode.run(context.Background(), f, cmd, opts...)
				if _, serr := os.Stat(filepath.Join(root, "escaped")); serr != nil {
					t.Skipf("the command could not reach the real root here (%v): nothing to detect", err)
				}
				if !errors.Is(err, overlayfs.ErrConflict) || !strings.Contains(err.Error(), "escaped") {
					t.Errorf("Run after the command wrote the real root: %v, want ErrConflict naming escaped", err)
				}
				if got := changeStrings(f); !slices.Equal(got, before) {
					t.Errorf("layer after a refused run: %q, want %q", got, before)
				}
			})
		}
	}
	// Confined, the same command cannot unmount: nothing escapes.
	needLandlock(t)
	for _, mode := range runModes()[:2] {
		t.Run("confined/"+mode.name, func(t *testing.T) {
			mode.require(t)
			root := t.TempDir()
			writeTree(t, root)
			f := newOverlay(t, root)
			cmd := exec.Command("sh", "-c", `cd /; umount "$0" && echo out > "$0/escaped"; umount -l "$0" && echo out > "$0/escaped"; exit 0`, root)
			if err := mode.run(context.Background(), f, cmd); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(root, "escaped")); err == nil {
				t.Error("a confined command unmounted the overlay and wrote the real root")
			}
			if got := changeStrings(f); len(got) != 0 {
				t.Errorf("changes %q", got)
			}
		})
	}
}

// TestRunCopyRealRootMetadata: Landlock does not govern chmod, chown,
// utimes or xattrs, so a confined command in the copy fallback used to
// change the real root's metadata by its host path (Run then refused the
// run, but the real root was changed). The real root is now read-only in
// the command's mount namespace. Oracle: the real root's tree (modes,
// owners, times, contents) and its xattrs, before and after.
func TestRunCopyRealRootMetadata(t *testing.T) {
	needLandlock(t)
	for _, mode := range runModes() {
		if !strings.Contains(mode.name, "copy") {
			continue
		}
		t.Run(mode.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root)
			before, err := dirTree(root)
			if err != nil {
				t.Fatal(err)
			}
			f := newOverlay(t, root)
			var out bytes.Buffer
			cmd := exec.Command("sh", "-c", `for p in "$0" "$0/a" "$0/d/e"; do
	chmod 700 "$p"; touch -d 2001-01-01 "$p"; chown -h 65534 "$p"
	setfattr -n user.cowfs -v x "$p" 2>/dev/null || python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.cowfs", b"x")' "$p"
done; echo in-copy > new; exit 0`, root)
			cmd.Dir, cmd.Stdout, cmd.Stderr = root, &out, &out
			if err := mode.run(context.Background(), f, cmd); err != nil {
				t.Fatalf("Run: %v\n%s", err, out.String())
			}
			after, err := dirTree(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffTrees(before, after, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
				t.Errorf("the real root's metadata changed:\n%v\ncommand output:\n%s", err, out.String())
			}
			for _, p := range []string{root, filepath.Join(root, "a"), filepath.Join(root, "d/e")} {
				if n, err := unix.Lgetxattr(p, "user.cowfs", make([]byte, 8)); err == nil {
					t.Errorf("%s got an xattr (%d bytes)", p, n)
				}
			}
			if got := changeStrings(f); !slices.Equal(got, []string{"A new"}) {
				t.Errorf("changes %q", got)
			}
		})
	}
}

// TestRunOddFilesLikeOS: what a command leaves with odd names (a newline,
// a backslash, bytes that are not UTF-8, a leading dash, 255 bytes),
// odd modes (0, 7777), in a setgid directory, sparse, hard-linked, a FIFO
// and a dangling symlink, and the root's own mode, is imported as os
// leaves it on a plain copy (the copy fallback used to drop the root's
// mode). A
// name that is not UTF-8 used to fail the whole import (PutEntry took
// fs.ValidPath's rule), throwing the run away.
func TestRunOddFilesLikeOS(t *testing.T) {
	const script = `set -e
echo 1 > "$(printf 'new\nline')"; echo 2 > 'back\slash'; echo 3 > "$(printf 'bad\377utf')"; echo 4 > -dash
echo 5 > "$(head -c 255 /dev/zero | tr '\0' n)"
mkdir "$(printf 'dir\376')" && echo in > "$(printf 'dir\376')/$(printf '\375')"
echo 6 > m0; chmod 0 m0; echo 7 > m7; chmod 7777 m7
mkdir sg; chmod 2775 sg; mkdir sg/sub; echo x > sg/f
truncate -s 3M sparse; printf x | dd of=sparse bs=1 seek=2000000 conv=notrunc 2>/dev/null
echo h > h1; ln h1 h2; ln d/b d/b-link
mkdir d0; echo in > d0/in; chmod 0 d0
mkfifo fifo; ln -s /nowhere dangling; chmod 0750 .`
	const again = `set -e
cat "$(printf 'bad\377utf')" > copied; mv "$(printf 'dir\376')" "$(printf 'moved\373')"; rm -- -dash`
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			tw := newTwin(t, nil)
			cmd, plain := tw.commands(script, "")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := mode.run(context.Background(), tw.f, cmd); err != nil {
				t.Fatalf("Run: %v\n%s", err, stderr.String())
			}
			if out, err := plain.CombinedOutput(); err != nil {
				t.Fatalf("the plain run: %v\n%s", err, out)
			}
			tw.check(t, cmpOpts{owners: true})
			// A second run starts from a layer holding those names
			// (Materialize refused names that are not UTF-8).
			cmd, plain = tw.commands(again, "")
			cmd.Stderr = &stderr
			if err := mode.run(context.Background(), tw.f, cmd); err != nil {
				t.Fatalf("second Run: %v\n%s", err, stderr.String())
			}
			if out, err := plain.CombinedOutput(); err != nil {
				t.Fatalf("the second plain run: %v\n%s", err, out)
			}
			tw.check(t, cmpOpts{owners: true})
		})
	}
}

// TestRunFailedCommandKeepsWrites: a command that exits non-zero or dies
// of a signal keeps what it wrote before (as on a plain copy), and a
// cancelled one what it wrote before the cancel.
func TestRunFailedCommandKeepsWrites(t *testing.T) {
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			for _, end := range []string{"exit 3", "kill -TERM $$", "kill -KILL $$"} {
				tw := newTwin(t, nil)
				script := `echo before > before; rm a; mkdir -p d/new && echo deep > d/new/f; ` + end
				cmd, plain := tw.commands(script, "")
				err := mode.run(context.Background(), tw.f, cmd)
				want := plain.Run()
				if err == nil || want == nil || err.Error() != want.Error() {
					t.Errorf("%s: %v, want %v as os/exec gives", end, err, want)
				}
				tw.check(t, cmpOpts{owners: true})
			}
			root := t.TempDir()
			f := newOverlay(t, root)
			ready := filepath.Join(t.TempDir(), "ready")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				for i := 0; i < 6000; i++ {
					if _, err := os.Stat(ready); err == nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				cancel()
			}()
			cmd := exec.Command("sh", "-c", `echo before > before; touch "$0"; while :; do echo x >> growing; done`, ready)
			cmd.Dir = root
			err := mode.run(ctx, f, cmd, WithWritable(filepath.Dir(ready)))
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Errorf("cancelled: %v, want the command killed", err)
			}
			if b, err := afero.ReadFile(f, filepath.Join(root, "before")); err != nil || string(b) != "before\n" {
				t.Errorf("what the command wrote before the cancel: %q, %v", b, err)
			}
		})
	}
}

// TestRunEscapesConfined tries, in every mode, the ways out of the root a
// confined command might take. Each attempt must fail inside the command,
// and nothing may change outside the layer: oracle, the whole base
// directory (the real root, a directory beside it, the base itself) as
// os sees it, times and owners included, before and after. A file hard
// linked into the root from outside beforehand may be written: the write
// lands in the layer, and the outside file stays as it was.
func TestRunEscapesConfined(t *testing.T) {
	needLandlock(t)
	attempts := []string{
		`echo x > out/leak`,                            // absolute symlink in the root
		`echo x > rel-out/leak`,                        // relative symlink in the root
		`echo x > "/proc/self/root$OUT/leak"`,          // /proc/self/root
		`echo x > /proc/self/cwd/../leak-next`,         // /proc/self/cwd, then ..
		`echo x > ../leak-next`,                        // .. from the root
		`cd .. && echo x > leak-next`,                  // cd .. from the root
		`exec 3<"$OUT"; echo x > /proc/self/fd/3/leak`, // a descriptor opened outside
		`ln "$OUT/keep.txt" hl && echo pwned >> hl`,    // hard link made to an outside file
		`mv a "$OUT/"`,                                 // rename a root file outside
		`mv "$OUT/keep.txt" moved-in`,                  // rename an outside file in
		`rm "$OUT/keep.txt"`,
		`truncate -s 0 "$OUT/keep.txt"`,
		`mkfifo "$OUT/fifo"`,
		`ln -s x "$OUT/sym"`,
		`mount -t tmpfs none "$OUT"`, // mounts: Landlock refuses them all
		`mount --bind . "$OUT"`,
		`umount "$COWFS_ROOT"`,
	}
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			base, root, out := rootBesideOutside(t)
			writeTree(t, root)
			if err := os.WriteFile(filepath.Join(out, "keep.txt"), []byte("keep\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(filepath.Join(out, "keep.txt"), filepath.Join(root, "hl-pre")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(out, filepath.Join(root, "out")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../outside", filepath.Join(root, "rel-out")); err != nil {
				t.Fatal(err)
			}
			before, err := dirTree(base)
			if err != nil {
				t.Fatal(err)
			}
			f := newOverlay(t, root)
			for _, a := range attempts {
				cmd := exec.Command("sh", "-c", a)
				cmd.Dir = root
				cmd.Env = append(os.Environ(), "OUT="+out)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := mode.run(context.Background(), f, cmd)
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Errorf("%s: Run %v, want the command to fail\n%s", a, err, stderr.String())
				}
				got := changeStrings(f)
				if strings.HasPrefix(a, `mv "$OUT`) && slices.Equal(got, []string{"A moved-in"}) {
					// mv copies across what it cannot rename, then fails
					// to remove the source: the copy in the root is the
					// command's to keep.
					got = nil
				}
				if len(got) != 0 {
					t.Errorf("%s: changes %q", a, got)
				}
				if len(f.Changes()) != 0 {
					f.Reset()
				}
			}
			cmd := exec.Command("sh", "-c", `echo pwned >> hl-pre`)
			cmd.Dir = root
			if err := mode.run(context.Background(), f, cmd); err != nil {
				t.Errorf("writing a file hard linked from outside: %v", err)
			}
			if b, err := afero.ReadFile(f, filepath.Join(root, "hl-pre")); err != nil || string(b) != "keep\npwned\n" {
				t.Errorf("hl-pre in the view: %q, %v", b, err)
			}
			after, err := dirTree(base)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffTrees(before, after, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
				t.Errorf("the disk changed:\n%v", err)
			}
		})
	}
}

// zombies lists this process's children that are zombies.
func zombies() []string {
	var out []string
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(os.Getpid()) {
			out = append(out, p)
		}
	}
	return out
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestRunManyLeaveNothing runs many commands that end in every way (done,
// failed, killed, left a daemon behind, timed out, cancelled before the
// start, could not start, a bad working directory, refused options) in
// every mode, then checks against the system itself: no overlay of them
// mounted in any mount namespace (every /proc/PID/mountinfo), nothing
// left in the temporary directory, no process carrying the marker, no
// zombie child, no descriptor more than before.
func TestRunManyLeaveNothing(t *testing.T) {
	if !longtest.On() {
		t.Skip("a long campaign: COWFS_LONG=1 runs it (.ci/run does)")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	marker := newMarker(t)
	type run struct {
		name   string
		script string
		ctx    func() (context.Context, context.CancelFunc)
		dir    string // relative to the root
		opts   []RunOption
	}
	bg := context.Background
	timeout := func() (context.Context, context.CancelFunc) { return context.WithTimeout(bg(), 150*time.Millisecond) }
	cancelled := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(bg())
		cancel()
		return ctx, cancel
	}
	runs := []run{
		{name: "ok", script: `echo x > f`},
		{name: "exit", script: `echo x > f; exit 4`},
		{name: "killed", script: `echo x > f; kill -KILL $$`},
		{name: "daemon", script: `(setsid sh -c 'sleep 300' "$0-daemon" &); sleep 300 & echo x > f`},
		{name: "timeout", script: `sh -c 'sleep 300' "$0-child" & sleep 300`, ctx: timeout},
		{name: "cancelled", script: `echo x > f`, ctx: cancelled},
		{name: "missing", script: "\x00missing"},
		{name: "bad-dir", script: `echo x > f`, dir: "no/such/dir"},
		{name: "refused", script: `echo x > f`, opts: []RunOption{WithWritable("/no/such/path")}},
	}
	noMount := canMount(t)
	before := openFDs(t)
	for _, mode := range runModes() {
		if strings.HasPrefix(mode.name, "overlay") && noMount != "" {
			t.Logf("%s skipped: %s", mode.name, noMount)
			continue
		}
		for i := 0; i < 3; i++ {
			for _, r := range runs {
				root := t.TempDir()
				f := newOverlay(t, root)
				var cmd *exec.Cmd
				if strings.HasPrefix(r.script, "\x00") {
					cmd = exec.Command(filepath.Join(root, "missing"))
				} else {
					cmd = exec.Command("sh", "-c", r.script, marker)
				}
				cmd.Env = append(os.Environ(), "COWFS_TEST_MARKER="+marker)
				cmd.Dir = filepath.Join(root, r.dir)
				ctx, cancel := bg(), context.CancelFunc(func() {})
				if r.ctx != nil {
					ctx, cancel = r.ctx()
				}
				err := mode.run(ctx, f, cmd, r.opts...)
				cancel()
				if (err == nil) != (r.name == "ok" || r.name == "daemon") {
					t.Errorf("%s/%s: Run %v", mode.name, r.name, err)
				}
			}
		}
	}
	waitNoMarker(t, marker, 0)
	if left := overlaysUnder(tmp); len(left) > 0 {
		t.Errorf("overlays still mounted:\n%s", strings.Join(left, "\n"))
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("left in the temporary directory: %q", names)
	}
	if z := zombies(); len(z) > 0 {
		t.Errorf("zombie children: %q", z)
	}
	if after := openFDs(t); after > before {
		t.Errorf("%d descriptors open after the runs, %d before", after, before)
	}
}

// TestRunBackgroundWritesAfterExit: a child the command leaves behind,
// which writes after the command exited, is killed before it can: its
// write reaches neither the layer, nor the real root, nor a writable
// directory outside (the proof that it did not write somewhere unseen),
// also well after Run returned; and Run does not wait for it.
func TestRunBackgroundWritesAfterExit(t *testing.T) {
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			root := t.TempDir()
			f := newOverlay(t, root)
			seen := t.TempDir()
			cmd := exec.Command("sh", "-c", `(sleep 0.3; echo late > late; echo late > "$0/late") &
(setsid sh -c 'sleep 0.3; echo late > late-daemon; echo late > "$0/late-daemon"' "$0" &)
echo x > out`, seen)
			cmd.Dir = root
			start := time.Now()
			if err := mode.run(context.Background(), f, cmd, WithWritable(seen)); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Run took %v: it waited for the background children", d)
			}
			time.Sleep(600 * time.Millisecond)
			if got := changeStrings(f); !slices.Equal(got, []string{"A out"}) {
				t.Errorf("changes %q, want only the command's own", got)
			}
			for _, p := range []string{filepath.Join(root, "late"), filepath.Join(root, "late-daemon"), filepath.Join(seen, "late"), filepath.Join(seen, "late-daemon")} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("a background child wrote %s after the command exited", p)
				}
			}
		})
	}
}

// rootBesideOutside makes base/root and base/outside in a new temporary
// directory base.
func rootBesideOutside(t *testing.T) (base, root, out string) {
	base = t.TempDir()
	root, out = filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return base, root, out
}

// unreadableEnv makes the test binary run TestRunUnreadableChild; its
// value is a work directory the child owns.
const unreadableEnv = "COWFS_KERNEL_UNREADABLE"

// unreadableScript leaves a directory, a file and a write-only directory
// that their own user cannot read, and the root itself unreadable last.
const unreadableScript = `echo s > m0 && chmod 0 m0 && mkdir locked && echo f > locked/f && chmod 0 locked &&
mkdir wo && echo x > wo/x && chmod 0300 wo && echo ok > ok && chmod 0 .`

// TestRunUnreadable runs, as uid 65534 with no capabilities, a command
// that leaves files and directories its own user cannot read (and makes
// the root unreadable). The import used to fail on the first one and
// throw the whole run away; now everything is imported with the modes the
// command left. Oracle: the same command run by os/exec on a plain copy.
func TestRunUnreadable(t *testing.T) {
	runUnprivChild(t, "TestRunUnreadableChild", unreadableEnv)
}

func TestRunUnreadableChild(t *testing.T) {
	work := os.Getenv(unreadableEnv)
	if work == "" {
		t.Skip("runs as a child of TestRunUnreadable")
	}
	unreadableAgainstPlain(t, work, unreadableScript, []string{".", "locked", "m0", "wo"})
}

// runUnprivChild runs the test child of this binary as uid 65534 with no
// capabilities, with env naming a work directory it owns, and fails or
// skips as it did.
func runUnprivChild(t *testing.T, child, env string) {
	t.Helper()
	cmd, work := unprivChild(t, child, 0o755)
	cmd.Env = append(os.Environ(), env+"="+work, "TMPDIR="+work)
	out, err := cmd.CombinedOutput()
	text := string(out)
	switch {
	case err != nil:
		t.Fatalf("child: %v\n%s", err, lastLines(text, 40))
	case strings.Contains(text, "--- SKIP"):
		t.Skip("child skipped: ", lastLines(text, 3))
	}
	t.Log(lastLines(text, 6))
}

// unreadableAgainstPlain runs script, which leaves the paths rels unreadable
// to their own user, by os/exec in work/plain (the oracle, its modes read
// before the owner's permissions are given back to read the contents), then
// by Run in the modes an unprivileged user has, and compares the view with
// it.
func unreadableAgainstPlain(t *testing.T, work, script string, rels []string) {
	plain := filepath.Join(work, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	oc := exec.Command("sh", "-c", script)
	oc.Dir = plain
	if out, err := oc.CombinedOutput(); err != nil {
		t.Fatalf("plain run: %v\n%s", err, out)
	}
	modes := map[string]fs.FileMode{}
	for _, rel := range rels {
		if rel != "." {
			os.Chmod(plain, 0o755)
		}
		fi, err := os.Lstat(filepath.Join(plain, rel))
		if err != nil {
			t.Fatal(err)
		}
		modes[rel] = fi.Mode()
	}
	for rel := range modes {
		os.Chmod(filepath.Join(plain, rel), 0o755)
	}
	want, err := dirTree(plain)
	if err != nil {
		t.Fatal(err)
	}
	for rel, m := range modes {
		n := want[rel]
		n.mode = m
		want[rel] = n
	}
	for _, mode := range []string{"overlay-userns", "copy"} {
		t.Run(mode, func(t *testing.T) {
			root, err := os.MkdirTemp(work, "root")
			if err != nil {
				t.Fatal(err)
			}
			os.Chmod(root, 0o755)
			f := newOverlay(t, root)
			cmd := exec.Command("sh", "-c", script)
			cmd.Dir = root
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cfg := runConfig{tempDir: work, userNS: true, userNSSet: true}
			if mode == "copy" {
				err = runCopy(context.Background(), f, cmd, cfg)
			} else if err = runOverlay(context.Background(), f, cmd, cfg); errors.As(err, new(*mountFailed)) {
				t.Skip("no overlay for an unprivileged user here: ", err)
			}
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, out.String())
			}
			got, err := viewTree(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffTrees(want, got, cmpOpts{}); err != nil {
				t.Errorf("the view differs from os on a plain copy:\n%v", err)
			}
			if left, _ := filepath.Glob(filepath.Join(work, "cowfs-*")); len(left) > 0 {
				t.Errorf("left behind: %q", left)
			}
		})
	}
}

// TestRunKeepsOtherRoots: Run overlays the primary root only. The layers
// of roots added with overlayfs.WithRoot used to be wiped by the overlay
// modes (the import reset every root); they are kept, and the confined
// command cannot write such a root on disk. Oracle: the extra root's
// changes before and after, and its tree on disk.
func TestRunKeepsOtherRoots(t *testing.T) {
	needLandlock(t)
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			root, extra := t.TempDir(), t.TempDir()
			writeTree(t, root)
			writeTree(t, extra)
			onDisk, err := dirTree(extra)
			if err != nil {
				t.Fatal(err)
			}
			f, err := overlayfs.New(root, overlayfs.WithRoot(extra))
			if err != nil {
				t.Fatal(err)
			}
			if err := afero.WriteFile(f, filepath.Join(extra, "x"), []byte("layer\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := f.Remove(filepath.Join(extra, "a")); err != nil {
				t.Fatal(err)
			}
			extraChanges := func() []string {
				var s []string
				for _, c := range f.Changes() {
					if c.Root == extra {
						s = append(s, c.String())
					}
				}
				return s
			}
			before := extraChanges()
			cmd := exec.Command("sh", "-c", `echo y > new; echo z > "$0/written"`, extra)
			cmd.Dir = root
			var ee *exec.ExitError
			if err := mode.run(context.Background(), f, cmd); !errors.As(err, &ee) {
				t.Errorf("Run: %v, want the write to the extra root refused", err)
			}
			if got := extraChanges(); !slices.Equal(got, before) {
				t.Errorf("the extra root's changes after Run: %q, want %q", got, before)
			}
			if b, err := afero.ReadFile(f, filepath.Join(root, "new")); err != nil || string(b) != "y\n" {
				t.Errorf("the command's write in the root: %q, %v", b, err)
			}
			after, err := dirTree(extra)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffTrees(onDisk, after, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
				t.Errorf("the extra root changed on disk:\n%v", err)
			}
		})
	}
}

// TestRunCopyKeepsHoles: the copy fallback copies a sparse file of the view
// as sparse (it used to write every zero: a 1 GiB sparse file cost 1 GiB
// of disk per Run). Oracle: the blocks the file system allocated for the
// file in the command's copy, which the command reads with stat(1),
// against those of the original.
func TestRunCopyKeepsHoles(t *testing.T) {
	root := t.TempDir()
	big := filepath.Join(root, "big")
	fh, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("x"), 32<<20); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	var st unix.Stat_t
	if err := unix.Stat(big, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 >= 1<<20 {
		t.Skipf("the file system allocated %d bytes for a sparse file: no holes here", st.Blocks*512)
	}
	for _, mode := range runModes() {
		if !strings.Contains(mode.name, "copy") {
			continue
		}
		t.Run(mode.name, func(t *testing.T) {
			f := newOverlay(t, root)
			var out bytes.Buffer
			cmd := exec.Command("sh", "-c", `stat -c %b "$COWFS_ROOT/big"`)
			cmd.Stdout = &out
			if err := mode.run(context.Background(), f, cmd); err != nil {
				t.Fatal(err)
			}
			blocks, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
			if err != nil {
				t.Fatalf("stat said %q: %v", out.String(), err)
			}
			if blocks*512 > st.Blocks*512+1<<20 {
				t.Errorf("the copy allocated %d bytes for a file the root holds in %d", blocks*512, st.Blocks*512)
			}
			if got := changeStrings(f); len(got) != 0 {
				t.Errorf("changes %q", got)
			}
		})
	}
}

// TestRunImmutableLeavesNothing: a command running as root may make files
// and directories immutable or append-only (chattr; Landlock does not
// govern inode flags), in its TMPDIR and in the root as it sees it (the
// upper or the copy). Run used to leave its temporary directory behind
// then, silently. Oracle: the temporary directory's listing after each Run.
func TestRunImmutableLeavesNothing(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr(1) is not installed (e2fsprogs)")
	}
	const script = `echo x > "$TMPDIR/f" && mkdir "$TMPDIR/d" && echo y > "$TMPDIR/d/in" && mkdir d && echo z > d/in && echo a > h &&
chattr +i "$TMPDIR/f" "$TMPDIR/d" d && chattr +a h && echo set > "$0/set"`
	tmp := t.TempDir()
	set := 0
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			root, marks := t.TempDir(), t.TempDir()
			f := newOverlay(t, root)
			cmd := exec.Command("sh", "-c", script, marks)
			cmd.Dir = root
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := mode.run(context.Background(), f, cmd, WithTempDir(tmp), WithWritable(marks))
			if _, serr := os.Stat(filepath.Join(marks, "set")); serr != nil {
				t.Logf("the flags could not be set here (%v): %s", err, stderr.String())
				return
			}
			set++
			if err != nil {
				t.Errorf("Run: %v\n%s", err, stderr.String())
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("left in the temporary directory: %v", left)
				removeTree(tmp) // for the next mode
				os.Mkdir(tmp, 0o700)
			}
			if got := changeStrings(f); !slices.Equal(got, []string{"A d", "A d/in", "A h"}) {
				t.Errorf("changes %q", got)
			}
		})
	}
	if set == 0 {
		t.Skip("no mode could set inode flags here (needs root and a file system that has them)")
	}
}

// TestRunReopensStdFiles: a confined command whose standard output and
// error are regular files (a CI log) may reopen them by name, as
// /dev/stdout, /dev/stderr or /proc/self/fd/N; that used to fail with
// EACCES. Oracle: the same command by os/exec into a log of its own. A
// directory passed as an extra file grants nothing beneath it.
func TestRunReopensStdFiles(t *testing.T) {
	needLandlock(t)
	const script = `echo a; echo b > /dev/stdout; echo c >&2; echo d >> /dev/stderr; echo e >> /proc/self/fd/1; echo f >> /proc/self/fd/3`
	run := func(t *testing.T, start func(*exec.Cmd) error) (string, string, error) {
		dir := t.TempDir()
		log, err := os.Create(filepath.Join(dir, "log"))
		if err != nil {
			t.Fatal(err)
		}
		extra, err := os.Create(filepath.Join(dir, "extra"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", script)
		cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = log, log, []*os.File{extra}
		err = start(cmd)
		log.Close()
		extra.Close()
		a, _ := os.ReadFile(filepath.Join(dir, "log"))
		b, _ := os.ReadFile(filepath.Join(dir, "extra"))
		return string(a), string(b), err
	}
	wantLog, wantExtra, wantErr := run(t, (*exec.Cmd).Run)
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			f := newOverlay(t, t.TempDir())
			gotLog, gotExtra, err := run(t, func(c *exec.Cmd) error {
				c.Dir = f.Root()
				return mode.run(context.Background(), f, c)
			})
			if err != nil || wantErr != nil || gotLog != wantLog || gotExtra != wantExtra {
				t.Errorf("Run: %v, log %q, extra file %q; os/exec: %v, %q, %q", err, gotLog, gotExtra, wantErr, wantLog, wantExtra)
			}
			outside := t.TempDir()
			d, err := os.Open(outside)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			cmd := exec.Command("sh", "-c", `echo x > /proc/self/fd/3/leak`)
			cmd.Dir, cmd.ExtraFiles = f.Root(), []*os.File{d}
			if err := mode.run(context.Background(), f, cmd); err == nil {
				t.Error("a write beneath a directory passed as an extra file succeeded")
			}
			if ents, _ := os.ReadDir(outside); len(ents) > 0 {
				t.Errorf("the command wrote %v beneath a directory passed to it", ents)
			}
		})
	}
}

// TestRunBytesNotUTF8: a root, a working directory and arguments whose
// names are not UTF-8 reach the command byte for byte. The requests to the
// re-executed stages were JSON, which replaced such bytes with U+FFFD: the
// overlay could not be mounted (Run fell back to the copy) and the command
// got other arguments. Oracle: the same command by os/exec in a plain copy
// laid out the same way.
func TestRunBytesNotUTF8(t *testing.T) {
	const script = `printf '%s|%s|%s' "$1" "${PWD#"$COWFS_ROOT"}" "$X"; echo y > "$1"`
	layout := func(t *testing.T) string {
		root := filepath.Join(t.TempDir(), "ro\xffot")
		if err := os.MkdirAll(filepath.Join(root, "d\xfe"), 0o755); err != nil {
			t.Fatal(err)
		}
		return root
	}
	command := func(root string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", script, "sh", "a\xffb")
		cmd.Env = append(os.Environ(), "X=e\xfdv")
		cmd.Dir = filepath.Join(root, "d\xfe")
		return cmd
	}
	plain := layout(t)
	oc := command(plain)
	oc.Env = append(oc.Env, RootEnv+"="+plain)
	want, err := oc.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			root := layout(t)
			f := newOverlay(t, root)
			cmd := command(root)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			var m Mode
			if err := mode.run(context.Background(), f, cmd, WithModeReport(func(r Mode) { m = r })); err != nil {
				t.Fatalf("Run: %v\n%s", err, out.String())
			}
			if out.String() != string(want) {
				t.Errorf("the command printed %q, os/exec's %q", out.String(), want)
			}
			if mode.name == "Run" && m.Kind == ModeCopy {
				t.Errorf("Run fell back to %v", m)
			}
			if got := changeStrings(f); !slices.Equal(got, []string{"A d\xfe/a\xffb"}) {
				t.Errorf("changes %q", got)
			}
		})
	}
}

// TestRunManyArgs: arguments as long as os/exec passes them (here 200 KB
// in 20,000 arguments) reach the command; they used to travel in one
// environment variable, which holds at most 128 KiB, and Run failed with
// E2BIG naming the test binary. A command with no Args runs as os/exec
// runs it, with argv {Path}. Oracle: os/exec.
func TestRunManyArgs(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	args := []string{"-c", `echo "$0" $#; printf '%s\n' "$@" | cksum`, "sh"}
	for i := 0; i < 20000; i++ {
		args = append(args, fmt.Sprintf("argument-%05d", i))
	}
	output := func(t *testing.T, cmd *exec.Cmd, run func(*exec.Cmd) error) string {
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := run(cmd); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		return out.String()
	}
	bare := func() *exec.Cmd {
		return &exec.Cmd{Path: sh, Stdin: strings.NewReader(`echo "$0" $#`)}
	}
	wantMany := output(t, exec.Command("sh", args...), (*exec.Cmd).Run)
	wantBare := output(t, bare(), (*exec.Cmd).Run)
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			f := newOverlay(t, t.TempDir())
			run := func(c *exec.Cmd) error { return mode.run(context.Background(), f, c) }
			if got := output(t, exec.Command("sh", args...), run); got != wantMany {
				t.Errorf("many arguments: the command printed %q, os/exec's %q", got, wantMany)
			}
			if got := output(t, bare(), run); got != wantBare {
				t.Errorf("no Args: the command printed %q, os/exec's %q", got, wantBare)
			}
		})
	}
}

// TestRunWritableInsideRoot: WithWritable naming a directory inside the
// root (on disk, or only in the layer) is accepted and changes nothing:
// the command writes there into the layer, as anywhere in the root. It
// used to fail in the copy fallback always (the copy did not exist yet)
// and in every mode for a directory only the layer holds. Oracle: the
// real root on disk before and after, and the command's writes in the view.
func TestRunWritableInsideRoot(t *testing.T) {
	needLandlock(t)
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			root := t.TempDir()
			writeTree(t, root)
			before, err := dirTree(root)
			if err != nil {
				t.Fatal(err)
			}
			f := newOverlay(t, root)
			if err := f.Mkdir(filepath.Join(root, "layer-only"), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", `echo x > d/w && echo y > layer-only/w`)
			cmd.Dir = root
			if err := mode.run(context.Background(), f, cmd, WithWritable(filepath.Join(root, "d"), filepath.Join(root, "layer-only"))); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := changeStrings(f); !slices.Equal(got, []string{"A d/w", "A layer-only", "A layer-only/w"}) {
				t.Errorf("changes %q", got)
			}
			after, err := dirTree(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffTrees(before, after, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
				t.Errorf("the real root changed:\n%v", err)
			}
		})
	}
}
