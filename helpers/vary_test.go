package helpers_test

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/overlayfs"
	"github.com/cowfs/cowfs/tape"
)

// Every exported method of *overlayfs.Fs is reachable from Env.Fs through
// helpers.As, whatever wraps the overlay (tape recorder, chaos shuffler):
// a wrapper that hides its inner file system, or declares a method of the
// overlay's name with another signature, fails here.
func TestAsReachesEveryOverlayMethod(t *testing.T) {
	t.Setenv(tape.EnvDir, t.TempDir())
	t.Setenv(helpers.EnvVary, "listing,shortread")
	t.Setenv(helpers.EnvVarySeed, "7")
	env := helpers.New(t, t.TempDir(), helpers.Chaos())
	ov := reflect.TypeFor[*overlayfs.Fs]()
	var chain []reflect.Value
	for fsys := env.Fs(); fsys != nil; {
		chain = append(chain, reflect.ValueOf(fsys))
		switch w := fsys.(type) {
		case interface{ Unwrap() afero.Fs }:
			fsys = w.Unwrap()
		case interface{ Inner() afero.Fs }:
			fsys = w.Inner()
		default:
			fsys = nil
		}
	}
	if len(chain) < 3 {
		t.Fatalf("Env.Fs is a chain of %d file systems, want chaos, tape, overlay", len(chain))
	}
	for i := range ov.NumMethod() {
		m := ov.Method(i)
		want := m.Func.Type()
		found := false
		for _, v := range chain {
			vm, ok := v.Type().MethodByName(m.Name)
			if !ok {
				continue
			}
			// The first wrapper that declares the name must forward it
			// with the overlay's signature (receiver aside).
			got := vm.Func.Type()
			if got.NumIn() != want.NumIn() || got.NumOut() != want.NumOut() {
				t.Errorf("%s: %s on %s has another signature than on *overlayfs.Fs", m.Name, got, v.Type())
			}
			for j := 1; j < got.NumIn() && j < want.NumIn(); j++ {
				if got.In(j) != want.In(j) {
					t.Errorf("%s: argument %d is %s on %s, %s on *overlayfs.Fs", m.Name, j, got.In(j), v.Type(), want.In(j))
				}
			}
			found = true
			break
		}
		if !found {
			t.Errorf("*overlayfs.Fs.%s is not reachable through Env.Fs with helpers.As", m.Name)
		}
	}
	if _, ok := helpers.As[*overlayfs.Fs](env.Fs()); !ok {
		t.Error("helpers.As[*overlayfs.Fs](env.Fs()) found nothing")
	}
	if _, ok := helpers.As[interface{ Commit() error }](afero.NewMemMapFs()); ok {
		t.Error("helpers.As found Commit on a MemMapFs")
	}
}

// shortread: Read returns fewer bytes than asked, yet the bytes read in
// a loop are the file's, as os reads them.
func TestVaryShortRead(t *testing.T) {
	dir := t.TempDir()
	want := strings.Repeat("0123456789abcdef", 512)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(helpers.EnvVary, "shortread")
	t.Setenv(helpers.EnvVarySeed, "3")
	env := helpers.New(t, dir)
	f, err := env.Fs().Open(env.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, len(want))
	n, err := f.Read(buf)
	if err != nil || n >= len(want) || n < 1 {
		t.Fatalf("first Read = %d, %v; want 1 to %d bytes", n, err, len(want)-1)
	}
	rest, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	real, err := os.ReadFile(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]) + string(rest); got != string(real) {
		t.Errorf("short reads gave %d bytes, os %d, or other bytes", len(got), len(real))
	}
}

// rootpath: the Env's root is a copy at another absolute path, with the
// same tree as os sees in the original; the tape header records the
// variation.
func TestVaryRootPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "x"), []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a/x", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	tapes := t.TempDir()
	t.Setenv(tape.EnvDir, tapes)
	t.Setenv(helpers.EnvVary, "rootpath,tz")
	t.Setenv(helpers.EnvVarySeed, "5")
	env := helpers.New(t, dir)
	real, _ := filepath.EvalSymlinks(dir)
	if env.Root() == real {
		t.Fatalf("root %s was not moved", env.Root())
	}
	for _, rel := range []string{"a", "a/empty", "a/x", "link"} {
		want, err := os.Lstat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := env.Fs().(afero.Lstater).LstatIfPossible(env.Path(rel))
		if err != nil {
			t.Fatal(err)
		}
		if got.Mode() != want.Mode() || (want.Mode().IsRegular() && got.Size() != want.Size()) {
			t.Errorf("%s: %v %d in the moved root, os: %v %d", rel, got.Mode(), got.Size(), want.Mode(), want.Size())
		}
	}
	if _, err := env.Fs().Stat(env.Path("a/x")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b, err := os.ReadFile(env.TapeFile())
		if err != nil {
			t.Error(err)
			return
		}
		head, _, _ := strings.Cut(string(b), "\n")
		if !strings.Contains(head, `"vary":"rootpath,tz"`) || !strings.Contains(head, `"vary-seed":"5"`) {
			t.Errorf("tape header lacks the variation: %s", head)
		}
	})
}

// rootpath moves the root and nothing else: the copy has the times of the
// original (a test that prints or compares fixture mtimes must not be
// told "provoked by rootpath"), and a read-only directory's files are
// copied into it (as a non-root user, who cannot write into a 0555
// directory, would otherwise fail). os's Lstat of the original is the
// oracle.
func TestVaryRootPathKeepsTimesAndReadOnlyDirs(t *testing.T) {
	dir := t.TempDir()
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, d := range []string{"ro", "ro/sub", "rw"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"ro/a", "ro/sub/b", "rw/c", "top"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range []string{"ro/a", "ro/sub/b", "rw/c", "top", "ro/sub", "ro", "rw"} {
		ts := old.Add(time.Duration(i) * time.Hour)
		if err := os.Chtimes(filepath.Join(dir, p), ts, ts); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("top", filepath.Join(dir, "rw/link")); err != nil {
		t.Fatal(err)
	}
	lchtimes(t, filepath.Join(dir, "rw/link"), old)
	if err := os.Chtimes(filepath.Join(dir, "rw"), old, old); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ro/sub", "ro"} {
		if err := os.Chmod(filepath.Join(dir, d), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "ro"), 0o755); os.Chmod(filepath.Join(dir, "ro/sub"), 0o755) })
	t.Setenv(helpers.EnvVary, "rootpath")
	t.Setenv(helpers.EnvVarySeed, "9")
	env := helpers.New(t, dir)
	t.Cleanup(func() {
		os.Chmod(filepath.Join(env.Root(), "ro"), 0o755)
		os.Chmod(filepath.Join(env.Root(), "ro/sub"), 0o755)
	})
	for _, rel := range []string{"ro", "ro/sub", "ro/a", "ro/sub/b", "rw", "rw/c", "rw/link", "top"} {
		want, err := os.Lstat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.Lstat(filepath.Join(env.Root(), rel))
		if err != nil {
			t.Errorf("%s: %v in the moved root", rel, err)
			continue
		}
		if got.Mode() != want.Mode() || !got.ModTime().Equal(want.ModTime()) {
			t.Errorf("%s: %v %v in the moved root, os: %v %v", rel, got.Mode(), got.ModTime(), want.Mode(), want.ModTime())
		}
	}
}
