package helpers_test

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/tape"
)

func needRun(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("Env.Run needs Linux")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
}

// runFixture writes the tree the command runs on.
func runFixture(t *testing.T, dir string) {
	t.Helper()
	for name, s := range map[string]string{"keep.txt": "keep\n", "gone.txt": "gone\n", "same.txt": "same\n", "d/x": "x\n"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const runScript = `mkdir out && printf hello > out/a && ln -s a out/l && mkfifo out/p && chmod 600 keep.txt && rm gone.txt && rm -r d && echo new >> same.txt && touch same.txt`

// TestEnvRunTape runs a command through Env.Run with recording on, and
// checks the tape's command records against the same command run on a
// plain copy of the fixture (hashes computed from what os reads there).
func TestEnvRunTape(t *testing.T) {
	needRun(t)
	oracle := t.TempDir()
	runFixture(t, oracle)
	cmd := exec.Command("sh", "-c", runScript)
	cmd.Dir = oracle
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oracle: %v\n%s", err, out)
	}
	read := func(name string) (string, int64) {
		b, err := os.ReadFile(filepath.Join(oracle, name))
		if err != nil {
			t.Fatal(err)
		}
		return tape.HashBytes(b), int64(len(b))
	}
	mode := func(name string) string {
		fi, err := os.Lstat(filepath.Join(oracle, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().String()
	}
	target, _ := os.Readlink(filepath.Join(oracle, "out/l"))
	ha, na := read("out/a")
	hs, ns := read("same.txt")
	want := []string{
		"cmd-remove d",
		"cmd-remove d/x",
		"cmd-remove gone.txt",
		"cmd-chmod keep.txt mode=" + mode("keep.txt"),
		"cmd-mkdir out mode=" + mode("out"),
		"cmd-write out/a mode=" + mode("out/a") + " size=" + strconv.FormatInt(na, 10) + " hash=" + ha,
		"cmd-symlink out/l target=" + target,
		"cmd-mknod out/p mode=" + mode("out/p"),
		"cmd-write same.txt mode=" + mode("same.txt") + " size=" + strconv.FormatInt(ns, 10) + " hash=" + hs,
	}

	dir := t.TempDir()
	t.Setenv(tape.EnvDir, dir)
	var tapeFile, root string
	t.Run("run", func(t *testing.T) {
		root = t.TempDir()
		runFixture(t, root)
		env := helpers.New(t, root)
		tapeFile = env.TapeFile()
		c := exec.Command("sh", "-c", runScript)
		c.Dir = root
		if err := env.Run(c); err != nil {
			t.Fatal(err)
		}
	})
	tp := readTape(t, tapeFile)
	var got []string
	for _, r := range tp.Records {
		if !tape.IsCommandOp(r.Op) {
			t.Errorf("unexpected record %s", r.String())
			continue
		}
		if want := []string{"sh", "-c", runScript}; !slices.Equal(r.Cmd, want) {
			t.Errorf("cmd %q, want %q", r.Cmd, want)
		}
		r.Cmd = nil
		got = append(got, r.Canon())
	}
	if !slices.Equal(got, want) {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestEnvRunDeterminism runs a nondeterministic and a deterministic
// command in two recorded runs each: the tapes of the first diverge at the
// file it writes, those of the second are identical. The root argument
// differs between runs (two temporary roots) and must not show.
func TestEnvRunDeterminism(t *testing.T) {
	needRun(t)
	dir := t.TempDir()
	t.Setenv(tape.EnvDir, dir)
	run := func(name, script string) *tape.Tape {
		var file string
		t.Run(name, func(t *testing.T) {
			env := helpers.New(t, t.TempDir())
			file = env.TapeFile()
			if err := env.Run(exec.Command("sh", "-c", script+`; : "$0"`, env.Root())); err != nil {
				t.Fatal(err)
			}
		})
		return readTape(t, file)
	}
	nanos := `date +%N > nanos.txt; echo stable > other.txt`
	a, b := run("nanos", nanos), run("nanos", nanos)
	d := tape.Compare(a, b, tape.ModePath)
	if d == nil || d.Path != "nanos.txt" {
		t.Errorf("nondeterministic command: divergence %v, want one at nanos.txt", d)
	}
	if d := tape.Compare(a, b, tape.ModeFinal); d == nil {
		t.Error("nondeterministic command: final states compare equal")
	}
	stable := `echo stable > out.txt; mkdir -p sub; echo x > sub/f`
	c, e := run("stable", stable), run("stable", stable)
	if class, d := tape.Classify(c, e); class != tape.Identical {
		t.Errorf("deterministic command: %v\n%v", class, d)
	}
	if len(c.Records) != 3 {
		t.Errorf("deterministic command: %d records, want 3", len(c.Records))
	}
}

// TestEnvRunWithoutTape: Env.Run works without recording, and the
// command's changes are the overlay's.
func TestEnvRunWithoutTape(t *testing.T) {
	needRun(t)
	t.Setenv(tape.EnvDir, "")
	root := t.TempDir()
	runFixture(t, root)
	env := helpers.New(t, root)
	c := exec.Command("sh", "-c", "echo x > made.txt; exit 4")
	err := env.Run(c)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("Run: %v, want exit status 4", err)
	}
	if fi, err := env.Fs().Stat(env.Path("made.txt")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("made.txt in the overlay: %v, %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(root, "made.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("made.txt reached the real root: %v", err)
	}
}

// TestEnvRunOddName: a command that writes a file whose name is not UTF-8
// (any bytes but NUL and '/' are a name to the kernel, the oracle here:
// a plain run of the command on a copy) is recorded, not refused: one
// cmd-write record with those bytes as its path and the BLAKE3 of what os
// reads there.
func TestEnvRunOddName(t *testing.T) {
	needRun(t)
	const script = `printf odd > "$(printf 'n\377')"`
	oracle := t.TempDir()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = oracle
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oracle: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(oracle, "n\xff"))
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	sum := blake3.Sum256(b)
	dir := t.TempDir()
	t.Setenv(tape.EnvDir, dir)
	var tapeFile string
	t.Run("run", func(t *testing.T) {
		root := t.TempDir()
		env := helpers.New(t, root)
		tapeFile = env.TapeFile()
		c := exec.Command("sh", "-c", script)
		c.Dir = root
		if err := env.Run(c); err != nil {
			t.Fatal(err)
		}
	})
	tp := readTape(t, tapeFile)
	if len(tp.Records) != 1 || tp.Records[0].Op != tape.OpCmdWrite || tp.Records[0].Path != "n\xff" ||
		tp.Records[0].Hash != hex.EncodeToString(sum[:]) {
		t.Errorf("records %v, want one cmd-write of \"n\\xff\" with hash %x", tp.Records, sum)
	}
}
