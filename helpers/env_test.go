package helpers_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/overlayfs"
	"github.com/cowfs/cowfs/tape"
)

// treesDir holds the fixture trees shared by the repository's packages.
const treesDir = "../testdata/trees"

// treeOf lists every entry under dir as os sees it, one line per path:
// "path mode" plus the content of a file or the target of a symlink.
func treeOf(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			v += " -> " + target
		}
		out[filepath.ToSlash(rel)] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, want, got map[string]string) {
	t.Helper()
	for p, w := range want {
		if g, ok := got[p]; !ok {
			t.Errorf("%s: missing, want %q", p, w)
		} else if g != w {
			t.Errorf("%s: got %q, want %q", p, g, w)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: unexpected %q", p, g)
		}
	}
}

// noTapes makes sure a test does not record, whatever the environment of
// the go test run says.
func noTapes(t *testing.T) { t.Setenv(tape.EnvDir, "") }

const demo = `mode bin/run 0755
symlink link.txt notes.txt
-- notes.txt --
one
two
-- bin/run --
#!/bin/sh
-- data/config --
name=demo
`

func TestNewLeavesRootAlone(t *testing.T) {
	noTapes(t)
	root := t.TempDir()
	if err := helpers.Extract(txtar.Parse([]byte(demo)), root); err != nil {
		t.Fatal(err)
	}
	before := treeOf(t, root)

	env := helpers.New(t, root)
	fsys := env.Fs()
	if err := afero.WriteFile(fsys, env.Path("notes.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.RemoveAll(env.Path("data")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.MkdirAll(env.Path("out/deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := afero.WriteFile(fsys, env.Path("out/deep/x"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	sameTree(t, before, treeOf(t, root))
	env.Changed("M notes.txt", "D data", "D data/config", "A out", "A out/deep", "A out/deep/x")
	env.ChangedPaths("notes.txt", "data", "data/config", "out", "out/deep", "out/deep/x")
	env.FileContent("notes.txt", "changed\n")
	env.FileContent("link.txt", "changed\n") // through the symlink, in the merged view
	env.FileContent("bin/run", "#!/bin/sh\n")

	canon, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	if env.Root() != canon || env.Overlay().Root() != canon {
		t.Errorf("Root() = %q, Overlay().Root() = %q, want %q", env.Root(), env.Overlay().Root(), canon)
	}
	if env.Fs() != afero.Fs(env.Overlay()) {
		t.Errorf("without tape or chaos, Fs() is %T, want the overlay itself", env.Fs())
	}
	if env.TapeFile() != "" {
		t.Errorf("TapeFile() = %q without %s", env.TapeFile(), tape.EnvDir)
	}
}

func TestNewMissingRootIsFatal(t *testing.T) {
	noTapes(t)
	f := newFake(t, "TestX").run(func(t testing.TB) {
		helpers.New(t, filepath.Join(t.TempDir(), "nope"))
		t.Errorf("not reached")
	})
	f.wantErrors(t, "helpers:", "nope")
	if strings.Contains(f.Errors(), "not reached") || !f.fatal {
		t.Errorf("New over a missing root did not stop the test:\n%s", f.Errors())
	}
}

func TestNewTxtarFixtures(t *testing.T) {
	noTapes(t)
	for _, name := range []string{"small", "project", "links"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(treesDir, name+".txtar")
			env := helpers.NewTxtar(t, file)
			// The oracle: the same archive extracted by hand, seen by os.
			want := t.TempDir()
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := helpers.Extract(ar, want); err != nil {
				t.Fatal(err)
			}
			sameTree(t, treeOf(t, want), treeOf(t, env.Root()))
			env.NoChanges()
			if len(ar.Files) == 0 {
				t.Fatal("empty fixture")
			}
			f := ar.Files[0]
			env.FileContent(f.Name, string(f.Data))
		})
	}
}

func TestNewTxtarErrors(t *testing.T) {
	noTapes(t)
	f := newFake(t, "TestX").run(func(t testing.TB) {
		helpers.NewTxtar(t, "testdata/does-not-exist.txtar")
	})
	f.wantErrors(t, "fixture", "does-not-exist.txtar")

	f = newFake(t, "TestX").run(func(t testing.TB) {
		helpers.NewArchive(t, txtar.Parse([]byte("-- ../escape --\nx\n")))
	})
	f.wantErrors(t, "fixture", "../escape", "not a local slash path")
}

func TestExtract(t *testing.T) {
	dir := t.TempDir()
	ar := txtar.Parse([]byte(`A fixture. Prose lines are ignored, directives are not:
mode bin 0700
mode bin/tool 4755
dir "empty dir" 0750
dir plain
symlink "a link" "../target with space"
symlink sub/rel ../notes
-- notes --
n
-- bin/tool --
t
-- sub/deeper/file --
f
`))
	if err := helpers.Extract(ar, dir); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"notes":           "-rw-r--r-- n\n",
		"bin":             "drwx------",
		"bin/tool":        "urwxr-xr-x t\n",
		"empty dir":       "drwxr-x---",
		"plain":           "drwxr-xr-x",
		"a link":          "Lrwxrwxrwx -> ../target with space",
		"sub":             "drwxr-xr-x",
		"sub/rel":         "Lrwxrwxrwx -> ../notes",
		"sub/deeper":      "drwxr-xr-x",
		"sub/deeper/file": "-rw-r--r-- f\n",
	}
	sameTree(t, want, treeOf(t, dir))
	for _, p := range []string{"notes", "bin", "empty dir", "sub/deeper"} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if want := "2024-01-02T03:04:05Z"; fi.ModTime().UTC().Format("2006-01-02T15:04:05Z") != want {
			t.Errorf("%s: mtime %v, want %s", p, fi.ModTime().UTC(), want)
		}
	}
}

func TestExtractRefuses(t *testing.T) {
	for _, tc := range []struct{ name, archive string }{
		{"dotdot", "-- a/../../x --\n"},
		{"absolute", "-- /etc/x --\n"},
		{"twice", "-- a --\n-- a --\n"},
		{"file and dir", "dir a\n-- a --\n"},
		{"symlink escape", "symlink ../l x\n"},
		{"bad perm", "mode a 9\n-- a --\n"},
		{"perm too big", "mode a 17777\n-- a --\n"},
		{"arity", "symlink onlyone\n"},
		{"bad quote", "dir \"open\n"},
		{"mode escape", "mode ../a 0644\n"},
		// Directives reaching out through a symlink an earlier one made.
		{"dir through symlink", "symlink s ..\ndir s/made\n"},
		{"symlink through symlink", "symlink s ..\nsymlink s/made x\n"},
		{"mode through symlink", "symlink s ../victim\nmode s 0777\n"},
		{"mode below symlink", "symlink s ..\nmode s/victim 0777\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			victim := filepath.Join(parent, "victim")
			if err := os.WriteFile(victim, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(parent, "root")
			err := helpers.Extract(txtar.Parse([]byte(tc.archive)), dir)
			if !errors.Is(err, helpers.ErrFixture) {
				t.Fatalf("Extract = %v, want an error wrapping ErrFixture", err)
			}
			// Nothing may land or change outside dir.
			if got := osNames(t, parent); !slices.Equal(got, []string{"root", "victim"}) {
				t.Errorf("entries next to the root: %q", got)
			}
			if fi, err := os.Stat(victim); err != nil || fi.Mode() != 0o600 {
				t.Errorf("the file next to the root: %v, %v", fi.Mode(), err)
			}
		})
	}
}

func TestChdir(t *testing.T) {
	noTapes(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	golden := t.TempDir()
	t.Run("inner", func(t *testing.T) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(demo)), helpers.Chdir(), helpers.GoldenDir(golden))
		here, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		if here != env.Root() {
			t.Fatalf("working directory %q, want the root %q", here, env.Root())
		}
		// Relative names now resolve in the root.
		if err := afero.WriteFile(env.Fs(), "notes.txt", []byte("relative\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		env.Changed("M notes.txt")
		t.Setenv(helpers.EnvUpdateGolden, "1")
		env.GoldenPatch()
	})
	if here, _ := os.Getwd(); here != wd {
		t.Errorf("working directory not restored: %q, want %q", here, wd)
	}
	// The golden directory was fixed before the Chdir.
	if _, err := os.Stat(filepath.Join(golden, "TestChdir__inner.patch")); err != nil {
		t.Errorf("golden not written where it belongs: %v", err)
	}
}

func TestOverlayOptions(t *testing.T) {
	noTapes(t)
	env := helpers.NewArchive(t, txtar.Parse([]byte(demo)),
		helpers.OverlayOptions(overlayfs.WithUmask(0o077), overlayfs.DenyOutsideReads()))
	if err := afero.WriteFile(env.Fs(), env.Path("new"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	fi, err := env.Fs().Stat(env.Path("new"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("umask option lost: mode %v", fi.Mode())
	}
	outside := filepath.Join(t.TempDir(), "f")
	os.WriteFile(outside, nil, 0o644)
	if _, err := env.Fs().Stat(outside); !errors.Is(err, overlayfs.ErrOutsideRoot) {
		t.Errorf("outside read: %v, want ErrOutsideRoot", err)
	}
}

func TestGoldenName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"TestX", "TestX"},
		{"TestX/sub", "TestX__sub"},
		{"TestX/case_#1", "TestX__case__1"},
		{"TestX/a.b-c_d", "TestX__a.b-c_d"},
		{"TestX/ü", "TestX____"},
		{"..", "_.."},
		{"", "_"},
	} {
		if got := helpers.GoldenName(tc.in); got != tc.want {
			t.Errorf("GoldenName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// And what testing does with a subtest name.
	t.Run("case #1", func(t *testing.T) {
		if got := helpers.GoldenName(t.Name()); got != "TestGoldenName__case__1" {
			t.Errorf("GoldenName(%q) = %q", t.Name(), got)
		}
	})
}

func TestCallerPackage(t *testing.T) {
	for _, tc := range []struct{ fn, want string }{
		{"github.com/cowfs/cowfs/helpers_test.TestX", "github.com/cowfs/cowfs/helpers"},
		{"github.com/cowfs/cowfs/helpers_test.TestX.func1.2", "github.com/cowfs/cowfs/helpers"},
		{"github.com/cowfs/cowfs/helpers.(*Env).Fs", "github.com/cowfs/cowfs/helpers"},
		{"example.com/m/p.gen[...]", "example.com/m/p"},
		{"gopkg.in/yaml%2ev3.TestX", "gopkg.in/yaml.v3"},
		{"gopkg.in/yaml%2ev3_test.TestX.func1", "gopkg.in/yaml.v3"},
		{"main.main", "main"},
		{"example.com/a.b/c.F", "example.com/a.b/c"},
		{"nodot", ""},
	} {
		if got := helpers.CallerPackage(tc.fn); got != tc.want {
			t.Errorf("callerPackage(%q) = %q, want %q", tc.fn, got, tc.want)
		}
	}
}

func TestTestPackage(t *testing.T) {
	if got, want := helpers.TestPackage(), "github.com/cowfs/cowfs/helpers"; got != want {
		t.Errorf("testPackage() = %q, want %q", got, want)
	}
}
