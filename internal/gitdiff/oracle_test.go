package gitdiff

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bgd "github.com/bluekeyes/go-gitdiff/gitdiff"
)

// entry is a file or symlink of a test tree; mode is 0o644, 0o755 or
// fs.ModeSymlink (data is then the target).
type entry struct {
	mode fs.FileMode
	data string
}

// tree maps slash paths to entries; directories are implied.
type tree map[string]entry

func (e entry) file() *File {
	data := e.data
	return &File{Mode: e.mode, Content: func() ([]byte, error) { return []byte(data), nil }}
}

// changesBetween lists the changes that turn old into new. When keepSame
// is set, unchanged paths are listed too (Write must skip them).
func changesBetween(old, new tree, keepSame bool) []Change {
	paths := slices.Sorted(maps.Keys(old))
	for p := range new {
		if _, ok := old[p]; !ok {
			paths = append(paths, p)
		}
	}
	var cs []Change
	for _, p := range paths {
		o, inOld := old[p]
		n, inNew := new[p]
		if inOld && inNew && o == n && !keepSame {
			continue
		}
		c := Change{Path: p}
		if inOld {
			c.Old = o.file()
		}
		if inNew {
			c.New = n.file()
		}
		cs = append(cs, c)
	}
	return cs
}

// put stores e at p, removing whatever would contradict it: files at p's
// ancestors and everything under p.
func (t tree) put(p string, e entry) {
	t.removeAll(p)
	for i := range len(p) {
		if p[i] == '/' {
			delete(t, p[:i])
		}
	}
	t[p] = e
}

func (t tree) removeAll(p string) {
	delete(t, p)
	for q := range t {
		if strings.HasPrefix(q, p+"/") {
			delete(t, q)
		}
	}
}

func (t tree) clone() tree { return maps.Clone(t) }

func writeTree(t testing.TB, dir string, tr tree) {
	t.Helper()
	for p, e := range tr {
		name := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if e.mode == fs.ModeSymlink {
			if err := os.Symlink(e.data, name); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(name, []byte(e.data), e.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(name, e.mode); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree reads dir back as git sees it: files with their exec bit,
// symlinks with their target; directories only through their contents.
func readTree(t testing.TB, dir string) tree {
	t.Helper()
	tr := tree{}
	err := filepath.WalkDir(dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, name)
		if err != nil {
			return err
		}
		p := filepath.ToSlash(rel)
		switch d.Type() {
		case fs.ModeSymlink:
			target, err := os.Readlink(name)
			tr[p] = entry{fs.ModeSymlink, target}
			return err
		case 0:
			info, err := d.Info()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(name)
			mode := fs.FileMode(0o644)
			if info.Mode()&0o100 != 0 {
				mode = 0o755
			}
			tr[p] = entry{mode, string(data)}
			return err
		}
		return fmt.Errorf("%s: unexpected type %v", p, d.Type())
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// treeDiff describes how got differs from want, one line per path.
func treeDiff(want, got tree) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[p]
		switch {
		case !ok:
			fmt.Fprintf(&b, "%q: missing (want %v %q)\n", p, want[p].mode, short(want[p].data))
		case g != want[p]:
			fmt.Fprintf(&b, "%q: got %v %q, want %v %q\n", p, g.mode, short(g.data), want[p].mode, short(want[p].data))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			fmt.Fprintf(&b, "%q: unexpected %v %q\n", p, got[p].mode, short(got[p].data))
		}
	}
	return b.String()
}

func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// gitPath returns the git binary or skips the test.
func gitPath(t testing.TB) string {
	t.Helper()
	git, err := lookGit()
	if err != nil {
		t.Skipf("git not found in PATH (%v): skipping the git apply oracle", err)
	}
	return git
}

func lookGit() (string, error) { return exec.LookPath("git") }

// gitCmd runs git in dir with no user or system config, and with dir
// outside any repository (git apply inside a repository's subdirectory
// silently skips files).
func gitCmd(git, dir string, stdin []byte, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.Command(git, args...)
	cmd.Dir = dir
	env := []string{
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"LC_ALL=C",
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "LC_ALL=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.Bytes(), errb.Bytes(), err
}

// gitApply applies patch in dir with real git apply (reversed when
// reverse is set), first with --check; any stderr output is an error.
// --whitespace=nowarn only silences git's advice about trailing blanks in
// the content (CR-only files are full of them); it changes no bytes.
func gitApply(git, dir string, patch []byte, reverse bool) error {
	for _, check := range []bool{true, false} {
		args := []string{"apply", "--whitespace=nowarn"}
		if check {
			args = append(args, "--check")
		}
		if reverse {
			args = append(args, "-R")
		}
		_, stderr, err := gitCmd(git, dir, patch, args...)
		if err != nil || len(stderr) > 0 {
			return fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
	}
	return nil
}

// roundTrip checks that patch turns old into new with git apply, and new
// back into old with git apply -R, in a fresh directory each.
func roundTrip(t testing.TB, git string, old, new tree, patch []byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, old)
	if err := gitApply(git, dir, patch, false); err != nil {
		t.Fatalf("%v\npatch:\n%s", err, patch)
	}
	if d := treeDiff(new, readTree(t, dir)); d != "" {
		t.Fatalf("after git apply:\n%s\npatch:\n%s", d, patch)
	}
	if err := gitApply(git, dir, patch, true); err != nil {
		t.Fatalf("%v\npatch:\n%s", err, patch)
	}
	if d := treeDiff(old, readTree(t, dir)); d != "" {
		t.Fatalf("after git apply -R:\n%s\npatch:\n%s", d, patch)
	}
}

// applyGoGitdiff applies patch to old in memory with bluekeyes/go-gitdiff.
func applyGoGitdiff(old tree, patch []byte) (tree, error) {
	files, _, err := bgd.Parse(bytes.NewReader(patch))
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	got := old.clone()
	for _, f := range files {
		if f.IsRename != (f.OldName != "" && f.NewName != "" && f.OldName != f.NewName) {
			return nil, fmt.Errorf("%q -> %q: IsRename %v", f.OldName, f.NewName, f.IsRename)
		}
		name := f.NewName
		if f.IsDelete {
			name = f.OldName
		}
		var src []byte
		if !f.IsNew {
			e, ok := got[f.OldName]
			if !ok {
				return nil, fmt.Errorf("%q: patch modifies a missing file", f.OldName)
			}
			src = []byte(e.data)
			if f.IsRename {
				delete(got, f.OldName)
				got[name] = e
			}
		}
		var dst bytes.Buffer
		if err := bgd.Apply(&dst, bytes.NewReader(src), f); err != nil {
			return nil, fmt.Errorf("%q: %w", name, err)
		}
		if f.IsDelete {
			if dst.Len() != 0 {
				return nil, fmt.Errorf("%q: deletion leaves %d bytes", name, dst.Len())
			}
			delete(got, name)
			continue
		}
		mode := got[name].mode
		if f.NewMode != 0 {
			switch {
			case f.NewMode&0o170000 == 0o120000:
				mode = fs.ModeSymlink
			case f.NewMode&0o100 != 0:
				mode = 0o755
			default:
				mode = 0o644
			}
		}
		got[name] = entry{mode, dst.String()}
	}
	return got, nil
}
