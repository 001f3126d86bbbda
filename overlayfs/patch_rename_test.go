package overlayfs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cowfs/cowfs/overlayfs"
)

// TestWriteDiffRenames: Fs.Rename of a directory and of a file that is then
// edited come out of WriteDiff as git's renames, and real git apply of the
// patch in a copy of the root gives the overlay view; git apply -R gives
// the root back.
func TestWriteDiffRenames(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("git not found in PATH (%v): renames are checked with git apply", err)
	}
	base := t.TempDir()
	root := filepath.Join(base, "root")
	var body strings.Builder
	for i := range 20 {
		body.WriteString("line " + strings.Repeat("x", i) + "\n")
	}
	files := map[string]string{
		"pkg/a.go":      "package pkg\n\nfunc A() {}\n",
		"pkg/sub/b.go":  "package sub\n\nfunc B() {}\n",
		"notes.txt":     body.String(),
		"keep/same.txt": "same\n",
	}
	for p, data := range files {
		require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, p), []byte(data), 0o644))
	}
	f, err := overlayfs.New(root)
	require.NoError(t, err)
	require.NoError(t, f.Rename(filepath.Join(root, "pkg"), filepath.Join(root, "lib")))
	require.NoError(t, f.Rename(filepath.Join(root, "notes.txt"), filepath.Join(root, "docs.txt")))
	require.NoError(t, afero.WriteFile(f, filepath.Join(root, "docs.txt"), []byte(strings.Replace(body.String(), "line xx\n", "line two\n", 1)), 0o644))

	var patch bytes.Buffer
	require.NoError(t, f.WriteDiff(&patch))
	p := patch.String()
	// 97% is what git diff --no-index says of these two files (R097).
	assert.Contains(t, p, "diff --git a/notes.txt b/docs.txt\nsimilarity index 97%\nrename from notes.txt\nrename to docs.txt\nindex ")
	assert.Contains(t, p, "diff --git a/pkg/a.go b/lib/a.go\nsimilarity index 100%\nrename from pkg/a.go\nrename to lib/a.go\n")
	assert.Contains(t, p, "diff --git a/pkg/sub/b.go b/lib/sub/b.go\nsimilarity index 100%\nrename from pkg/sub/b.go\nrename to lib/sub/b.go\n")
	assert.NotContains(t, p, "deleted file mode")
	assert.NotContains(t, p, "new file mode")

	view, _, err := patchRead(f, root)
	require.NoError(t, err)
	orig, _, err := patchRead(afero.NewOsFs(), root)
	require.NoError(t, err)
	work := filepath.Join(base, "work")
	require.NoError(t, patchCopy(root, work))
	require.NoError(t, patchGitApply(git, work, patch.Bytes(), false), "patch:\n%s", p)
	got, _, err := patchRead(afero.NewOsFs(), work)
	require.NoError(t, err)
	assert.Empty(t, patchTreeDiff(view, got), "git apply gave another tree than the overlay view")
	require.NoError(t, patchGitApply(git, work, patch.Bytes(), true), "patch:\n%s", p)
	back, _, err := patchRead(afero.NewOsFs(), work)
	require.NoError(t, err)
	assert.Empty(t, patchTreeDiff(orig, back), "git apply -R did not restore the root")
}
