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
	"time"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

type tarEntry struct {
	name, body, link string
	typ              byte
	mode             int64
	pax              map[string]string
	major, minor     int64
}

func buildTar(t testing.TB, entries []tarEntry) []byte {
	return buildTarFormat(t, entries, tar.FormatPAX)
}

func buildTarFormat(t testing.TB, entries []tarEntry, format tar.Format) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body)), Linkname: e.link,
			ModTime: time.Unix(1.5e9, 0), PAXRecords: e.pax, Devmajor: e.major, Devminor: e.minor, Format: format}
		if e.pax != nil {
			h.Format = tar.FormatPAX
		}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil && h.Size > 0 {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ociFixture is a layer in the forms real tools write, in an awkward order:
// a child before its directory and the directory's opaque marker after it,
// a whiteout next to a same-name entry, missing parent headers, a hard
// link, a raw-upper 0/0 char device and a PAX opaque xattr.
var ociFixture = []tarEntry{
	{name: "g/z", body: "zz"},
	{name: "g/.wh..wh..opq"},
	{name: "g/", typ: tar.TypeDir, mode: 0o750},
	{name: "./d/.wh.b"},
	{name: ".wh.a"},
	{name: ".wh.l"},
	{name: "l", body: "new l"},
	{name: "n/m/file", body: "deep", mode: 0o600},
	{name: "h", typ: tar.TypeLink, link: "g/z"},
	{name: "x", typ: tar.TypeChar},
	{name: "d/e/", typ: tar.TypeDir, mode: 0o755, pax: map[string]string{"SCHILY.xattr.trusted.overlay.opaque": "y"}},
	{name: "d/.wh.nothing"},
	{name: "s", typ: tar.TypeSymlink, link: "d/e"},
}

// ociOracle does by hand, with os, what ociFixture says.
func ociOracle(t *testing.T, dir string) {
	t.Helper()
	steps := []func() error{
		func() error { return os.RemoveAll(filepath.Join(dir, "g")) },
		func() error { return os.Mkdir(filepath.Join(dir, "g"), 0o750) },
		func() error { return os.WriteFile(filepath.Join(dir, "g/z"), []byte("zz"), 0o644) },
		func() error { return os.Remove(filepath.Join(dir, "d/b")) },
		func() error { return os.Remove(filepath.Join(dir, "a")) },
		func() error { return os.Remove(filepath.Join(dir, "l")) },
		func() error { return os.WriteFile(filepath.Join(dir, "l"), []byte("new l"), 0o644) },
		func() error { return os.MkdirAll(filepath.Join(dir, "n/m"), 0o755) },
		func() error { return os.WriteFile(filepath.Join(dir, "n/m/file"), []byte("deep"), 0o600) },
		func() error { return os.WriteFile(filepath.Join(dir, "h"), []byte("zz"), 0o644) },
		func() error { return os.RemoveAll(filepath.Join(dir, "d/e")) },
		func() error { return os.Mkdir(filepath.Join(dir, "d/e"), 0o755) },
		func() error { return os.Symlink("d/e", filepath.Join(dir, "s")) },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("oracle step %d: %v", i, err)
		}
	}
	// Modes as the tar says, whatever the umask did.
	for p, m := range map[string]fs.FileMode{"g": 0o750, "g/z": 0o644, "l": 0o644, "n/m/file": 0o600, "h": 0o644, "d/e": 0o755, "n": 0o755, "n/m": 0o755} {
		if err := os.Chmod(filepath.Join(dir, p), m); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadOCILayer(t *testing.T) {
	lower := t.TempDir()
	writeTree(t, lower)
	oracle := t.TempDir()
	writeTree(t, oracle)
	ociOracle(t, oracle)
	want, err := dirTree(oracle)
	if err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	if err := ReadOCILayer(bytes.NewReader(buildTar(t, ociFixture)), f); err != nil {
		t.Fatal(err)
	}
	got, err := viewTree(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := diffTrees(want, got, cmpOpts{}); err != nil {
		t.Errorf("view after ReadOCILayer differs from the same steps done with os:\n%v", err)
	}

	t.Run("round trip through the kernel", func(t *testing.T) {
		needMount(t)
		var buf bytes.Buffer
		if err := WriteOCILayer(f, &buf); err != nil {
			t.Fatal(err)
		}
		g, err := overlayfs.New(lower)
		if err != nil {
			t.Fatal(err)
		}
		if err := ReadOCILayer(&buf, g); err != nil {
			t.Fatal(err)
		}
		checkKernelView(t, g, Options{UserXattr: !inInitUserNS()}, cmpOpts{times: true, dtimes: true, owners: true})
		back, err := viewTree(g)
		if err != nil {
			t.Fatal(err)
		}
		if err := diffTrees(got, back, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
			t.Errorf("layer -> tar -> layer changed the view:\n%v", err)
		}
	})
}

func TestWriteOCILayerListsWithTar(t *testing.T) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("no tar(1) to read the layer back")
	}
	lower := t.TempDir()
	writeTree(t, lower)
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	j := func(s string) string { return filepath.Join(lower, s) }
	for _, err := range []error{
		f.RemoveAll(j("g")), f.Mkdir(j("g"), 0o700), f.Remove(j("a")),
		afero.WriteFile(f, j("d/e/new"), []byte("n"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := WriteOCILayer(f, &buf); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tarBin, "-t")
	cmd.Stdin = &buf
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "./\n.wh.a\nd/\nd/e/\nd/e/new\ng/\ng/.wh..wh..opq\n" // "./": the removal of a moved the root's time
	if string(out) != want {
		t.Errorf("tar -t lists\n%s\nwant\n%s", out, want)
	}
}

func TestOCIRefuses(t *testing.T) {
	lower := t.TempDir()
	writeTree(t, lower)
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		want    error
	}{
		{"dotdot", []tarEntry{{name: "../evil", body: "x"}}, fs.ErrInvalid},
		{"absolute", []tarEntry{{name: "/etc/evil", body: "x"}}, fs.ErrInvalid},
		{"whiteout of dotdot", []tarEntry{{name: "d/.wh.."}}, fs.ErrInvalid},
		{"device", []tarEntry{{name: "null", typ: tar.TypeChar, major: 1, minor: 3}}, ErrUnsupportedType},
		{"redirect", []tarEntry{{name: "d/", typ: tar.TypeDir, mode: 0o755, pax: map[string]string{"SCHILY.xattr.user.overlay.redirect": "/g"}}}, ErrRedirect},
		{"metacopy", []tarEntry{{name: "a", pax: map[string]string{"SCHILY.xattr.trusted.overlay.metacopy": ""}}}, ErrMetacopy},
		{"link outside", []tarEntry{{name: "h", typ: tar.TypeLink, link: "../../etc/passwd"}}, fs.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := overlayfs.New(lower)
			if err != nil {
				t.Fatal(err)
			}
			entries := append([]tarEntry{{name: "0first", body: "x"}}, tc.entries...)
			err = ReadOCILayer(bytes.NewReader(buildTar(t, entries)), f)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			// The package doc promises *fs.PathError; "kernel" is said at
			// most once.
			var pe *fs.PathError
			if !errors.As(err, &pe) || pe.Op != "oci" || strings.Count(err.Error(), "kernel") > 1 {
				t.Errorf("%v (%T): want an *fs.PathError with Op oci", err, err)
			}
			if ch := f.Changes(); len(ch) != 0 {
				t.Errorf("refused layer changed the view: %v", ch)
			}
		})
	}
	t.Run("truncated tar", func(t *testing.T) {
		f, err := overlayfs.New(lower)
		if err != nil {
			t.Fatal(err)
		}
		b := buildTar(t, []tarEntry{{name: "a", body: strings.Repeat("x", 2000)}})
		err = ReadOCILayer(bytes.NewReader(b[:700]), f)
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Op != "oci" {
			t.Errorf("%v (%T): want an *fs.PathError with Op oci", err, err)
		}
		if ch := f.Changes(); len(ch) != 0 {
			t.Errorf("refused layer changed the view: %v", ch)
		}
	})
	t.Run("unrepresentable name", func(t *testing.T) {
		f, err := overlayfs.New(lower)
		if err != nil {
			t.Fatal(err)
		}
		if err := afero.WriteFile(f, filepath.Join(lower, ".wh.x"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := WriteOCILayer(f, &bytes.Buffer{}); !errors.Is(err, ErrUnrepresentable) {
			t.Errorf("got %v, want ErrUnrepresentable", err)
		}
	})
}

// FuzzReadOCILayer: no input panics, and whatever is accepted survives
// layer -> tar -> layer with the same view.
func FuzzReadOCILayer(f *testing.F) {
	// Small seeds, one feature each: the engine minimizes every new input,
	// and a big seed's descendants take long to minimize.
	for _, e := range ociFixture {
		f.Add(buildTarFormat(f, []tarEntry{e}, tar.FormatUSTAR))
	}
	f.Add(buildTarFormat(f, []tarEntry{{name: "a/.wh..wh..opq"}, {name: "a/b", body: "x"}}, tar.FormatUSTAR))
	f.Add(buildTarFormat(f, []tarEntry{{name: "d", body: "file over dir"}, {name: "d/e/.wh.c"}}, tar.FormatUSTAR))
	f.Add([]byte("not a tar"))
	lower := f.TempDir()
	writeTree(f, lower)
	f.Fuzz(func(t *testing.T, data []byte) {
		fs1, err := overlayfs.New(lower)
		if err != nil {
			t.Fatal(err)
		}
		if err := ReadOCILayer(bytes.NewReader(data), fs1); err != nil {
			return
		}
		want, err := viewTree(fs1)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteOCILayer(fs1, &buf); err != nil {
			if errors.Is(err, ErrUnrepresentable) {
				return
			}
			t.Fatal(err)
		}
		fs2, err := overlayfs.New(lower)
		if err != nil {
			t.Fatal(err)
		}
		if err := ReadOCILayer(&buf, fs2); err != nil {
			t.Fatalf("re-reading our own layer: %v", err)
		}
		got, err := viewTree(fs2)
		if err != nil {
			t.Fatal(err)
		}
		if err := diffTrees(want, got, cmpOpts{times: true, dtimes: true, owners: true}); err != nil {
			t.Errorf("round trip changed the view:\n%v", err)
		}
	})
}
