package kernel

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// kernelScript changes a mounted overlay the way a build or a test does.
const kernelScript = `set -e
echo changed > a
echo more >> d/e/c
rm d/b
rm -r d/e/f
rm -r g && mkdir g && echo fresh > g/z
mv d/dangling d/renamed
mv moved-dir/ renamed-dir 2>/dev/null || mv empty empty2
mkdir -p new/deep/er && echo x > new/deep/er/file
ln -s ../a new/link
ln new/deep/er/file new/hardlink
chmod 0640 d/e/c
chmod 2750 new
touch -d '2001-02-03 04:05:06.789' new/deep/er/file
rm l && echo nowfile > l
`

func TestImportKernelUpper(t *testing.T) {
	needMount(t)
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to write through the mount")
	}
	opts := Options{UserXattr: !inInitUserNS()}
	lower, upper, work, mnt := mountDirs(t, "")
	writeTree(t, lower)
	m, err := Mount(context.Background(), lower, upper, work, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", kernelScript)
	sh.Dir = mnt
	out, err := sh.CombinedOutput()
	if err != nil {
		m.Unmount()
		t.Fatalf("script: %v\n%s", err, out)
	}
	want, err := dirTree(mnt)
	if uerr := m.Unmount(); uerr != nil {
		t.Fatal(uerr)
	}
	if err != nil {
		t.Fatal(err)
	}

	// The script must have made the kernel write what Import must handle.
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(upper, "d/b"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Errorf("kernel wrote no whiteout for d/b: %v", err)
	}
	if v, err := getXattr(filepath.Join(upper, "g"), opts.xattrPrefix()+"opaque"); err != nil || string(v) != "y" {
		t.Errorf("kernel did not mark g opaque: %q %v", v, err)
	}

	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(upper, f, opts); err != nil {
		t.Fatal(err)
	}
	got, err := viewTree(f)
	if err != nil {
		t.Fatal(err)
	}
	// The root too: its mode and owner become the layer's entry ".", its
	// time (moved by the script's creates at the top) the view's.
	if err := diffTrees(want, got, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
		t.Errorf("imported view differs from the kernel's:\n%v", err)
	}
	if len(f.Changes()) == 0 {
		t.Error("no changes imported")
	}
	t.Run("rematerialized", func(t *testing.T) {
		checkKernelView(t, f, opts, cmpOpts{times: true, dtimes: true, owners: true})
	})
}

func TestImportRefuses(t *testing.T) {
	lower := t.TempDir()
	writeTree(t, lower)
	opts := Options{UserXattr: true} // user.* xattrs need no privilege
	cases := []struct {
		name  string
		setup func(upper string) error
		want  error
	}{
		{"redirect", func(u string) error {
			if err := os.Mkdir(filepath.Join(u, "d"), 0o755); err != nil {
				return err
			}
			return unix.Setxattr(filepath.Join(u, "d"), "user.overlay.redirect", []byte("/g"), 0)
		}, ErrRedirect},
		{"metacopy", func(u string) error {
			if err := os.WriteFile(filepath.Join(u, "a"), nil, 0o644); err != nil {
				return err
			}
			return unix.Setxattr(filepath.Join(u, "a"), "user.overlay.metacopy", nil, 0)
		}, ErrMetacopy},
		{"device", func(u string) error {
			return unix.Mknod(filepath.Join(u, "dev"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3)))
		}, ErrUnsupportedType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			upper := t.TempDir()
			// Something valid first, so a partial apply would show.
			if err := os.WriteFile(filepath.Join(upper, "0first"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tc.setup(upper); err != nil {
				t.Skip("cannot build the upper: ", err)
			}
			f, err := overlayfs.New(lower)
			if err != nil {
				t.Fatal(err)
			}
			err = Import(upper, f, opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Import: %v, want %v", err, tc.want)
			}
			var pe *os.PathError
			if !errors.As(err, &pe) || filepath.Dir(pe.Path) != upper {
				t.Errorf("error does not name the upper path: %#v", err)
			}
			// A device node is skipped after the rest was imported;
			// redirect and metacopy refuse the whole upper.
			var want []string
			if tc.want == ErrUnsupportedType {
				want = []string{"A 0first"}
			}
			if ch := changeStrings(f); !slices.Equal(ch, want) {
				t.Errorf("import changed the layer to %q, want %q", ch, want)
			}
		})
	}
}

func TestImportWhiteoutHardlinksAndNamespaces(t *testing.T) {
	lower := t.TempDir()
	writeTree(t, lower)
	upper := t.TempDir()
	wo := filepath.Join(upper, "a")
	if err := unix.Mknod(wo, unix.S_IFCHR, 0); err != nil {
		t.Skip("cannot create a 0/0 whiteout: ", err)
	}
	if err := os.Mkdir(filepath.Join(upper, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The kernel shares one whiteout inode between many names.
	if err := os.Link(wo, filepath.Join(upper, "d/b")); err != nil {
		t.Fatal(err)
	}
	// A whiteout of something the lower lacks hides nothing.
	if err := os.Link(wo, filepath.Join(upper, "d/nothing")); err != nil {
		t.Fatal(err)
	}
	// An opaque mark in the other namespace is an ordinary xattr.
	if err := os.Mkdir(filepath.Join(upper, "g"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(upper, "g"), "user.overlay.opaque", []byte("y"), 0); err != nil {
		t.Skip("no user xattrs on ", upper, ": ", err)
	}
	for _, tc := range []struct {
		opts       Options
		gHasLowerY bool
	}{{Options{UserXattr: true}, false}, {Options{UserXattr: false}, true}} {
		f, err := overlayfs.New(lower)
		if err != nil {
			t.Fatal(err)
		}
		if err := Import(upper, f, tc.opts); err != nil {
			t.Fatal(err)
		}
		for _, gone := range []string{"a", "d/b", "d/nothing"} {
			if _, err := f.Lstat(filepath.Join(lower, gone)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%+v: %s still visible: %v", tc.opts, gone, err)
			}
		}
		if _, err := f.Lstat(filepath.Join(lower, "d/e/c")); err != nil {
			t.Errorf("%+v: sibling of a whiteout lost: %v", tc.opts, err)
		}
		_, err = f.Lstat(filepath.Join(lower, "g/y"))
		if (err == nil) != tc.gHasLowerY {
			t.Errorf("%+v: g/y visible=%v, want %v", tc.opts, err == nil, tc.gHasLowerY)
		}
	}
}

func TestImportSkipsKernelXattrs(t *testing.T) {
	lower := t.TempDir()
	writeTree(t, lower)
	upper := t.TempDir()
	if err := os.Mkdir(filepath.Join(upper, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(upper, "d/b"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	for p, names := range map[string][]string{
		"d":   {"impure", "uuid", "nlink", "origin", "upper"},
		"d/b": {"origin", "nlink", "xino"},
	} {
		for _, n := range names {
			if err := unix.Setxattr(filepath.Join(upper, p), "user.overlay."+n, []byte("y"), 0); err != nil {
				t.Skip("no user xattrs here: ", err)
			}
		}
	}
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(upper, f, Options{UserXattr: true}); err != nil {
		t.Fatal(err)
	}
	// d merged (not opaque): its lower children are still there.
	for _, p := range []string{"d/e/c", "d/dangling"} {
		if _, err := f.Lstat(filepath.Join(lower, p)); err != nil {
			t.Errorf("%s hidden by bookkeeping xattrs: %v", p, err)
		}
	}
	if got := changeStrings(f); len(got) != 1 || got[0] != "M d/b" {
		t.Errorf("changes %q, want [M d/b]", got)
	}
}

// TestImportDirTimesNoEntry: directories the kernel copied up only to
// write in them (d: a file made; g: a file removed) show the kernel's
// time after Import (the mounted overlay, read before unmounting, is the
// oracle) without becoming layer entries: nothing else about them changed.
func TestImportDirTimesNoEntry(t *testing.T) {
	needMount(t)
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to write through the mount")
	}
	opts := Options{UserXattr: !inInitUserNS()}
	lower, upper, work, mnt := mountDirs(t, "")
	writeTree(t, lower)
	m, err := Mount(context.Background(), lower, upper, work, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", "cd "+mnt+" && echo n > d/new && rm g/y").CombinedOutput()
	if err != nil {
		m.Unmount()
		t.Fatalf("script: %v\n%s", err, out)
	}
	want, err := dirTree(mnt)
	if uerr := m.Unmount(); uerr != nil {
		t.Fatal(uerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(upper, f, opts); err != nil {
		t.Fatal(err)
	}
	got, err := viewTree(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := diffTrees(want, got, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
		t.Errorf("imported view differs from the kernel's:\n%v", err)
	}
	var paths []string
	for _, e := range f.Layer() {
		paths = append(paths, e.Path)
	}
	if !slices.Equal(paths, []string{"d/new", "g/y"}) {
		t.Errorf("layer entries %q, want only d/new and g/y", paths)
	}
}
