package kernel

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// writeTree makes a small lower tree: files, dirs, symlinks, odd modes.
func writeTree(t testing.TB, dir string) {
	t.Helper()
	mt := time.Date(2020, 1, 2, 3, 4, 5, 600, time.UTC)
	for _, d := range []string{"d", "d/e", "d/e/f", "g", "empty"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"a": "alpha\n", "d/b": "bravo", "d/e/c": "charlie", "d/e/f/x": "", "g/y": "yankee"}
	for name, s := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "g/y"), 0o4755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"l": "d/e", "d/dangling": "../nowhere"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error {
		ts := []unix.Timespec{unix.NsecToTimespec(mt.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}
		unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
		return nil
	})
}

// checkKernelView materializes f, mounts it on a fresh target and compares
// the kernel's merged view with f's.
func checkKernelView(t *testing.T, f *overlayfs.Fs, opts Options, o cmpOpts) {
	t.Helper()
	want, err := viewTree(f)
	if err != nil {
		t.Fatal(err)
	}
	d := t.TempDir()
	upper, work, mnt := filepath.Join(d, "upper"), filepath.Join(d, "work"), filepath.Join(d, "mnt")
	for _, p := range []string{work, mnt} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := Materialize(f, upper, opts); err != nil {
		t.Fatal(err)
	}
	m, err := Mount(context.Background(), f.Root(), upper, work, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dirTree(mnt)
	if uerr := m.Unmount(); uerr != nil {
		t.Fatal(uerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := diffTrees(want, got, o); err != nil {
		t.Errorf("kernel view differs from the overlay view:\n%v", err)
	}
}

func TestMaterializeBasic(t *testing.T) {
	needMount(t)
	lower := t.TempDir()
	writeTree(t, lower)
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	j := func(s string) string { return filepath.Join(lower, s) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(afero.WriteFile(f, j("a"), []byte("changed"), 0o600))
	must(f.Remove(j("d/b")))
	must(f.RemoveAll(j("d/e")))
	must(f.Mkdir(j("d/e"), 0o750))                             // opaque: replaces a lower dir
	must(afero.WriteFile(f, j("d/e/new"), []byte("n"), 0o644)) // inside the opaque dir
	must(f.Chmod(j("g"), 0o700))                               // metadata-only copy-up of a dir
	must(f.Chmod(j("g/y"), 0o2711))
	must(f.MkdirAll(j("n/m/o"), 0o755))
	must(f.SymlinkIfPossible("../a", j("n/m/s")))
	must(f.Remove(j("l")))
	must(f.Mkdir(j("l"), 0o755)) // a dir replacing a symlink: no opaque needed
	must(f.Rename(j("empty"), j("moved")))
	must(f.Chtimes(j("moved"), time.Time{}, time.Unix(1e9, 5)))
	opts := Options{UserXattr: !inInitUserNS()}
	checkKernelView(t, f, opts, cmpOpts{times: true, dtimes: true, owners: true})
}

// A hostile layer (here: steps built by hand, as a corrupt layer could
// hold them) must not make Materialize write outside the upper dir.
func TestMaterializeStaysInUpper(t *testing.T) {
	outside := t.TempDir()
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"dotdot", []step{{LayerEntry: overlayfs.LayerEntry{Path: "../escape", Type: overlayfs.EntryFile, Mode: 0o644}}}},
		{"through a symlink", []step{
			{LayerEntry: overlayfs.LayerEntry{Path: "s", Type: overlayfs.EntrySymlink, Target: outside}},
			{LayerEntry: overlayfs.LayerEntry{Path: "s/escape", Type: overlayfs.EntryFile, Mode: 0o644}},
		}},
		{"whiteout through a symlink", []step{
			{LayerEntry: overlayfs.LayerEntry{Path: "s", Type: overlayfs.EntrySymlink, Target: outside}},
			{LayerEntry: overlayfs.LayerEntry{Path: "s/escape", Type: overlayfs.EntryWhiteout}},
		}},
		{"dir through a relative symlink", []step{
			{LayerEntry: overlayfs.LayerEntry{Path: "s", Type: overlayfs.EntrySymlink, Target: "../../" + filepath.Base(outside)}},
			{LayerEntry: overlayfs.LayerEntry{Path: "s/escape", Type: overlayfs.EntryDir, Mode: 0o755}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			upper := filepath.Join(t.TempDir(), "upper")
			if err := prepareUpper(upper); err != nil {
				t.Fatal(err)
			}
			root, err := os.OpenRoot(upper)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			m := &materializer{upper: upper, dirs: newDirStack(root), euid: os.Geteuid(), egid: os.Getegid()}
			defer m.dirs.close()
			var last error
			for _, s := range tc.steps {
				last = m.create(s)
			}
			if last == nil {
				t.Error("the escaping step succeeded")
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("wrote outside the upper: %v", ents)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(upper), "escape")); err == nil {
				t.Error("wrote next to the upper")
			}
		})
	}
}

func TestMaterializeUpperMustBeEmpty(t *testing.T) {
	lower := t.TempDir()
	writeTree(t, lower)
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	upper := t.TempDir()
	if err := os.WriteFile(filepath.Join(upper, "stale"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = Materialize(f, upper, Options{UserXattr: true})
	if !errors.Is(err, unix.ENOTEMPTY) {
		t.Errorf("non-empty upper: %v, want ENOTEMPTY", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != upper {
		t.Errorf("error does not name the upper: %#v", err)
	}
	// A missing upper is created with its missing parents, as os.MkdirAll.
	missingParent := filepath.Join(t.TempDir(), "no", "upper")
	if err := Materialize(f, missingParent, Options{UserXattr: true}); err != nil {
		t.Errorf("upper under a missing dir: %v, want it created", err)
	} else if fi, err := os.Stat(missingParent); err != nil || !fi.IsDir() {
		t.Errorf("upper under a missing dir: os.Stat = %v, %v; want a directory", fi, err)
	}
	fileParent := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(fileParent, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Materialize(f, filepath.Join(fileParent, "upper"), Options{UserXattr: true}); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("upper under a file: %v, want ENOTDIR", err)
	}
	// An empty existing dir is fine, and so is a missing one.
	if err := Materialize(f, t.TempDir(), Options{UserXattr: true}); err != nil {
		t.Error(err)
	}
	if err := Materialize(f, filepath.Join(t.TempDir(), "new"), Options{UserXattr: true}); err != nil {
		t.Error(err)
	}
}

// TestMaterializeDirTimes: directories whose time the view moved by
// making or removing entries in them show that time through the kernel's
// overlay too (checkKernelView: the mounted overlay is the oracle), among
// them lower directories the layer has nothing at or below (d/e/f, the
// root: an entry made and removed again) and a layer directory whose
// entry has an older time (g, set by Chtimes before a create in it).
func TestMaterializeDirTimes(t *testing.T) {
	needMount(t)
	lower := t.TempDir()
	writeTree(t, lower)
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	j := func(s string) string { return filepath.Join(lower, s) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(afero.WriteFile(f, j("d/e/f/tmp"), []byte("t"), 0o644))
	must(f.Remove(j("d/e/f/tmp")))
	must(afero.WriteFile(f, j("top"), nil, 0o644))
	must(f.Remove(j("top")))
	must(f.Chtimes(j("g"), time.Time{}, time.Unix(1e9, 0)))
	must(afero.WriteFile(f, j("g/new"), []byte("n"), 0o644))
	must(f.Mkdir(j("empty/sub"), 0o755))
	if len(f.Layer()) != 3 { // g, g/new, empty/sub: the times alone are no entries
		t.Fatalf("layer %v, want g, g/new and empty/sub", f.Layer())
	}
	opts := Options{UserXattr: !inInitUserNS()}
	checkKernelView(t, f, opts, cmpOpts{times: true, dtimes: true, owners: true})
}
