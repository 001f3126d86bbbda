package kernel

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/overlayfs"
)

// linkView is what the link tests compare of a tree: each non-directory's
// content (or target) and link count, and the names sharing an inode.
func linkView(t *testing.T, fsys afero.Fs, root string) string {
	t.Helper()
	var lines []string
	groups := map[[2]uint64][]string{}
	err := afero.Walk(fsys, root, func(p string, _ fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fi, _, err := fsys.(afero.Lstater).LstatIfPossible(p)
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%s %v nlink=%d", rel, fi.Mode().Type(), st.Nlink)
		if fi.Mode().IsRegular() {
			f, err := fsys.Open(p)
			if err != nil {
				return err
			}
			data, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %q", data)
		}
		lines = append(lines, desc)
		groups[[2]uint64{st.Dev, st.Ino}] = append(groups[[2]uint64{st.Dev, st.Ino}], rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if len(g) > 1 {
			slices.Sort(g)
			lines = append(lines, "linked: "+strings.Join(g, " "))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func linkLower(t *testing.T, dir string) {
	t.Helper()
	for _, w := range []struct{ name, data string }{{"a", "alpha\n"}, {"lone", "lone\n"}, {"d/e", "echo\n"}} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(w.name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, w.name), []byte(w.data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
}

// TestMaterializeLinks: the layer's hard links are hard links in the
// upper: the kernel's overlay of the materialized upper shows the names
// the same ops made on a copy with os share an inode, content and link
// count alike; Import of that upper brings them back as links.
func TestMaterializeLinks(t *testing.T) {
	needMount(t)
	opts := Options{UserXattr: !inInitUserNS()}
	lower, upper, work, mnt := mountDirs(t, "")
	copyDir := t.TempDir()
	linkLower(t, lower)
	linkLower(t, copyDir)
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	for _, side := range []struct {
		root string
		fs   afero.Fs
		link func(o, n string) error
	}{{lower, f, f.Link}, {copyDir, afero.NewOsFs(), os.Link}} {
		j := func(n string) string { return filepath.Join(side.root, n) }
		for _, err := range []error{
			side.link(j("a"), j("d/n")),
			afero.WriteFile(side.fs, j("d/n"), []byte("through n\n"), 0o644),
			side.link(j("lone"), j("lone2")),
			afero.WriteFile(side.fs, j("x"), []byte("new\n"), 0o644),
			side.link(j("x"), j("d/y")),
			side.fs.(afero.Linker).SymlinkIfPossible("a", j("s")),
			side.link(j("s"), j("s2")),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	want := linkView(t, afero.NewOsFs(), copyDir)
	if got := linkView(t, f, lower); got != want {
		t.Fatalf("the overlay's view differs from os's:\ngot\n%s\nwant\n%s", got, want)
	}
	if err := Materialize(f, upper, opts); err != nil {
		t.Fatal(err)
	}
	m, err := Mount(context.Background(), lower, upper, work, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := linkView(t, afero.NewOsFs(), mnt)
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("the kernel's view of the materialized upper differs from os's:\ngot\n%s\nwant\n%s", got, want)
	}
	g, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(upper, g, opts); err != nil {
		t.Fatal(err)
	}
	if got := linkView(t, g, lower); got != want {
		t.Errorf("the view imported from the upper differs from os's:\ngot\n%s\nwant\n%s", got, want)
	}
}

// TestImportKernelLinks: links a command makes in the kernel's overlay
// (ln, cp -al) come back from its upper as links, as the kernel's merged
// view shows them.
func TestImportKernelLinks(t *testing.T) {
	needMount(t)
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	opts := Options{UserXattr: !inInitUserNS()}
	lower, upper, work, mnt := mountDirs(t, "")
	linkLower(t, lower)
	m, err := Mount(context.Background(), lower, upper, work, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", "ln lone lone2 && echo new > x && ln x d/y && mkdir c && cp -al d c/ && echo more >> c/d/y")
	sh.Dir = mnt
	if out, err := sh.CombinedOutput(); err != nil {
		m.Unmount()
		t.Fatalf("script: %v\n%s", err, out)
	}
	want := linkView(t, afero.NewOsFs(), mnt)
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(upper, f, opts); err != nil {
		t.Fatal(err)
	}
	if got := linkView(t, f, lower); got != want {
		t.Errorf("imported view differs from the kernel's:\ngot\n%s\nwant\n%s", got, want)
	}
}

// TestRunLinks: ln and cp -al run through Run, in every mode, leave the
// links a plain run on a real copy leaves; a link the layer had before the
// run holds through it (a write through one name shows through the other).
func TestRunLinks(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	const script = "echo more >> lone && ln lone lone2 && echo new > x && ln x d/y && mkdir c && cp -al d c/ && echo more >> c/d/y && ln -s lone s && ln s s2"
	oracle := t.TempDir()
	linkLower(t, oracle)
	if err := os.Link(filepath.Join(oracle, "lone"), filepath.Join(oracle, "l3")); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", script)
	sh.Dir = oracle
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("oracle run: %v\n%s", err, out)
	}
	want := linkView(t, afero.NewOsFs(), oracle)
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			root := t.TempDir()
			linkLower(t, root)
			f, err := overlayfs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Link(filepath.Join(root, "lone"), filepath.Join(root, "l3")); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", script)
			cmd.Dir = root
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := mode.run(context.Background(), f, cmd); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			if got := linkView(t, f, root); got != want {
				t.Errorf("view differs from the plain run on a copy:\ngot\n%s\nwant\n%s", got, want)
			}
		})
	}
}
