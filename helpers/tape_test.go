package helpers_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/tape"
)

const thisPackage = "github.com/cowfs/cowfs/helpers"

// readTape reads and checks a complete tape file.
func readTape(t testing.TB, name string) *tape.Tape {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tp, err := tape.Read(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if tp.Truncated || tp.Trailer == nil {
		t.Errorf("%s: no trailer", name)
	}
	return tp
}

// recordedPaths returns the distinct paths of a tape's records, sorted.
func recordedPaths(tp *tape.Tape) []string {
	var ps []string
	for _, r := range tp.Records {
		ps = append(ps, r.Paths()...)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// dirNames lists the files of a tape directory, without the content
// directory the helpers keep beside the tapes.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		if e.IsDir() && e.Name() == helpers.ContentDir {
			continue
		}
		names = append(names, e.Name())
	}
	return names
}

func TestTapeDirConcurrentTests(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(tape.EnvDir, dir)
	const n = 8
	var wg sync.WaitGroup
	files := make([]string, n)
	fakes := make([]*fakeTB, n)
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("TestPar/case_%d", i)
			fakes[i] = newFake(t, name).run(func(t testing.TB) {
				env := helpers.NewArchive(t, txtar.Parse([]byte(demo)))
				generate(t, env, fmt.Sprint("hello ", i))
				files[i] = env.TapeFile()
			})
		})
	}
	wg.Wait()
	for i, f := range fakes {
		f.wantClean(t)
		name := fmt.Sprintf("TestPar/case_%d", i)
		want := filepath.Join(dir, tape.FileName(thisPackage, name))
		if files[i] != want {
			t.Errorf("TapeFile() = %q, want %q", files[i], want)
		}
		tp := readTape(t, want)
		if tp.Header.Package != thisPackage || tp.Header.Test != name {
			t.Errorf("%s: header names %q %q, want %q %q", want, tp.Header.Package, tp.Header.Test, thisPackage, name)
		}
		if got, want := recordedPaths(tp), []string{"notes.txt", "out", "out/greeting.txt"}; !slices.Equal(got, want) {
			t.Errorf("%s: paths %q, want %q", name, got, want)
		}
		// The tape holds this test's bytes: the greeting's hash.
		wantHash := tape.HashBytes(fmt.Appendf(nil, "hello %d\n", i))
		if !slices.ContainsFunc(tp.Records, func(r tape.Record) bool { return r.Hash == wantHash }) {
			t.Errorf("%s: no record of the greeting's hash", name)
		}
	}
	if got := len(dirNames(t, dir)); got != n {
		t.Errorf("%d files in the tape directory, want %d", got, n)
	}
}

func TestTapeDirNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(tape.EnvDir, dir)
	base := tape.FileName(thisPackage, "TestSame")
	first := filepath.Join(dir, base)
	if err := os.WriteFile(first, []byte("not a tape, keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		newFake(t, "TestSame").run(func(t testing.TB) {
			env := helpers.NewArchive(t, txtar.Parse([]byte(demo)))
			got = append(got, filepath.Base(env.TapeFile()))
		}).wantClean(t)
	}
	// Two Envs in one test: two tapes.
	newFake(t, "TestTwice").run(func(t testing.TB) {
		a := helpers.NewArchive(t, txtar.Parse([]byte(demo)))
		b := helpers.NewArchive(t, txtar.Parse([]byte(demo)))
		got = append(got, filepath.Base(a.TapeFile()), filepath.Base(b.TapeFile()))
	}).wantClean(t)

	stem := strings.TrimSuffix(base, ".tape")
	twice := strings.TrimSuffix(tape.FileName(thisPackage, "TestTwice"), ".tape")
	want := []string{stem + ".2.tape", stem + ".3.tape", twice + ".tape", twice + ".2.tape"}
	if !slices.Equal(got, want) {
		t.Errorf("tape files %q, want %q", got, want)
	}
	if b, _ := os.ReadFile(first); string(b) != "not a tape, keep me\n" {
		t.Errorf("an existing file was overwritten: %q", b)
	}
	for _, name := range want {
		readTape(t, filepath.Join(dir, name))
	}
}

func TestTapeDirLongName(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(tape.EnvDir, dir)
	long := "TestLong/" + strings.Repeat("a_very_long_subtest_name_", 20)
	var file string
	newFake(t, long).run(func(t testing.TB) {
		file = helpers.NewArchive(t, txtar.Parse([]byte(demo))).TapeFile()
	}).wantClean(t)
	if n := len(filepath.Base(file)); n > 255 || n < 200 {
		t.Errorf("tape file name of %d bytes: %s", n, file)
	}
	if tp := readTape(t, file); tp.Header.Test != long {
		t.Errorf("header test %q, want the whole name", tp.Header.Test)
	}
}

func TestTapeDirOptionsAndErrors(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(tape.EnvDir, dir)
	var file string
	newFake(t, "TestPkg").run(func(t testing.TB) {
		file = helpers.NewArchive(t, txtar.Parse([]byte(demo)), helpers.Package("example.com/other")).TapeFile()
	}).wantClean(t)
	if want := filepath.Join(dir, tape.FileName("example.com/other", "TestPkg")); file != want {
		t.Errorf("TapeFile() = %q, want %q", file, want)
	}
	if tp := readTape(t, file); tp.Header.Package != "example.com/other" {
		t.Errorf("header package %q", tp.Header.Package)
	}

	// A tape directory that cannot be made is fatal.
	blocker := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocker, nil, 0o644)
	t.Setenv(tape.EnvDir, filepath.Join(blocker, "tapes"))
	f := newFake(t, "TestBad").run(func(t testing.TB) {
		helpers.NewArchive(t, txtar.Parse([]byte(demo)))
		t.Errorf("not reached")
	})
	f.wantErrors(t, "helpers:", "not a directory")
	if strings.Contains(f.Errors(), "not reached") {
		t.Error("an unwritable tape directory did not stop the test")
	}
}

func TestTapeDirRelative(t *testing.T) {
	start := t.TempDir()
	t.Chdir(start)
	t.Setenv(tape.EnvDir, "tapes")
	var file string
	newFake(t, "TestRel").run(func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(demo)), helpers.Chdir())
		file = env.TapeFile()
	}).wantClean(t)
	// Resolved before the Chdir into the root.
	if want := filepath.Join(start, "tapes", tape.FileName(thisPackage, "TestRel")); file != want {
		t.Errorf("TapeFile() = %q, want %q", file, want)
	}
	readTape(t, file)
}

// tapeRun runs a fake test named TestTape over the demo fixture with the
// given options and body.
func tapeRun(t *testing.T, body func(t testing.TB, env *helpers.Env), opts ...helpers.Option) *fakeTB {
	return newFake(t, "TestTape").run(func(tb testing.TB) {
		body(tb, helpers.NewArchive(tb, txtar.Parse([]byte(demo)), opts...))
	})
}

func greet(s string) func(t testing.TB, env *helpers.Env) {
	return func(t testing.TB, env *helpers.Env) { generate(t, env, s) }
}

func TestGoldenTapeLifecycle(t *testing.T) {
	t.Setenv(tape.EnvDir, "")
	t.Setenv(helpers.EnvUpdateGolden, "")
	dir := t.TempDir()
	golden := filepath.Join(dir, "TestTape.tape")
	opts := []helpers.Option{helpers.GoldenDir(dir), helpers.GoldenTape()}

	tapeRun(t, greet("hello"), opts...).wantErrors(t, "golden tape "+golden+" is missing", helpers.EnvUpdateGolden+"=1")

	t.Setenv(helpers.EnvUpdateGolden, "1")
	f := tapeRun(t, greet("hello"), opts...)
	f.wantClean(t)
	if !strings.Contains(f.Logs(), "updated golden tape "+golden) {
		t.Errorf("logs:\n%s", f.Logs())
	}
	tp := readTape(t, golden)
	if tp.Header.Test != "TestTape" || tp.Header.Package != thisPackage {
		t.Errorf("golden header %+v", tp.Header)
	}
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	os.Chtimes(golden, old, old)
	tapeRun(t, greet("hello"), opts...).wantClean(t)
	if fi, _ := os.Stat(golden); !fi.ModTime().Equal(old) {
		t.Error("an equal golden tape was rewritten")
	}

	t.Setenv(helpers.EnvUpdateGolden, "")
	tapeRun(t, greet("hello"), opts...).wantClean(t)
	tapeRun(t, greet("bye"), opts...).wantErrors(t,
		"the recording differs from the golden tape "+golden+" (path mode",
		"out/greeting.txt", tape.HashBytes([]byte("hello\n")), tape.HashBytes([]byte("bye\n")))

	// Other reads, same end state: equal in final mode only.
	readMore := func(t testing.TB, env *helpers.Env) {
		afero.ReadFile(env.Fs(), env.Path("data/config"))
		generate(t, env, "hello")
	}
	tapeRun(t, readMore, opts...).wantErrors(t, "data/config")
	tapeRun(t, readMore, append(opts, helpers.TapeMode(tape.ModeFinal))...).wantClean(t)
}

// greetOnline writes the greeting and notes whether the test had failed
// right after the call that wrote it.
func greetOnline(s string, failedAfter *bool) func(t testing.TB, env *helpers.Env) {
	return func(t testing.TB, env *helpers.Env) {
		env.Fs().MkdirAll(env.Path("out"), 0o755)
		writeGreeting(env, s)
		*failedAfter = t.Failed()
		afero.WriteFile(env.Fs(), env.Path("notes.txt"), []byte("one\nTWO\n"), 0o644)
	}
}

func writeGreeting(env *helpers.Env, s string) {
	afero.WriteFile(env.Fs(), env.Path("out/greeting.txt"), []byte(s+"\n"), 0o644)
}

func TestOnline(t *testing.T) {
	t.Setenv(tape.EnvDir, "")
	dir := t.TempDir()
	golden := filepath.Join(dir, "TestTape.tape")
	opts := []helpers.Option{helpers.GoldenDir(dir), helpers.Online()}
	var failed bool

	t.Setenv(helpers.EnvUpdateGolden, "")
	tapeRun(t, greetOnline("hello", &failed), opts...).wantErrors(t, "golden tape "+golden+" is missing")

	t.Setenv(helpers.EnvUpdateGolden, "1")
	tapeRun(t, greetOnline("hello", &failed), opts...).wantClean(t)
	t.Setenv(helpers.EnvUpdateGolden, "")
	tapeRun(t, greetOnline("hello", &failed), opts...).wantClean(t)
	if failed {
		t.Error("a run equal to the golden failed")
	}

	f := tapeRun(t, greetOnline("bye", &failed), opts...)
	f.wantErrors(t, "the recording diverges from the golden tape "+golden+" at this call",
		"out/greeting.txt", "helpers_test.writeGreeting", "tape_test.go")
	if !failed {
		t.Error("the test had not failed right after the divergent call")
	}
	if n := strings.Count(f.Errors(), "diverges"); n != 1 {
		t.Errorf("%d divergences reported, want the first only", n)
	}

	// A run that stops early diverges at the end, when the tape is closed.
	f = tapeRun(t, func(t testing.TB, env *helpers.Env) {
		env.Fs().MkdirAll(env.Path("out"), 0o755)
	}, opts...)
	f.wantErrors(t, "diverges from the golden tape", "out/greeting.txt")
}

// TestTapesFromRealTests runs TestChildProcess in a child go test process,
// with real parallel subtests, and checks the tapes it leaves.
func TestTapesFromRealTests(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary again")
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	runChild(t, "tapes", dirA, "")
	runChild(t, "tapes", dirB, "")

	var names []string
	for _, s := range childSubtests {
		names = append(names, "TestChildProcess/"+s)
	}
	var want []string
	for _, n := range names {
		want = append(want, tape.FileName(thisPackage, n))
	}
	// The test making two Envs writes two tapes.
	want = append(want, strings.TrimSuffix(tape.FileName(thisPackage, names[0]), ".tape")+".2.tape")
	slices.Sort(want)
	if got := dirNames(t, dirA); !slices.Equal(got, want) {
		t.Fatalf("tapes:\n%q\nwant:\n%q", got, want)
	}
	for _, n := range names {
		file := tape.FileName(thisPackage, n)
		a, b := readTape(t, filepath.Join(dirA, file)), readTape(t, filepath.Join(dirB, file))
		if a.Header.Package != thisPackage || a.Header.Test != n {
			t.Errorf("%s: header %q %q", file, a.Header.Package, a.Header.Test)
		}
		if len(a.Records) == 0 {
			t.Errorf("%s: no records", file)
		}
		if d := tape.Compare(a, b, tape.ModePath); d != nil {
			t.Errorf("%s: two runs differ:\n%s", file, d)
		}
	}

	// A third run into the same directory adds, never overwrites.
	before, _ := os.ReadFile(filepath.Join(dirA, want[0]))
	runChild(t, "tapes", dirA, "")
	if got := len(dirNames(t, dirA)); got != 2*len(want) {
		t.Errorf("%d tapes after a second run, want %d", got, 2*len(want))
	}
	if after, _ := os.ReadFile(filepath.Join(dirA, want[0])); !bytes.Equal(before, after) {
		t.Error("a second run changed a tape of the first")
	}
}

// TestArtifactsFromRealTest runs a failing child test with -artifacts and
// looks for the change list and the patch where go test puts artifacts.
func TestArtifactsFromRealTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary again")
	}
	out := t.TempDir()
	log := runChild(t, "artifacts", "", out)
	if !strings.Contains(log, "A out/greeting.txt") || !strings.Contains(log, "diff --git a/out/greeting.txt") {
		t.Errorf("the child's log lacks the report:\n%s", log)
	}
	var patches []string
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == helpers.ArtifactPatch {
			patches = append(patches, p)
		}
		return nil
	})
	if len(patches) != 1 {
		t.Fatalf("%d %s files under %s, want 1\n%s", len(patches), helpers.ArtifactPatch, out, log)
	}
	if !strings.Contains(filepath.ToSlash(patches[0]), "/_artifacts/") {
		t.Errorf("artifact at %s, not under _artifacts", patches[0])
	}
	checkGitApply(t, patches[0], map[string]string{"out/greeting.txt": "artifact\n"})
	changes, err := os.ReadFile(filepath.Join(filepath.Dir(patches[0]), helpers.ArtifactChanges))
	if err != nil || !strings.Contains(string(changes), "A out/greeting.txt\n") {
		t.Errorf("%s: %q, %v", helpers.ArtifactChanges, changes, err)
	}
}

const childEnv = "HELPERS_TEST_CHILD"

// runChild runs TestChildProcess in scenario with the tape directory
// tapes and, when outdir is set, -artifacts into outdir. The artifacts
// scenario fails on purpose; the others must pass.
func runChild(t *testing.T, scenario, tapes, outdir string) string {
	t.Helper()
	args := []string{"-test.run=^TestChildProcess$", "-test.count=1", "-test.v"}
	if outdir != "" {
		args = append(args, "-test.artifacts", "-test.outputdir="+outdir)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"="+scenario, tape.EnvDir+"="+tapes,
		helpers.EnvUpdateGolden+"=", helpers.EnvChaosSeed+"=")
	out, err := cmd.CombinedOutput()
	if (err != nil) != (scenario == "artifacts") {
		t.Fatalf("child %s: %v\n%s", scenario, err, out)
	}
	return string(out)
}

// TestTapeOfHungTest: a test that hangs until go test's -timeout panics
// runs no Cleanup, so its recorder is never closed; its tape still holds
// every record made more than the recorder's interval before, here all of
// them: the records of the same work in a test that ends.
func TestTapeOfHungTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary again")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1", "-test.timeout=3s")
	cmd.Env = append(os.Environ(), childEnv+"=hang", tape.EnvDir+"="+dir,
		helpers.EnvUpdateGolden+"=", helpers.EnvChaosSeed+"=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "test timed out") {
		t.Fatalf("child: %v, want a timeout\n%s", err, out)
	}
	f, err := os.Open(filepath.Join(dir, tape.FileName(thisPackage, "TestChildProcess")))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hung, err := tape.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if !hung.Truncated {
		t.Error("the tape of a test killed by -timeout has a trailer")
	}

	t.Setenv(tape.EnvDir, t.TempDir())
	var file string
	newFake(t, "TestChildProcess").run(func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(demo)))
		generate(t, env, "hang")
		file = env.TapeFile()
	}).wantClean(t)
	ended := readTape(t, file)
	if got, want := hung.Canon(tape.ModeGlobal), ended.Canon(tape.ModeGlobal); !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("the hung test's tape holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// childSubtests are the t.Name()s, below TestChildProcess, of the tests
// of the tapes scenario: testing turns spaces into underscores.
var childSubtests = []string{"two_envs", "p/1", "p/2", "p/3", "deeper/a_b/c#d"}

// TestChildProcess is run by the tests above in a child process; it does
// nothing otherwise.
func TestChildProcess(t *testing.T) {
	scenario := os.Getenv(childEnv)
	switch scenario {
	case "":
		t.Skip("run by TestTapesFromRealTests and TestArtifactsFromRealTest")
	case "artifacts":
		env := helpers.NewArchive(t, txtar.Parse([]byte(demo)))
		env.Fs().MkdirAll(env.Path("out"), 0o755)
		writeGreeting(env, "artifact")
		t.Errorf("failing on purpose")
	case "hang":
		env := helpers.NewArchive(t, txtar.Parse([]byte(demo)))
		generate(t, env, "hang")
		time.Sleep(time.Hour) // until -test.timeout ends the process
	case "tapes":
		work := func(t *testing.T) {
			env := helpers.NewTxtar(t, filepath.Join(treesDir, "project.txtar"))
			generate(t, env, t.Name())
			afero.ReadDir(env.Fs(), env.Path("internal"))
		}
		t.Run("two envs", func(t *testing.T) {
			t.Parallel()
			work(t)
			helpers.NewTxtar(t, filepath.Join(treesDir, "small.txtar"))
		})
		t.Run("p", func(t *testing.T) {
			for i := 1; i <= 3; i++ {
				t.Run(fmt.Sprint(i), func(t *testing.T) {
					t.Parallel()
					work(t)
				})
			}
		})
		t.Run("deeper", func(t *testing.T) {
			t.Parallel()
			t.Run("a b", func(t *testing.T) {
				t.Run("c#d", func(t *testing.T) {
					t.Parallel()
					work(t)
				})
			})
		})
	default:
		t.Fatalf("unknown scenario %q", scenario)
	}
}

// A golden tape keeps the versions of the files it records beside it
// (<name>.content), and a mismatch then shows a text diff of each file
// whose bytes differ, golden against this run.
func TestGoldenTapeContentDiff(t *testing.T) {
	t.Setenv(tape.EnvDir, "")
	dir := t.TempDir()
	opts := []helpers.Option{helpers.GoldenDir(dir), helpers.GoldenTape()}
	t.Setenv(helpers.EnvUpdateGolden, "1")
	tapeRun(t, greet("hello"), opts...).wantClean(t)
	kept := filepath.Join(dir, "TestTape.content")
	if b, err := os.ReadFile(tape.ContentPath(kept, tape.HashBytes([]byte("hello\n")))); err != nil || string(b) != "hello\n" {
		t.Fatalf("the golden's version of out/greeting.txt was not kept in %s: %q, %v", kept, b, err)
	}
	t.Setenv(helpers.EnvUpdateGolden, "")
	f := tapeRun(t, greet("bye"), opts...)
	f.wantErrors(t, "the contents (a: golden, b: this run):", "diff --git a/out/greeting.txt b/out/greeting.txt", "\n-hello\n", "\n+bye\n")
	// Capture off: hashes only, no diff.
	t.Setenv(helpers.EnvTapeContent, "0")
	f = tapeRun(t, greet("bye"), opts...)
	f.wantErrors(t, "out/greeting.txt")
	if strings.Contains(f.Errors(), "diff --git") {
		t.Errorf("a text diff without captured contents:\n%s", f.Errors())
	}
}
