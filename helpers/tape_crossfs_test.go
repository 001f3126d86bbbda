package helpers_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/zeebo/blake3"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/overlayfs"
	"github.com/cowfs/cowfs/tape"
)

// crossTree is the fixture of TestTapeSameOnOsAndOverlay.
func crossTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"in.txt":     "alpha\nbeta\ngamma\n",
		"big.bin":    string(bytes.Repeat([]byte("0123456789abcdef"), 9000)),
		"d/x.txt":    "x",
		"d/sub/y.md": "y",
		"log.txt":    "old\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("in.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// crossProgram does what a program under test does, through fsys, with
// names under root; bufSize sets the buffer sizes of its bufio and
// io.CopyBuffer calls, which must not show on the tape.
func crossProgram(t *testing.T, fsys afero.Fs, root string, bufSize int) {
	j := func(s string) string { return filepath.Join(root, s) }
	if root == "" {
		j = func(s string) string { return s } // relative to the working directory
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	f, err := fsys.Open(j("in.txt"))
	check(err)
	sc := bufio.NewScanner(bufio.NewReaderSize(f, bufSize))
	sc.Buffer(make([]byte, bufSize), 1<<20)
	for sc.Scan() {
	}
	check(f.Close())
	f, err = fsys.Open(j("big.bin"))
	check(err)
	_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, make([]byte, bufSize))
	check(err)
	check(f.Close())
	f, err = fsys.Open(j("big.bin"))
	check(err)
	_, err = f.ReadAt(make([]byte, 100), 5000) // a span, and the rest hashed
	check(err)
	check(f.Close())

	if _, err := fsys.Create(j("out/new.txt")); err == nil {
		t.Fatal("Create under a missing directory succeeded")
	}
	check(fsys.MkdirAll(j("out"), 0o755))
	out, err := fsys.Create(j("out/new.txt"))
	check(err)
	w := bufio.NewWriterSize(out, bufSize)
	for i := range 2000 {
		w.WriteString("line ")
		w.WriteByte(byte('a' + i%26))
		w.WriteByte('\n')
	}
	check(w.Flush())
	check(out.Close())
	lg, err := fsys.OpenFile(j("log.txt"), os.O_WRONLY|os.O_APPEND, 0)
	check(err)
	_, err = lg.Write([]byte("appended\n"))
	check(err)
	check(lg.Close())
	rw, err := fsys.OpenFile(j("d/x.txt"), os.O_RDWR, 0)
	check(err)
	_, err = rw.WriteAt([]byte("XYZ"), 0)
	check(err)
	check(rw.Close())

	if _, err := fsys.Stat(j("in.txt")); err != nil {
		t.Fatal(err)
	}
	fsys.Stat(j("missing"))
	fsys.(afero.Lstater).LstatIfPossible(j("link"))
	fsys.(afero.LinkReader).ReadlinkIfPossible(j("link"))
	check(fsys.(afero.Linker).SymlinkIfPossible("d/x.txt", j("link2")))
	dd, err := fsys.Open(j("d"))
	check(err)
	_, err = dd.Readdirnames(-1)
	check(err)
	check(dd.Close())
	check(fsys.Rename(j("d/sub"), j("moved")))
	check(fsys.Remove(j("in.txt")))
	fsys.Remove(j("d")) // not empty
	check(fsys.Chmod(j("log.txt"), 0o600))
	check(fsys.Chtimes(j("log.txt"), time.Unix(1e9, 0), time.Unix(1e9, 0)))
	check(fsys.RemoveAll(j("moved")))
}

// TestTapeSameOnOsAndOverlay: one program, run on afero.OsFs over a copy
// of a tree and on an overlay of another copy (where it behaves the same),
// records tapes equal in every mode, whatever the buffer sizes; and the
// hashes are BLAKE3 of what os holds afterwards.
func TestTapeSameOnOsAndOverlay(t *testing.T) {
	record := func(fsys afero.Fs, root, names string, bufSize int) *tape.Tape {
		var buf bytes.Buffer
		rec := tape.NewRecorder(&buf)
		crossProgram(t, rec.Wrap(fsys, root), names, bufSize)
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		tp, err := tape.Read(&buf)
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	osRoot := crossTree(t)
	osTape := record(afero.NewOsFs(), osRoot, osRoot, 16)
	ovRoot := crossTree(t)
	ov, err := overlayfs.New(ovRoot)
	if err != nil {
		t.Fatal(err)
	}
	ovTape := record(ov, ov.Root(), ov.Root(), 64<<10)
	// Names relative to the working directory, on a third copy.
	relRoot := crossTree(t)
	rel, err := overlayfs.New(relRoot)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(relRoot)
	relTape := record(rel, relRoot, "", 4096)
	for _, m := range []tape.Mode{tape.ModePath, tape.ModeGlobal, tape.ModeSet, tape.ModeFinal} {
		if d := tape.Compare(osTape, ovTape, m); d != nil {
			t.Errorf("OsFs vs overlay: %v", d)
		}
		if d := tape.Compare(osTape, relTape, m); d != nil {
			t.Errorf("OsFs vs overlay with relative names: %v", d)
		}
	}
	hashed := 0
	for _, r := range osTape.Records {
		if r.Op != tape.OpOpen || r.Hash == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(osRoot, cmp.Or(r.To, r.Path)))
		if err != nil {
			t.Fatal(err)
		}
		sum := blake3.Sum256(b)
		if want := hex.EncodeToString(sum[:]); r.Hash != want {
			t.Errorf("%s: hash %s, os holds %s", r.Path, r.Hash, want)
		}
		hashed++
	}
	if hashed != 3 {
		t.Errorf("%d written files hashed, want 3 (out/new.txt, log.txt, d/x.txt)", hashed)
	}
}

// TestTapeRootAsGiven: a root given through a symlink (as t.TempDir() is
// on macOS, /var -> /private/var) is recorded under either spelling: the
// code under test builds its names from the root it was given, and a
// command's argv holds it. filepath.EvalSymlinks is the oracle of which
// names are inside.
func TestTapeRootAsGiven(t *testing.T) {
	real := t.TempDir()
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(real, alias); err != nil {
		t.Fatal(err)
	}
	if ev, err := filepath.EvalSymlinks(alias); err != nil || ev == alias {
		t.Fatalf("alias %s resolves to %s, %v", alias, ev, err)
	}
	if err := os.WriteFile(filepath.Join(real, "in.txt"), []byte("in"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(tape.EnvDir, t.TempDir())
	var tapeFile string
	t.Run("env", func(t *testing.T) {
		env := helpers.New(t, alias)
		tapeFile = env.TapeFile()
		if _, err := afero.ReadFile(env.Fs(), filepath.Join(alias, "in.txt")); err != nil {
			t.Fatal(err)
		}
		if err := afero.WriteFile(env.Fs(), filepath.Join(alias, "out.txt"), []byte("out"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Fs().Stat(filepath.Join(env.Root(), "out.txt")); err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS == "linux" {
			if _, err := exec.LookPath("sh"); err == nil {
				c := exec.Command("sh", "-c", `echo x > "$0/cmd.txt"`, alias)
				if err := env.Run(c); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	tp := readTape(t, tapeFile)
	var got []string
	for _, r := range tp.Records {
		got = append(got, r.Op+" "+r.Path)
		for _, a := range r.Cmd {
			if strings.Contains(a, alias) || strings.Contains(a, real) {
				t.Errorf("%s: argv %q holds the root", r.Op, r.Cmd)
			}
		}
	}
	want := []string{"fstat in.txt", "open in.txt", "open out.txt", "stat out.txt"}
	if len(got) > 4 {
		want = append(want, "cmd-write cmd.txt")
	}
	if !slices.Equal(got, want) {
		t.Errorf("records %q, want %q", got, want)
	}
}
