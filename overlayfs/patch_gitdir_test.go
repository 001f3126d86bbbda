package overlayfs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// TestWriteDiffLeavesGitDirOut: a run that writes .git/COMMIT_EDITMSG
// (and other paths git refuses) besides a.txt yields a patch that real git
// apply accepts and that reproduces every other file; the patch says what
// it left out; Changes and Commit keep the .git paths.
func TestWriteDiffLeavesGitDirOut(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("git not found in PATH (%v): WriteDiff is checked with git apply", err)
	}
	root := t.TempDir()
	for name, data := range map[string]string{
		"a.txt": "alpha\n", ".git/HEAD": "ref: refs/heads/main\n", "sub/.git": "gitdir: ../.git/modules/sub\n", "keep.txt": "k\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]string{
		".git/COMMIT_EDITMSG": "msg\n", ".git/HEAD": "ref: refs/heads/other\n", "a.txt": "alpha\nbeta\n",
		"new/b.txt": "b\n", "sub/.git": "gitdir: elsewhere\n", "x/.GIT/y": "y\n", "git~1/z": "z\n",
	}
	for name, data := range writes {
		p := filepath.Join(root, name)
		if err := f.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := afero.WriteFile(f, p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Remove(filepath.Join(root, "keep.txt")); err != nil {
		t.Fatal(err)
	}
	var patch bytes.Buffer
	if err := f.WriteDiff(&patch); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(patch.String(), "\n")
	if !strings.HasPrefix(first, "cowfs: 5 paths in .git left out") {
		t.Errorf("the patch's first line is %q, want the note on 5 paths left out", first)
	}
	if strings.Contains(patch.String(), "diff --git a/.git") || strings.Contains(patch.String(), "COMMIT_EDITMSG\n") {
		t.Errorf("the patch names a path in .git:\n%s", patch.String())
	}
	cp := filepath.Join(t.TempDir(), "copy")
	if err := os.MkdirAll(cp, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.txt", "keep.txt"} {
		data, _ := os.ReadFile(filepath.Join(root, name))
		os.WriteFile(filepath.Join(cp, name), data, 0o644)
	}
	cmd := exec.Command(git, "apply", "--whitespace=nowarn")
	cmd.Dir = cp
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(cp), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	cmd.Stdin = bytes.NewReader(patch.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s\npatch:\n%s", err, out, patch.String())
	}
	for name, want := range map[string]string{"a.txt": "alpha\nbeta\n", "new/b.txt": "b\n", "keep.txt": ""} {
		got, err := os.ReadFile(filepath.Join(cp, name))
		if want == "" {
			if !os.IsNotExist(err) {
				t.Errorf("%s: still there after git apply (%v)", name, err)
			}
			continue
		}
		if string(got) != want {
			t.Errorf("%s after git apply: %q, %v; want %q", name, got, err, want)
		}
	}
	changed := map[string]bool{}
	for _, c := range f.Changes() {
		changed[c.Path] = true
	}
	for _, p := range []string{".git/COMMIT_EDITMSG", ".git/HEAD", "sub/.git", "x/.GIT/y", "git~1/z", "a.txt"} {
		if !changed[p] {
			t.Errorf("Changes() lacks %s: %v", p, f.Changes())
		}
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	for name, want := range writes {
		if got, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(got) != want {
			t.Errorf("after Commit, %s on disk: %q, %v; want %q", name, got, err, want)
		}
	}
}
