package overlayfs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGitRefusesAsGit: gitRefuses answers as git apply does. Oracle: git
// apply --check of a one-file patch creating each path, outside any
// repository and configuration (core.protectNTFS at its default).
func TestGitRefusesAsGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("git not found in PATH (%v)", err)
	}
	dir := t.TempDir()
	names := []string{
		".git/x", ".GIT/x", ".Git", "a/.git", "a/.git/config", "a/b/.gIt/c",
		".git./x", ".git../x", ".git /x", ".git. ./x", ".git:x", ".git::$INDEX_ALLOCATION/x", `a/.git\x`,
		"git~1/x", "GIT~1/x", "a/git~1", "git~1./x", "git~1:y",
		".gitx/y", ".gitignore", ".gitmodules", "a/.git.x", "git~2/x", "xgit~1/y", "git/x", "a.git/x", ".git.a/b",
		"a\\b", "a:b", "x.git", "~1/.g",
	}
	for _, name := range names {
		patch := fmt.Sprintf("diff --git a/%s b/%s\nnew file mode 100644\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1 @@\n+hi\n", name, name, name)
		cmd := exec.Command(git, "apply", "--check")
		cmd.Dir = dir
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GIT_") }),
			"GIT_CEILING_DIRECTORIES="+filepath.Dir(dir), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		cmd.Stdin = strings.NewReader(patch)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		refused := err != nil
		if refused && !strings.Contains(stderr.String(), "invalid path") {
			t.Errorf("%q: git apply --check: %v: %s", name, err, stderr.String())
			continue
		}
		if got := gitRefuses(name); got != refused {
			t.Errorf("gitRefuses(%q) = %v, git apply refuses it: %v (%s)", name, got, refused, strings.TrimSpace(stderr.String()))
		}
	}
}
