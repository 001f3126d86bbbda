package helpers_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
)

// generate is the code under test of these tests: it writes greeting into
// out/greeting.txt and edits notes.txt.
func generate(t testing.TB, env *helpers.Env, greeting string) {
	t.Helper()
	fsys := env.Fs()
	if err := fsys.MkdirAll(env.Path("out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := afero.WriteFile(fsys, env.Path("out/greeting.txt"), []byte(greeting+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := afero.WriteFile(fsys, env.Path("notes.txt"), []byte("one\nTWO\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goldenRun runs a fake test named TestGen that generates greeting and
// checks the golden patch in dir.
func goldenRun(t *testing.T, dir, greeting string) (*fakeTB, bool) {
	var ok bool
	f := newFake(t, "TestGen").run(func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(demo)), helpers.GoldenDir(dir))
		generate(t, env, greeting)
		ok = env.GoldenPatch()
	})
	return f, ok
}

func TestGoldenPatchLifecycle(t *testing.T) {
	noTapes(t)
	t.Setenv(helpers.EnvUpdateGolden, "")
	dir := t.TempDir()
	golden := filepath.Join(dir, "TestGen.patch")

	f, ok := goldenRun(t, dir, "hello")
	f.wantErrors(t, "golden patch "+golden+" is missing", helpers.EnvUpdateGolden+"=1")
	if !strings.Contains(f.Logs(), "\n+hello\n") {
		t.Errorf("the failed test did not log its patch:\n%s", f.Logs())
	}
	if ok {
		t.Error("GoldenPatch returned true with no golden")
	}
	if _, err := os.Stat(golden); !os.IsNotExist(err) {
		t.Fatalf("golden written without %s: %v", helpers.EnvUpdateGolden, err)
	}

	t.Setenv(helpers.EnvUpdateGolden, "1")
	f, ok = goldenRun(t, dir, "hello")
	f.wantClean(t)
	if !ok || !strings.Contains(f.Logs(), "updated golden patch "+golden) {
		t.Errorf("update: ok=%v, logs:\n%s", ok, f.Logs())
	}
	checkGitApply(t, golden, map[string]string{"out/greeting.txt": "hello\n", "notes.txt": "one\nTWO\n"})

	// Updating with an equal golden leaves the file alone.
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	os.Chtimes(golden, old, old)
	f, _ = goldenRun(t, dir, "hello")
	f.wantClean(t)
	if fi, err := os.Stat(golden); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("an equal golden was rewritten (%v)", err)
	}
	if strings.Contains(f.Logs(), "updated") {
		t.Errorf("logs claim an update:\n%s", f.Logs())
	}

	t.Setenv(helpers.EnvUpdateGolden, "0")
	f, ok = goldenRun(t, dir, "hello")
	f.wantClean(t)
	if !ok {
		t.Error("GoldenPatch returned false on a match")
	}

	f, ok = goldenRun(t, dir, "bye")
	// Path by path, with a diff of the file, not of the two patches.
	f.wantErrors(t, "the patch differs from the golden "+golden, "a: golden, b: this run",
		"M out/greeting.txt: this run leaves it otherwise than the golden:\n", "\n    -hello\n", "\n    +bye\n")
	assert.NotContains(t, f.Errors(), "-+hello", "a diff of two patches")
	assert.NotContains(t, f.Errors(), "notes.txt", "a path both patches change alike")
	if ok {
		t.Error("GoldenPatch returned true on a mismatch")
	}

	t.Setenv(helpers.EnvUpdateGolden, "true")
	goldenRun(t, dir, "bye")
	checkGitApply(t, golden, map[string]string{"out/greeting.txt": "bye\n"})

	t.Setenv(helpers.EnvUpdateGolden, "maybe")
	f, _ = goldenRun(t, dir, "hello")
	f.wantErrors(t, helpers.EnvUpdateGolden+`="maybe"`, "not a boolean")
}

func TestGoldenPatchEmpty(t *testing.T) {
	noTapes(t)
	dir := t.TempDir()
	t.Setenv(helpers.EnvUpdateGolden, "1")
	newFake(t, "TestNothing").run(func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(demo)), helpers.GoldenDir(dir))
		env.GoldenPatch()
	}).wantClean(t)
	b, err := os.ReadFile(filepath.Join(dir, "TestNothing.patch"))
	if err != nil || len(b) != 0 {
		t.Errorf("golden of no change: %q, %v; want an empty file", b, err)
	}
}

// checkGitApply applies patch in a fresh extraction of the demo fixture
// with git, and checks the files named in want.
func checkGitApply(t *testing.T, patch string, want map[string]string) {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not found in PATH: cannot check the golden patch with git apply")
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "work")
	if err := helpers.Extract(txtar.Parse([]byte(demo)), dir); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(git, "apply", "--whitespace=nowarn", patch)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+parent, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply %s: %v\n%s", patch, err, out)
	}
	for name, content := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != content {
			t.Errorf("after git apply, %s = %q, %v; want %q", name, b, err, content)
		}
	}
}

func TestAssertionsFail(t *testing.T) {
	noTapes(t)
	var results []bool
	f := newFake(t, "TestAssert").run(func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(demo)))
		generate(t, env, "hi")
		results = append(results,
			env.NoChanges(),
			env.Changed("A out", "A out/greeting.txt", "D notes.txt"),
			env.ChangedPaths("out/greeting.txt", "notes.txt", "elsewhere"),
			env.FileContent("notes.txt", "one\ntwo\n"),
			env.FileContent("missing.txt", ""),
			env.FileContent("out", ""),
		)
	})
	for i, ok := range results {
		if ok {
			t.Errorf("assertion %d returned true", i)
		}
	}
	f.wantErrors(t,
		"want no changes, got 3:\nM notes.txt\nA out\nA out/greeting.txt\n",
		"changes differ from what the test expects:\n\tmissing:    D notes.txt\n\tunexpected: M notes.txt\n",
		"changed paths differ from what the test expects:\n\tmissing:    elsewhere\n\tunexpected: out\n",
		"notes.txt does not hold what the test expects (a: want, b: got)", "\n-two\n+TWO\n",
		"cannot check the content of missing.txt: open missing.txt: no such file or directory",
		"cannot check the content of out: read out: is a directory",
	)
	if f.fatal {
		t.Error("an assertion stopped the test")
	}
}

func TestAssertionsPass(t *testing.T) {
	noTapes(t)
	f := newFake(t, "TestAssert").run(func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(demo)))
		if !env.NoChanges() {
			t.Errorf("NoChanges false on a fresh overlay")
		}
		generate(t, env, "hi")
		ok := env.Changed("M notes.txt", "A out/greeting.txt", "A out") &&
			env.ChangedPaths("out", "notes.txt", "out/greeting.txt") &&
			env.FileContent("out/greeting.txt", "hi\n")
		if !ok {
			t.Errorf("an assertion returned false")
		}
	})
	f.wantClean(t)
	if f.Logs() != "" {
		t.Errorf("a passing test logged:\n%s", f.Logs())
	}
}

func TestFailureReport(t *testing.T) {
	noTapes(t)
	big := strings.Repeat("a line of the big file\n", 2*helpers.LogLimit/20)
	var art string
	f := newFake(t, "TestFails").run(func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(demo)), helpers.ForceArtifacts(true))
		generate(t, env, "hi")
		afero.WriteFile(env.Fs(), env.Path("big.txt"), []byte(big), 0o644)
		t.Errorf("the code under test is wrong")
	})
	logs := f.Logs()
	for _, want := range []string{
		"the test failed; changes in the overlay:\n",
		"A big.txt\nM notes.txt\nA out\nA out/greeting.txt\n",
		"as a git patch:\ndiff --git a/big.txt b/big.txt\nnew file mode 100644\n",
		"more bytes)",
		"changes and patch written to ",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%.2000s", want, logs)
		}
	}
	for _, l := range f.logs {
		if len(l) > helpers.LogLimit+200 {
			t.Errorf("a log message of %d bytes, limit %d", len(l), helpers.LogLimit)
		}
	}
	art = f.artDir
	if art == "" {
		t.Fatal("ArtifactDir was not asked for")
	}
	// The artifacts are whole: the patch applies and carries the big file.
	patch := filepath.Join(art, helpers.ArtifactPatch)
	changes, err := os.ReadFile(filepath.Join(art, helpers.ArtifactChanges))
	if err != nil || string(changes) != "A big.txt\nM notes.txt\nA out\nA out/greeting.txt\n" {
		t.Errorf("%s = %q, %v", helpers.ArtifactChanges, changes, err)
	}
	checkGitApply(t, patch, map[string]string{"big.txt": big, "out/greeting.txt": "hi\n"})
}

func TestFailureReportQuiet(t *testing.T) {
	noTapes(t)
	// A passing test logs nothing; without -artifacts nothing is written.
	f := newFake(t, "TestPasses").run(func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(demo)), helpers.ForceArtifacts(true))
		generate(t, env, "hi")
	})
	f.wantClean(t)
	if f.Logs() != "" || f.artDir != "" {
		t.Errorf("a passing test logged %q, artifacts %q", f.Logs(), f.artDir)
	}
	f = newFake(t, "TestFails").run(func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(demo)), helpers.ForceArtifacts(false))
		t.Errorf("fail without changes")
		_ = env
	})
	if !strings.Contains(f.Logs(), "the overlay has no changes") || f.artDir != "" {
		t.Errorf("logs %q, artifacts %q", f.Logs(), f.artDir)
	}
}
