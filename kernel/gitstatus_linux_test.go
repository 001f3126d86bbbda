package kernel

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
)

// gitRepo makes a committed git repository in root whose files are older
// than its index (so that git never finds an entry racily clean), and
// returns the environment git runs with.
func gitRepo(t *testing.T, root string) []string {
	t.Helper()
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+root,
		"GIT_AUTHOR_DATE=2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2020-01-01T00:00:00Z", "LC_ALL=C")
	for name, data := range map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", "main.go": "package main\n"} {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
		os.Chtimes(p, old, old)
	}
	cmd := exec.Command("sh", "-c", `git init -q -b main . && git add -A && git -c user.name=T -c user.email=t@example.com commit -q -m init`)
	cmd.Dir, cmd.Env = root, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git: %v\n%s", err, out)
	}
	return env
}

// TestRunGitStatusReadOnly (issue 22): a read-only `git status` leaves no
// change, in both modes. Oracle: the same git status run plainly on the
// root leaves .git/index byte for byte as it was (checked first). Copy
// mode gets there with GIT_OPTIONAL_LOCKS=0 (see Run's doc): git would
// otherwise refresh the index's stat cache for the copy's new inodes and
// ctimes and write it.
func TestRunGitStatusReadOnly(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	if _, err := landlockABI(runConfig{}); err != nil {
		t.Skip("Landlock is not available: ", err)
	}
	for _, mode := range []string{"plain", "overlay", "copy"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "overlay" {
				needMount(t)
			}
			root := t.TempDir()
			env := gitRepo(t, root)
			index := filepath.Join(root, ".git/index")
			before, err := os.ReadFile(index)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("git", "status", "--porcelain")
			cmd.Dir, cmd.Env = root, env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if mode == "plain" {
				if err := cmd.Run(); err != nil {
					t.Fatalf("git status: %v\n%s", err, stderr.String())
				}
				if after, _ := os.ReadFile(index); !bytes.Equal(before, after) {
					t.Fatal("the plain run rewrote .git/index: the fixture is racy, the oracle says nothing")
				}
				return
			}
			f, err := overlayfs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			var opts []RunOption
			if mode == "copy" {
				opts = append(opts, WithCopyFallback())
			}
			if err := Run(context.Background(), f, cmd, opts...); err != nil {
				t.Fatalf("Run: %v\n%s", err, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("git status in the %s mode reports changes:\n%s", mode, stdout.String())
			}
			if cs := f.Changes(); len(cs) != 0 {
				t.Errorf("a read-only git status left changes in the %s mode: %v", mode, cs)
			}
		})
	}
}

// TestRunGitCommitPatchApplies (issue 22): `git commit` in Run writes
// .git (COMMIT_EDITMSG, objects, refs) and a file; WriteDiff's patch, with
// the .git paths left out, applies with real git apply on a copy of the
// root and gives the files a plain run of the same command gives. Oracle:
// the command run directly on another copy.
func TestRunGitCommitPatchApplies(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	if _, err := landlockABI(runConfig{}); err != nil {
		t.Skip("Landlock is not available: ", err)
	}
	const script = `echo more >> a.txt && echo c > c.txt && git add -A && git -c user.name=T -c user.email=t@example.com commit -q -m second`
	for _, mode := range []string{"overlay", "copy"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "overlay" {
				needMount(t)
			}
			base := t.TempDir()
			root := filepath.Join(base, "root")
			os.Mkdir(root, 0o755)
			env := gitRepo(t, root)
			copyOf := func(name string) string {
				dst := filepath.Join(base, name)
				if out, err := exec.Command("cp", "-a", root, dst).CombinedOutput(); err != nil {
					t.Fatalf("cp -a: %v\n%s", err, out)
				}
				return dst
			}
			plain, applied := copyOf("plain"), copyOf("applied")
			oc := exec.Command("sh", "-c", script)
			oc.Dir, oc.Env = plain, env
			if out, err := oc.CombinedOutput(); err != nil {
				t.Fatalf("plain run: %v\n%s", err, out)
			}
			f, err := overlayfs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", script)
			cmd.Dir, cmd.Env = root, env
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			var opts []RunOption
			if mode == "copy" {
				opts = append(opts, WithCopyFallback())
			}
			if err := Run(context.Background(), f, cmd, opts...); err != nil {
				t.Fatalf("Run: %v\n%s", err, stderr.String())
			}
			var patch bytes.Buffer
			if err := f.WriteDiff(&patch); err != nil {
				t.Fatal(err)
			}
			ac := exec.Command(git, "apply", "--whitespace=nowarn")
			ac.Dir, ac.Env = applied, env
			ac.Stdin = bytes.NewReader(patch.Bytes())
			if out, err := ac.CombinedOutput(); err != nil {
				t.Fatalf("git apply: %v\n%s\npatch:\n%s", err, out, patch.String())
			}
			want, err := dirTree(plain)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dirTree(applied)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range []tree{want, got} {
				for p := range tr {
					if p == ".git" || strings.HasPrefix(p, ".git/") {
						delete(tr, p)
					}
				}
			}
			if err := diffTrees(want, got, cmpOpts{}); err != nil {
				t.Errorf("git apply of the patch differs from the plain run:\n%v", err)
			}
		})
	}
}
