// Command demo shows cowfs's main job on the tree in testdata/demo: code
// writes through an overlay, the real tree stays as it was, and the layer
// comes out as a change list and a git patch that `git apply` reproduces.
// Then it runs `replay check` on the bundled example module, where some
// tests are deterministic and some are not.
//
// Run it from the repository root:
//
//	go run ./cmd/demo
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("demo", flag.ContinueOnError)
	flags.SetOutput(stderr)
	tree := flags.String("tree", "testdata/demo", "the directory to overlay")
	check := flags.String("check", "examples/flaky", "module to run `replay check` on (empty: skip)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if err := overlayDemo(*tree, stdout); err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	if *check == "" {
		return 0
	}
	if err := replayDemo(*check, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	return 0
}

func overlayDemo(tree string, w io.Writer) error {
	before, err := snapshotTree(tree)
	if err != nil {
		return err
	}
	f, err := overlayfs.New(tree)
	if err != nil {
		return err
	}
	p := func(rel string) string { return filepath.Join(f.Root(), rel) }

	fmt.Fprintf(w, "== overlay of %s: the code under test writes through it\n", tree)
	steps := []struct {
		say string
		do  func() error
	}{
		{"edit config/app.yaml", func() error {
			return afero.WriteFile(f, p("config/app.yaml"), []byte("name: demo\nport: 9090\nlog: debug\n"), 0o644)
		}},
		{"append to README.md", func() error {
			h, err := f.OpenFile(p("README.md"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			if _, err := h.WriteString("\nEdited through the overlay.\n"); err != nil {
				return err
			}
			return h.Close()
		}},
		{"remove docs/ entirely", func() error { return f.RemoveAll(p("docs")) }},
		{"rename scripts/ to tools/", func() error { return f.Rename(p("scripts"), p("tools")) }},
		{"make tools/build.sh executable", func() error { return f.Chmod(p("tools/build.sh"), 0o755) }},
		{"link latest -> assets/logo.png", func() error { return f.SymlinkIfPossible("assets/logo.png", p("latest")) }},
		{"overwrite the binary assets/logo.png", func() error {
			return afero.WriteFile(f, p("assets/logo.png"), []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x00new"), 0o644)
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %w", s.say, err)
		}
		fmt.Fprintf(w, "   %s\n", s.say)
	}

	fmt.Fprintln(w, "\n== Changes()")
	for _, c := range f.Changes() {
		fmt.Fprintf(w, "   %-8s %-22s %v -> %v\n", c.Kind, c.Path, c.OldMode, c.Mode)
	}

	var patch bytes.Buffer
	if err := f.WriteDiff(&patch); err != nil {
		return err
	}
	fmt.Fprintln(w, "\n== WriteDiff (a git patch)")
	w.Write(patch.Bytes())

	after, err := snapshotTree(tree)
	if err != nil {
		return err
	}
	if !bytes.Equal(before, after) {
		return errors.New("the real tree changed: this is a bug")
	}
	fmt.Fprintf(w, "\n== %s on disk is byte for byte what it was\n", tree)

	if _, err := exec.LookPath("git"); err != nil {
		fmt.Fprintln(w, "\n== git is not installed: skipping `git apply`")
		return nil
	}
	n, err := applyAndCompare(f, tree, patch.Bytes())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== git apply of the patch in a copy of %s: %d files and symlinks equal the overlay's, byte for byte\n", tree, n)
	return nil
}

// applyAndCompare applies patch with git in a copy of tree and checks that
// every file and symlink there equals the overlay's view.
func applyAndCompare(f *overlayfs.Fs, tree string, patch []byte) (int, error) {
	tmp, err := os.MkdirTemp("", "cowfs-demo-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	dst := filepath.Join(tmp, "copy")
	if err := os.CopyFS(dst, os.DirFS(tree)); err != nil {
		return 0, err
	}
	cmd := exec.Command("git", "apply", "--whitespace=nowarn", "-")
	cmd.Dir = dst
	cmd.Stdin = bytes.NewReader(patch)
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+tmp, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("git apply: %v\n%s", err, out)
	}
	want, err := treeFiles(f.IOFS())
	if err != nil {
		return 0, err
	}
	got, err := treeFiles(os.DirFS(dst))
	if err != nil {
		return 0, err
	}
	for name, v := range want {
		if got[name] != v {
			return 0, fmt.Errorf("after git apply, %s differs from the overlay", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			return 0, fmt.Errorf("after git apply, %s exists but not in the overlay", name)
		}
	}
	return len(want), nil
}

// treeFiles maps each file and symlink of fsys to its type, exec bit and
// content (or target).
func treeFiles(fsys fs.FS) (map[string]string, error) {
	out := map[string]string{}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			t, err := fs.ReadLink(fsys, name)
			out[name] = "link:" + t
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		data, err := fs.ReadFile(fsys, name)
		out[name] = fmt.Sprintf("file:%v:%s", fi.Mode()&0o100 != 0, data)
		return err
	})
	return out, err
}

// snapshotTree serializes tree (names, modes, contents) to compare it later.
func snapshotTree(tree string) ([]byte, error) {
	var b bytes.Buffer
	err := filepath.WalkDir(tree, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d\n", path, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			b.Write(data)
			return err
		}
		return nil
	})
	return b.Bytes(), err
}

// replayDemo runs `replay check` on the example module: its tests record
// tapes through package helpers, and replay compares three runs.
func replayDemo(module string, stdout, stderr io.Writer) error {
	if _, err := os.Stat(filepath.Join(module, "go.mod")); err != nil {
		return fmt.Errorf("no example module at %s: %w", module, err)
	}
	tmp, err := os.MkdirTemp("", "cowfs-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	replay := filepath.Join(tmp, "replay")
	build := exec.Command("go", "build", "-o", replay, "./cmd/replay")
	build.Stdout, build.Stderr = stdout, stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/replay: %w", err)
	}
	fmt.Fprintf(stdout, "\n== replay check -n 3 in %s (exit 1 is expected: some of its tests are not deterministic)\n", module)
	cmd := exec.Command(replay, "check", "-n", "3")
	cmd.Dir = module
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		fmt.Fprintln(stdout, "== replay check named the nondeterministic tests (exit 1)")
		return nil
	case err == nil:
		return errors.New("replay check found every test deterministic; the example has nondeterministic tests")
	}
	return fmt.Errorf("replay check: %w", err)
}
