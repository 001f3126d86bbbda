package kernel

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// secretOutside makes a host file outside the root whose bytes must never
// reach the layer, and returns its directory.
func secretOutside(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "host")
	if err := os.MkdirAll(filepath.Join(dir, "zoneinfo"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"secret", "zoneinfo/UTC"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("HOST-SECRET-"+p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// noSecret fails if any file of the view or of the root on disk holds the
// host's bytes.
func noSecret(t *testing.T, f *overlayfs.Fs) {
	t.Helper()
	view, err := viewTree(f)
	if err != nil {
		t.Fatal(err)
	}
	disk, err := dirTree(f.Root())
	if err != nil {
		t.Fatal(err)
	}
	for what, tr := range map[string]tree{"view": view, "disk": disk} {
		for p, n := range tr {
			if n.mode.IsRegular() && strings.Contains(n.data, "HOST-SECRET") {
				t.Errorf("%s: %s holds the host file's bytes", what, p)
			}
		}
	}
}

// TestOCIHardLinkNeverLeavesTheRoot (issue 23): a hard link whose target
// lies through a symlink out of the root is refused with ErrLinkTarget,
// and the layer is as before; a link to a symlink (a rootfs's
// etc/localtime) is that symlink, never the host file it points to.
// Oracle for the refusals: the host file's bytes appear nowhere in the
// view or, after Commit, on disk; for the symlink, GNU tar extracting the
// same tar on a copy of the root (link(2) does not follow a symlink).
func TestOCIHardLinkNeverLeavesTheRoot(t *testing.T) {
	host := secretOutside(t)
	t.Run("two-layers", func(t *testing.T) {
		root := t.TempDir()
		f, err := overlayfs.New(root)
		if err != nil {
			t.Fatal(err)
		}
		l1 := buildTar(t, []tarEntry{{name: "s", typ: tar.TypeSymlink, link: host}})
		if err := ReadOCILayer(bytes.NewReader(l1), f); err != nil {
			t.Fatal(err)
		}
		before, err := viewTree(f)
		if err != nil {
			t.Fatal(err)
		}
		l2 := buildTar(t, []tarEntry{{name: "ok.txt", body: "ok"}, {name: "h", typ: tar.TypeLink, link: "s/secret"}})
		err = ReadOCILayer(bytes.NewReader(l2), f)
		var pe *fs.PathError
		if !errors.Is(err, ErrLinkTarget) || !errors.As(err, &pe) || pe.Path != "h" {
			t.Fatalf("ReadOCILayer: %v, want a *fs.PathError for h wrapping ErrLinkTarget", err)
		}
		after, err := viewTree(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := diffTrees(before, after, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
			t.Errorf("a refused layer changed the view:\n%v", err)
		}
		if err := f.Commit(); err != nil {
			t.Fatal(err)
		}
		noSecret(t, f)
	})
	t.Run("rootfs-localtime", func(t *testing.T) {
		root := t.TempDir()
		for _, d := range []string{"etc", "usr/share"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(filepath.Join(host, "zoneinfo/UTC"), filepath.Join(root, "etc/localtime")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(host, "zoneinfo"), filepath.Join(root, "usr/share/zoneinfo")); err != nil {
			t.Fatal(err)
		}
		layer := buildTar(t, []tarEntry{{name: "etc/tz", typ: tar.TypeLink, link: "etc/localtime"}})
		f, err := overlayfs.New(root)
		if err != nil {
			t.Fatal(err)
		}
		if err := ReadOCILayer(bytes.NewReader(layer), f); err != nil {
			t.Fatal(err)
		}
		if _, err := exec.LookPath("tar"); err == nil {
			// The oracle: GNU tar on a copy of the root.
			cp := filepath.Join(t.TempDir(), "copy")
			if out, err := exec.Command("cp", "-a", root, cp).CombinedOutput(); err != nil {
				t.Fatalf("cp -a: %v\n%s", err, out)
			}
			tarball := filepath.Join(t.TempDir(), "l.tar")
			os.WriteFile(tarball, layer, 0o644)
			if out, err := exec.Command("tar", "-x", "-C", cp, "-f", tarball).CombinedOutput(); err != nil {
				t.Fatalf("tar -x: %v\n%s", err, out)
			}
			want, err := dirTree(cp)
			if err != nil {
				t.Fatal(err)
			}
			got, err := viewTree(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffTrees(want, got, cmpOpts{}); err != nil {
				t.Errorf("the view differs from tar -x on a copy:\n%v", err)
			}
		}
		fi, err := f.Lstat(filepath.Join(root, "etc/tz"))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("etc/tz: %v, %v; want a symlink like etc/localtime", fi, err)
		}
		bad := buildTar(t, []tarEntry{{name: "etc/utc", typ: tar.TypeLink, link: "usr/share/zoneinfo/UTC"}})
		if err := ReadOCILayer(bytes.NewReader(bad), f); !errors.Is(err, ErrLinkTarget) {
			t.Errorf("a link through usr/share/zoneinfo -> host: %v, want ErrLinkTarget", err)
		}
		if err := f.Commit(); err != nil {
			t.Fatal(err)
		}
		noSecret(t, f)
	})
}

// TestOCIAllOrNothing: a layer refused while it is applied (its last
// entry a file below a symlink of the same tar) or read (the root's
// .cowfs-commit, which Commit keeps for its journal) leaves the view
// exactly as before.
func TestOCIAllOrNothing(t *testing.T) {
	for _, c := range []struct {
		name    string
		entries []tarEntry
		want    error
	}{
		{"under-a-symlink", []tarEntry{{name: "0first.txt", body: "new"}, {name: "a.txt", body: "changed"}, {name: "d", typ: tar.TypeSymlink, link: "a.txt"}, {name: "d/x", body: "x"}}, nil},
		{"reserved", []tarEntry{{name: "0first.txt", body: "new"}, {name: ".cowfs-commit/intent", body: "x"}}, ErrReservedName},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for name, data := range map[string]string{"a.txt": "a", "f": "a file"} {
				if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f, err := overlayfs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			before, err := viewTree(f)
			if err != nil {
				t.Fatal(err)
			}
			err = ReadOCILayer(bytes.NewReader(buildTar(t, c.entries)), f)
			if err == nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("ReadOCILayer: %v, want an error (wrapping %v)", err, c.want)
			}
			after, err := viewTree(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffTrees(before, after, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
				t.Errorf("the refused layer changed the view:\n%v", err)
			}
			if cs := f.Changes(); len(cs) != 0 {
				t.Errorf("Changes after a refused layer: %v", cs)
			}
		})
	}
}
