package kernel

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReviewReadOnlyPassedFilesStayReadOnly: a confined command given
// descriptors opened read-only (as extra files) on a file of the real root
// and on one outside every writable path may read them, but reopening them
// for writing by /proc/self/fd/N must fail as any other write there does:
// confineSelf grants write rights on every regular file passed, whatever
// the descriptor's access mode, so the command wrote the real root (under
// the overlay, unseen by the layer) and the outside file. Oracle: the disk
// around the root, as os sees it, before and after.
func TestReviewReadOnlyPassedFilesStayReadOnly(t *testing.T) {
	needLandlock(t)
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			base := t.TempDir()
			root, out := filepath.Join(base, "root"), filepath.Join(base, "outside")
			for _, d := range []string{root, out} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
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

// reviewLinkEnv makes the test binary run TestReviewUnreadableLinkChild;
// its value is a work directory the child owns.
const reviewLinkEnv = "COWFS_KERNEL_REVIEW_LINK"

// reviewLinkScript leaves a file its own user cannot read under two hard
// links.
const reviewLinkScript = `echo s > a && ln a b && chmod 0 a`

// TestReviewUnreadableHardLink runs, as uid 65534, a command that leaves
// an unreadable file under two names. makeReadable gives the owner read
// permission on the first name it meets and records its mode; the second
// name is the same inode, now readable, so nothing is recorded for it and
// it is imported with the mode makeReadable gave it (0400) instead of the
// one the command left (0). Oracle: the same command by os/exec on a plain
// copy, modes read before any is given back.
func TestReviewUnreadableHardLink(t *testing.T) {
	cmd, work := unprivChild(t, "TestReviewUnreadableLinkChild", 0o755)
	cmd.Env = append(os.Environ(), reviewLinkEnv+"="+work, "TMPDIR="+work)
	out, err := cmd.CombinedOutput()
	text := string(out)
	switch {
	case err != nil:
		t.Fatalf("child: %v\n%s", err, lastLines(text, 40))
	case strings.Contains(text, "--- SKIP"):
		t.Skip("child skipped: ", lastLines(text, 3))
	}
}

func TestReviewUnreadableLinkChild(t *testing.T) {
	work := os.Getenv(reviewLinkEnv)
	if work == "" {
		t.Skip("runs as a child of TestReviewUnreadableHardLink")
	}
	plain := filepath.Join(work, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	oc := exec.Command("sh", "-c", reviewLinkScript)
	oc.Dir = plain
	if out, err := oc.CombinedOutput(); err != nil {
		t.Fatalf("plain run: %v\n%s", err, out)
	}
	modes := map[string]fs.FileMode{}
	for _, rel := range []string{"a", "b"} {
		fi, err := os.Lstat(filepath.Join(plain, rel))
		if err != nil {
			t.Fatal(err)
		}
		modes[rel] = fi.Mode()
	}
	os.Chmod(filepath.Join(plain, "a"), 0o644)
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
			cmd := exec.Command("sh", "-c", reviewLinkScript)
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
		})
	}
}

// TestReviewDirNotADirectoryLikeOS: cmd.Dir names a regular file. os/exec
// stats Dir first (it exists), then the child's chdir fails: "fork/exec
// PROG: not a directory". Run's hook reports every failure of its chdir
// as "chdir DIR: ...", the error os/exec gives only for a Dir that cannot
// be stat'ed. Oracle: os/exec on the same tree.
func TestReviewDirNotADirectoryLikeOS(t *testing.T) {
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			root := t.TempDir()
			file := filepath.Join(root, "f")
			if err := os.WriteFile(file, []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			prog, err := exec.LookPath("true")
			if err != nil {
				t.Skip(err)
			}
			oc := exec.Command(prog)
			oc.Dir = file
			want := oc.Run()
			f := newOverlay(t, root)
			cmd := exec.Command(prog)
			cmd.Dir = file
			got := mode.run(context.Background(), f, cmd)
			if got == nil || want == nil || got.Error() != want.Error() || !errors.Is(got, errors.Unwrap(want)) {
				t.Errorf("Run: %v, want %v as os/exec gives", got, want)
			}
		})
	}
}
