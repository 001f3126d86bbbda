package helpers_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
)

// TestGoldenPatchMismatchByPath: a golden patch written by one run and a
// second run that does other things; the mismatch names each path one
// side changes alone, and for a path both change differently shows the
// file's content as the golden left it against this run's.
func TestGoldenPatchMismatchByPath(t *testing.T) {
	noTapes(t)
	dir := t.TempDir()
	run := func(update string, body func(env *helpers.Env)) *fakeTB {
		t.Setenv(helpers.EnvUpdateGolden, update)
		return newFake(t, "TestPaths").run(func(tb testing.TB) {
			env := helpers.NewArchive(tb, txtar.Parse([]byte(demo)), helpers.GoldenDir(dir))
			body(env)
			env.GoldenPatch()
		})
	}
	write := func(env *helpers.Env, rel, data string) {
		require.NoError(t, afero.WriteFile(env.Fs(), env.Path(rel), []byte(data), 0o644))
	}
	run("1", func(env *helpers.Env) {
		write(env, "notes.txt", "one\nGOLDEN\n")
		write(env, "new.txt", "same in both\n")
		require.NoError(t, env.Fs().Remove(env.Path("data/config")))
	}).wantClean(t)

	f := run("0", func(env *helpers.Env) {
		write(env, "notes.txt", "one\nRUN\n")
		write(env, "new.txt", "same in both\n")
		require.NoError(t, env.Fs().Chmod(env.Path("bin/run"), 0o644))
	})
	require.True(t, f.Failed())
	msg := f.Errors()
	assert.Contains(t, msg, "M notes.txt: this run leaves it otherwise than the golden:\n")
	assert.Contains(t, msg, "\n    -GOLDEN\n    +RUN\n", "a diff of the file's content")
	assert.Contains(t, msg, "- data/config: the golden changes it (deletes it), this run does not\n")
	assert.Contains(t, msg, "+ bin/run: this run changes it (writes it (mode 100644)), the golden does not\n")
	assert.NotContains(t, msg, "new.txt", "a path both patches change alike is not listed")
	assert.NotContains(t, msg, "-+", "no diff of two patches")
	assert.NotContains(t, msg, "+-", "no diff of two patches")

	// A rename in the run that the golden does not make.
	f = run("0", func(env *helpers.Env) {
		write(env, "notes.txt", "one\nGOLDEN\n")
		write(env, "new.txt", "same in both\n")
		require.NoError(t, env.Fs().Remove(env.Path("data/config")))
		require.NoError(t, env.Fs().Rename(env.Path("bin/run"), env.Path("bin/start")))
	})
	msg = f.Errors()
	assert.Contains(t, msg, "+ bin/start: this run changes it (renames bin/run to it), the golden does not\n")
	assert.Contains(t, msg, "+ bin/run: this run changes it (deletes it), the golden does not\n")
	assert.NotContains(t, msg, "notes.txt")
}

// TestGoldenPatchSameEffect: a golden written before renames were detected
// (a deletion and a creation) against a run that renames: every path ends
// the same, and the message says the patches differ in form only.
func TestGoldenPatchSameEffect(t *testing.T) {
	noTapes(t)
	t.Setenv(helpers.EnvUpdateGolden, "")
	dir := t.TempDir()
	golden := `diff --git a/data/config b/data/config
deleted file mode 100644
index 1234567..0000000
--- a/data/config
+++ /dev/null
@@ -1 +0,0 @@
-name=demo
diff --git a/data/settings b/data/settings
new file mode 100644
index 0000000..1234567
--- /dev/null
+++ b/data/settings
@@ -0,0 +1 @@
+name=demo
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "TestMove.patch"), []byte(golden), 0o644))
	f := newFake(t, "TestMove").run(func(tb testing.TB) {
		env := helpers.NewArchive(tb, txtar.Parse([]byte(demo)), helpers.GoldenDir(dir))
		require.NoError(t, env.Fs().Rename(env.Path("data/config"), env.Path("data/settings")))
		env.GoldenPatch()
	})
	msg := f.Errors()
	assert.Contains(t, msg, "the patches have the same effect on every path but differ in form:\n")
	assert.Contains(t, msg, "+rename from data/config\n")
}
