package tape

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/spf13/afero"
)

// tree builds the fixture every ops case starts from.
func tree(t *testing.T, dir string) {
	t.Helper()
	mustWrite(t, filepath.Join(dir, "f"), []byte("hello"))
	mustWrite(t, filepath.Join(dir, "d/x"), []byte("x"))
	must(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	must(t, os.Symlink("f", filepath.Join(dir, "link")))
	must(t, os.Symlink("loop2", filepath.Join(dir, "loop1")))
	must(t, os.Symlink("loop1", filepath.Join(dir, "loop2")))
}

type opCase struct {
	name  string
	op    string // op of the record the call makes
	class string // recorded class
	errno error  // what errors.Is must find in os's own error (nil: success)
	call  func(fsys afero.Fs, p func(string) string) error
}

func opCases() []opCase {
	stat := func(name string) func(afero.Fs, func(string) string) error {
		return func(fsys afero.Fs, p func(string) string) error { _, err := fsys.Stat(p(name)); return err }
	}
	return []opCase{
		{"stat file", OpStat, "", nil, stat("f")},
		{"stat missing", OpStat, OutcomeNotExist, syscall.ENOENT, stat("missing")},
		{"stat through a file", OpStat, OutcomeNotDir, syscall.ENOTDIR, stat("f/x")},
		{"stat symlink loop", OpStat, OutcomeLoop, syscall.ELOOP, stat("loop1")},
		{"lstat symlink", OpLstat, "", nil, func(fsys afero.Fs, p func(string) string) error {
			_, _, err := fsys.(afero.Lstater).LstatIfPossible(p("link"))
			return err
		}},
		{"mkdir existing", OpMkdir, OutcomeExist, syscall.EEXIST, func(fsys afero.Fs, p func(string) string) error {
			return fsys.Mkdir(p("d"), 0o755)
		}},
		{"mkdir without parent", OpMkdir, OutcomeNotExist, syscall.ENOENT, func(fsys afero.Fs, p func(string) string) error {
			return fsys.Mkdir(p("missing/x"), 0o755)
		}},
		{"mkdirall over a file", OpMkdirAll, OutcomeNotDir, syscall.ENOTDIR, func(fsys afero.Fs, p func(string) string) error {
			return fsys.MkdirAll(p("f/sub"), 0o755)
		}},
		{"remove non-empty dir", OpRemove, OutcomeNotEmpty, syscall.ENOTEMPTY, func(fsys afero.Fs, p func(string) string) error {
			return fsys.Remove(p("d"))
		}},
		{"remove missing", OpRemove, OutcomeNotExist, syscall.ENOENT, func(fsys afero.Fs, p func(string) string) error {
			return fsys.Remove(p("missing"))
		}},
		{"removeall missing is fine", OpRemoveAll, "", nil, func(fsys afero.Fs, p func(string) string) error {
			return fsys.RemoveAll(p("missing"))
		}},
		{"rename dir into itself", OpRename, OutcomeInvalid, syscall.EINVAL, func(fsys afero.Fs, p func(string) string) error {
			return fsys.Rename(p("d"), p("d/sub"))
		}},
		// os.Rename refuses a directory as the new name itself, with EEXIST.
		{"rename file over dir", OpRename, OutcomeExist, syscall.EEXIST, func(fsys afero.Fs, p func(string) string) error {
			return fsys.Rename(p("f"), p("empty"))
		}},
		{"rename dir over file", OpRename, OutcomeNotDir, syscall.ENOTDIR, func(fsys afero.Fs, p func(string) string) error {
			return fsys.Rename(p("empty"), p("f"))
		}},
		{"rename dir over non-empty dir", OpRename, OutcomeExist, syscall.EEXIST, func(fsys afero.Fs, p func(string) string) error {
			return fsys.Rename(p("empty"), p("d"))
		}},
		{"readlink of a file", OpReadlink, OutcomeInvalid, syscall.EINVAL, func(fsys afero.Fs, p func(string) string) error {
			_, err := fsys.(afero.LinkReader).ReadlinkIfPossible(p("f"))
			return err
		}},
		{"symlink over existing", OpSymlink, OutcomeExist, syscall.EEXIST, func(fsys afero.Fs, p func(string) string) error {
			return fsys.(afero.Linker).SymlinkIfPossible("f", p("link"))
		}},
		{"open missing", OpOpen, OutcomeNotExist, syscall.ENOENT, func(fsys afero.Fs, p func(string) string) error {
			_, err := fsys.Open(p("missing"))
			return err
		}},
		{"open dir for writing", OpOpen, OutcomeIsDir, syscall.EISDIR, func(fsys afero.Fs, p func(string) string) error {
			_, err := fsys.OpenFile(p("d"), os.O_WRONLY, 0)
			return err
		}},
		{"create exclusive over existing", OpOpen, OutcomeExist, syscall.EEXIST, func(fsys afero.Fs, p func(string) string) error {
			_, err := fsys.OpenFile(p("f"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
			return err
		}},
		{"chmod missing", OpChmod, OutcomeNotExist, syscall.ENOENT, func(fsys afero.Fs, p func(string) string) error {
			return fsys.Chmod(p("missing"), 0o600)
		}},
		{"chtimes missing", OpChtimes, OutcomeNotExist, syscall.ENOENT, func(fsys afero.Fs, p func(string) string) error {
			return fsys.Chtimes(p("missing"), time.Unix(1, 0), time.Unix(2, 0))
		}},
		{"chown missing", OpChown, OutcomeNotExist, syscall.ENOENT, func(fsys afero.Fs, p func(string) string) error {
			return fsys.Chown(p("missing"), os.Getuid(), os.Getgid())
		}},
		{"chmod file", OpChmod, "", nil, func(fsys afero.Fs, p func(string) string) error {
			return fsys.Chmod(p("f"), 0o600)
		}},
	}
}

// TestOpsMatchOS runs every case on os (the oracle, one copy of the tree)
// and through the recorder (another copy): the recorder must return the
// same error as os and record the class that error has.
func TestOpsMatchOS(t *testing.T) {
	for _, c := range opCases() {
		t.Run(c.name, func(t *testing.T) {
			oracle, dir := t.TempDir(), t.TempDir()
			tree(t, oracle)
			tree(t, dir)
			osErr := c.call(afero.NewOsFs(), func(n string) string { return filepath.Join(oracle, n) })
			if (c.errno == nil) != (osErr == nil) || c.errno != nil && !errors.Is(osErr, c.errno) {
				t.Fatalf("oracle: os gives %v, the case expects %v", osErr, c.errno)
			}
			var got error
			tp, _ := tapeOf(t, afero.NewOsFs(), dir, func(fsys afero.Fs) {
				got = c.call(fsys, func(n string) string { return filepath.Join(dir, n) })
			})
			if c.errno != nil && !errors.Is(got, c.errno) || c.errno == nil && got != nil {
				t.Errorf("through the recorder: %v, os gave %v", got, osErr)
			}
			if len(tp.Records) != 1 {
				t.Fatalf("want one record, got %v", tp.Canon(ModeGlobal))
			}
			r := tp.Records[0]
			if r.Op != c.op || r.Err != c.class {
				t.Errorf("record %s: want op %s err %q", r.String(), c.op, c.class)
			}
			if r.Err != ErrorOutcome(osErr) {
				t.Errorf("record class %q, class of os's error %q", r.Err, ErrorOutcome(osErr))
			}
		})
	}
}

func TestErrorClassSentinels(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, OutcomePermission},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EPERM}, OutcomePermission},
		{&os.LinkError{Op: "rename", Old: "a", New: "b", Err: syscall.EXDEV}, OutcomeCrossDevice},
		{&fs.PathError{Op: "read", Path: "/x", Err: fs.ErrClosed}, OutcomeClosed},
		{afero.ErrFileClosed, OutcomeClosed},
		{&os.LinkError{Op: "symlink", Err: afero.ErrNoSymlink}, OutcomeUnsupported},
		{syscall.ENAMETOOLONG, OutcomeNameTooLong},
		{syscall.EROFS, OutcomeReadOnly},
		{syscall.ENOSPC, OutcomeNoSpace},
		{errors.New("something /abs/path said"), OutcomeOther},
	} {
		if got := ErrorOutcome(c.err); got != c.want {
			t.Errorf("ErrorOutcome(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestMetadataRecords checks the fields of successful metadata records
// against what os reports.
func TestMetadataRecords(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	p := func(n string) string { return filepath.Join(dir, n) }
	at, mt := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC), time.Date(2021, 1, 2, 3, 4, 5, 6, time.UTC)
	tp, _ := tapeOf(t, afero.NewOsFs(), dir, func(fsys afero.Fs) {
		fsys.Stat(p("f"))
		fsys.(afero.Lstater).LstatIfPossible(p("link"))
		fsys.Mkdir(p("new"), 0o700)
		fsys.Chtimes(p("f"), at, mt)
		fsys.Chown(p("f"), os.Getuid(), os.Getgid())
		fsys.(afero.Linker).SymlinkIfPossible(p("f"), p("abslink"))
		fsys.(afero.LinkReader).ReadlinkIfPossible(p("abslink"))
		fsys.(afero.LinkReader).ReadlinkIfPossible(p("link"))
		fsys.Rename(p("new"), p("newer"))
		fsys.RemoveAll(p("d"))
	})
	fi, err := os.Stat(p("f"))
	must(t, err)
	li, err := os.Lstat(p("link"))
	must(t, err)
	uid, gid := os.Getuid(), os.Getgid()
	want := []string{
		"stat f mode=" + fi.Mode().String() + " size=5",
		"lstat link mode=" + li.Mode().String(),
		"mkdir new mode=-rwx------",
		"chtimes f atime=2020-01-02T03:04:05.000000006Z mtime=2021-01-02T03:04:05.000000006Z",
		"chown f uid=" + itoa(uid) + " gid=" + itoa(gid),
		"symlink abslink target=<root>/f",
		"readlink abslink target=<root>/f",
		"readlink link target=f",
		"rename new -> newer",
		"removeall d",
	}
	got := tp.Canon(ModeGlobal)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	fin := strings.Join(tp.Final(), "\n")
	wantFin := strings.Join([]string{
		"abslink symlink target=<root>/f",
		"d deleted",
		"f lower owner=" + itoa(uid) + ":" + itoa(gid) + " mtime=2021-01-02T03:04:05.000000006Z",
		// no "new deleted": its mkdir shows the root did not hold it
		"newer dir mode=-rwx------",
	}, "\n")
	if fin != wantFin {
		t.Errorf("final state:\n%s\nwant:\n%s", fin, wantFin)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestOutsideRoot: names outside the root are recorded as a placeholder and
// the absolute prefix appears nowhere in the tape; relative names resolve
// against the working directory.
func TestOutsideRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	mustWrite(t, filepath.Join(root, "in.txt"), []byte("in"))
	mustWrite(t, filepath.Join(base, "outside.txt"), []byte("out"))
	t.Chdir(root)
	tp, raw := tapeOf(t, afero.NewOsFs(), root, func(fsys afero.Fs) {
		afero.ReadFile(fsys, "in.txt")
		afero.ReadFile(fsys, "../outside.txt")
		fsys.Stat(filepath.Join(base, "outside.txt"))
		fsys.Stat(root)
		fsys.Stat(root + "/./sub/../in.txt")
		fsys.Rename("in.txt", "../moved.txt")
	}, WithInfo("note", "no absolute names in records"))
	if bytes.Contains(raw, []byte(base)) {
		t.Errorf("the tape holds the absolute prefix %s:\n%s", base, raw)
	}
	var paths []string
	for _, r := range tp.Records {
		paths = append(paths, r.Path+">"+r.To)
	}
	want := "in.txt> in.txt> <outside>> <outside>> <outside>> .> in.txt> in.txt><outside>"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("paths %q, want %q", got, want)
	}
}

// bareFs hides the optional interfaces of the fs it wraps.
type bareFs struct{ afero.Fs }

// TestOptionalInterfaces: the wrapper reports what the inner fs supports.
func TestOptionalInterfaces(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir)
	link := filepath.Join(dir, "link")
	for _, c := range []struct {
		name      string
		inner     afero.Fs
		lstatUsed bool
		symlinks  bool
	}{
		{"OsFs", afero.NewOsFs(), true, true},
		{"MemMapFs", afero.NewMemMapFs(), false, false}, // its LstatIfPossible is Stat
		{"bare", bareFs{afero.NewOsFs()}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			rec := NewRecorder(&buf)
			w := rec.Wrap(c.inner, dir)
			_, used, _ := w.(afero.Lstater).LstatIfPossible(link)
			if l, ok := c.inner.(afero.Lstater); ok {
				_, innerUsed, _ := l.LstatIfPossible(link)
				if used != innerUsed {
					t.Errorf("LstatIfPossible used=%v, inner says %v", used, innerUsed)
				}
			}
			if used != c.lstatUsed {
				t.Errorf("LstatIfPossible used=%v, want %v", used, c.lstatUsed)
			}
			err := w.(afero.Linker).SymlinkIfPossible("f", filepath.Join(dir, "l2-"+c.name))
			if c.symlinks != (err == nil) {
				t.Errorf("SymlinkIfPossible: %v", err)
			}
			if !c.symlinks {
				var le *os.LinkError
				if !errors.As(err, &le) || !errors.Is(err, afero.ErrNoSymlink) {
					t.Errorf("SymlinkIfPossible: %v, want *os.LinkError wrapping ErrNoSymlink", err)
				}
				_, err = w.(afero.LinkReader).ReadlinkIfPossible(link)
				var pe *fs.PathError
				if !errors.As(err, &pe) || !errors.Is(err, afero.ErrNoReadlink) {
					t.Errorf("ReadlinkIfPossible: %v, want *fs.PathError wrapping ErrNoReadlink", err)
				}
			}
			must(t, rec.Close())
		})
	}
}

// TestIOFSConformance runs testing/fstest on an io/fs view of a wrapped
// OsFs: recording must not change what a reader sees (ReadDir paging,
// Seek, ReadAt, Stat).
func TestIOFSConformance(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a.txt"), []byte("alpha"))
	mustWrite(t, filepath.Join(dir, "sub/b.txt"), pattern(70000, 9))
	mustWrite(t, filepath.Join(dir, "sub/c/d.txt"), nil)
	var buf bytes.Buffer
	rec := NewRecorder(&buf)
	w := rec.Wrap(afero.NewOsFs(), dir)
	if err := fstest.TestFS(afero.NewIOFS(afero.NewBasePathFs(w, dir)), "a.txt", "sub/b.txt", "sub/c/d.txt"); err != nil {
		t.Fatal(err)
	}
	must(t, rec.Close())
	tp, err := Read(&buf)
	must(t, err)
	want, _ := oracleHash(t, filepath.Join(dir, "sub/b.txt"))
	found := false
	for _, r := range only(tp, OpOpen, "sub/b.txt") {
		if r.RHash != "" {
			found = true
			if r.RHash != want {
				t.Errorf("%s: read hash differs from os's bytes %s", r.String(), want)
			}
		}
	}
	if !found {
		t.Errorf("no read of sub/b.txt recorded")
	}
	for _, r := range only(tp, OpOpen, "sub") {
		if r.List != "" && (r.N != 2 || strings.Join(r.Names, ",") != "b.txt,c") {
			t.Errorf("listing of sub: %s", r.String())
		}
	}
}

// TestModeString: the allocation-free spellings are FileMode.String's.
func TestModeString(t *testing.T) {
	for m := range fs.FileMode(0o1000) {
		for _, typ := range []fs.FileMode{0, fs.ModeDir, fs.ModeSymlink} {
			if got, want := modeString(typ|m), (typ | m).String(); got != want {
				t.Errorf("modeString(%o) = %q, want %q", typ|m, got, want)
			}
		}
	}
}

// TestRelAgreesWithFilepath: the recorded path of a name, fast path or
// not, is what filepath.Clean and filepath.Rel say: the name relative to
// the first spelling of the root (the one given, then the one through
// symlinks) that contains it, "." for the root, OutsidePath otherwise.
func TestRelAgreesWithFilepath(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	fsys := NewRecorder(io.Discard).Wrap(afero.NewMemMapFs(), link).(*Fs)
	spellings := []string{link, dir}
	oracle := func(name string) string {
		c := filepath.Clean(name)
		for _, root := range spellings {
			r, err := filepath.Rel(root, c)
			if err == nil && r != ".." && !strings.HasPrefix(r, "../") {
				return filepath.ToSlash(r)
			}
		}
		return OutsidePath
	}
	parts := []string{"a", "b.txt", ".", "..", "", "..x", "...", ".x", "x.", "x..", ".a."}
	rng := rand.New(rand.NewPCG(3, 4))
	n := 0
	for _, base := range []string{link, dir, link + "/", dir + "//", filepath.Dir(dir), "/"} {
		for range 400 {
			name := base
			for range rng.IntN(4) {
				name += "/" + parts[rng.IntN(len(parts))]
			}
			got, clean := fsys.relClean(name)
			if want := oracle(name); got != want {
				t.Errorf("rel(%q) = %q, filepath says %q", name, got, want)
			}
			if clean && filepath.Clean(name) != name {
				t.Errorf("relClean(%q) says clean, filepath.Clean gives %q", name, filepath.Clean(name))
			}
			n++
		}
	}
	t.Logf("%d names", n)
}
