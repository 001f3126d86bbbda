package helpers_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
)

// runExample runs body as the test name with a stand-in for *testing.T
// that prints what the test reports. In a real test, body is the test
// function and t its *testing.T.
func runExample(name string, body func(t testing.TB)) {
	(&fakeTB{name: name, out: os.Stdout}).run(body)
}

// render is the code under test of the examples: it reads a template
// name from config and writes a page under out/.
func render(fsys afero.Fs, root string) error {
	cfg, err := afero.ReadFile(fsys, filepath.Join(root, "config"))
	if err != nil {
		return err
	}
	title := strings.TrimSpace(strings.TrimPrefix(string(cfg), "title="))
	if err := fsys.MkdirAll(filepath.Join(root, "out"), 0o755); err != nil {
		return err
	}
	page := fmt.Sprintf("<h1>%s</h1>\n", title)
	return afero.WriteFile(fsys, filepath.Join(root, "out", "index.html"), []byte(page), 0o644)
}

const site = `-- config --
title=Hello
`

func Example() {
	runExample("TestRender", func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(site)))
		if err := render(env.Fs(), env.Root()); err != nil {
			t.Fatal(err)
		}
		env.Changed("A out", "A out/index.html")
		env.FileContent("out/index.html", "<h1>Hello</h1>\n")
		fmt.Print(env.Patch())

		_, err := os.Stat(filepath.Join(env.Root(), "out"))
		fmt.Println("written to the real root:", !os.IsNotExist(err))
	})
	// Output:
	// diff --git a/out/index.html b/out/index.html
	// new file mode 100644
	// index 0000000..986a4a1
	// --- /dev/null
	// +++ b/out/index.html
	// @@ -0,0 +1 @@
	// +<h1>Hello</h1>
	// written to the real root: false
}

// The golden patch of this example is testdata/TestRender.patch, created
// by running the test once with COWFS_UPDATE_GOLDEN=1.
func ExampleEnv_GoldenPatch() {
	runExample("TestRender", func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(site)))
		if err := render(env.Fs(), env.Root()); err != nil {
			t.Fatal(err)
		}
		fmt.Println("matches the golden:", env.GoldenPatch())
	})
	// Output:
	// matches the golden: true
}

// A failing assertion reports what differs, and the helper then logs the
// overlay's changes and patch.
func ExampleEnv_NoChanges() {
	runExample("TestReadOnly", func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(site)))
		afero.WriteFile(env.Fs(), env.Path("config"), []byte("title=Bye\n"), 0o644)
		env.NoChanges()
	})
	// Output:
	// helpers: want no changes, got 1:
	// M config
	//
	// helpers: the test failed; changes in the overlay:
	// M config
	//
	// helpers: as a git patch:
	// diff --git a/config b/config
	// index 0f1d263..d87b10d 100644
	// --- a/config
	// +++ b/config
	// @@ -1 +1 @@
	// -title=Hello
	// +title=Bye
}

// Chaos shuffles directory listings; the seed is logged, and ChaosSeed or
// COWFS_CHAOS_SEED replays it.
func ExampleChaos() {
	runExample("TestList", func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte("-- a --\n-- b --\n-- c --\n")), helpers.ChaosSeed(42))
		f, err := env.Fs().Open(env.Root())
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		names, _ := f.Readdirnames(-1)
		fmt.Println(names)
	})
	// Output:
	// helpers: chaos: directory listings shuffled with seed 42 (reproduce with COWFS_CHAOS_SEED=42)
	// [c a b]
}

func ExampleExtract() {
	dir, err := os.MkdirTemp("", "fixture")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ar := txtar.Parse([]byte(`A tree: prose lines, then directives.
mode bin/run 0755
dir empty
symlink latest bin/run
-- bin/run --
#!/bin/sh
-- README --
hello
`))
	if err := helpers.Extract(ar, dir); err != nil {
		panic(err)
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		fi, _ := os.Lstat(p)
		rel, _ := filepath.Rel(dir, p)
		fmt.Println(fi.Mode(), filepath.ToSlash(rel))
		return nil
	})
	// Output:
	// drwxr-xr-x .
	// -rw-r--r-- README
	// drwxr-xr-x bin
	// -rwxr-xr-x bin/run
	// drwxr-xr-x empty
	// Lrwxrwxrwx latest
}

func ExampleGoldenName() {
	fmt.Println(helpers.GoldenName("TestRender"))
	fmt.Println(helpers.GoldenName("TestRender/case_#1"))
	// Output:
	// TestRender
	// TestRender__case__1
}

// As reaches a method of the overlay through whatever wraps it in
// Env.Fs (the tape recorder, the chaos shuffler).
func ExampleAs() {
	runExample("TestLstat", func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte("symlink link target\n-- target --\nx\n")), helpers.ChaosSeed(1))
		l, ok := helpers.As[interface {
			Lstat(string) (fs.FileInfo, error)
		}](env.Fs())
		if !ok {
			t.Fatal("no Lstat below Env.Fs")
		}
		fi, err := l.Lstat(env.Path("link"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println(fi.Mode().Type() == fs.ModeSymlink)
	})
	// Output:
	// helpers: chaos: directory listings shuffled with seed 1 (reproduce with COWFS_CHAOS_SEED=1)
	// true
}
