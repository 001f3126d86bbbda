package overlayfs_test

// afero's generic Fs tests (afero_test.go, path_test.go, match_test.go,
// util_test.go of afero v1.15.0), ported to run on cowfs and on afero.OsFs
// side by side. Each test keeps afero's own assertions and also writes a
// transcript; cowfs's transcript must equal OsFs's, so OsFs is the oracle.

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"
)

const loremIpsum = "Lorem ipsum dolor sit amet, consectetur adipisicing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat."

// confCase is one ported test: it works under dir on fsys, reports failures
// on t and returns a transcript of what it saw.
type confCase func(t *testing.T, fsys afero.Fs, dir string) string

// populate puts afero's standard test files under dir on the real disk, so
// the "lower" variant runs every test over entries cowfs must copy up.
func populate(t *testing.T, dir string) {
	t.Helper()
	setupTestFiles(t, afero.NewOsFs(), dir)
	setupGlobFiles(t, afero.NewOsFs(), dir)
	for _, name := range []string{"testfile", "renamefrom", "renameexists"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("lower "+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runConformance runs tc on OsFs and on cowfs, over an empty directory and
// over a populated one, and compares the transcripts.
func runConformance(t *testing.T, tc confCase) {
	for _, variant := range []string{"empty", "lower"} {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			osDir := filepath.Join(t.TempDir(), "d")
			cowDir := filepath.Join(t.TempDir(), "d")
			for _, d := range []string{osDir, cowDir} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
				if variant == "lower" {
					populate(t, d)
				}
			}
			sum := hashTree(t, cowDir)
			c := newCow(t, cowDir)
			var want, got string
			t.Run("OsFs", func(t *testing.T) { want = tc(t, afero.NewOsFs(), osDir) })
			t.Run("cowfs", func(t *testing.T) { got = tc(t, c, c.Root()) })
			want = strings.ReplaceAll(want, osDir, "$DIR")
			got = strings.ReplaceAll(got, c.Root(), "$DIR")
			if want != got {
				t.Errorf("transcripts differ\n--- OsFs:\n%s\n--- cowfs:\n%s", want, got)
			}
			checkUnchanged(t, cowDir, sum)
		})
	}
}

func tmpFileIn(t *testing.T, fsys afero.Fs, dir string) afero.File {
	t.Helper()
	f, err := fsys.OpenFile(filepath.Join(dir, "testfile"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestConformanceRead0(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		f := tmpFileIn(t, fsys, dir)
		defer f.Close()
		f.WriteString(loremIpsum)
		var b []byte
		n, err := f.Read(b)
		if n != 0 || err != nil {
			t.Errorf("Read(0) = %d, %v, want 0, nil", n, err)
		}
		f.Seek(0, 0)
		b = make([]byte, 100)
		n, err = f.Read(b)
		if n <= 0 || err != nil {
			t.Errorf("Read(100) = %d, %v, want >0, nil", n, err)
		}
		return fmt.Sprintf("%d %v %q", n, err, b[:n])
	})
}

func TestConformanceOpenFile(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		path := filepath.Join(dir, "testfile")
		f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal("OpenFile (O_CREATE) failed:", err)
		}
		io.WriteString(f, "initial")
		f.Close()
		f, err = fsys.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal("OpenFile (O_APPEND) failed:", err)
		}
		io.WriteString(f, "|append")
		f.Close()
		f, _ = fsys.OpenFile(path, os.O_RDONLY, 0o600)
		contents, _ := io.ReadAll(f)
		f.Close()
		// afero expects exactly "initial|append" on an empty dir; over a
		// lower file O_CREATE keeps the longer old tail.
		if !strings.HasPrefix(string(contents), "initial") || !strings.HasSuffix(string(contents), "|append") {
			t.Errorf("appending: got %q", contents)
		}
		f, err = fsys.OpenFile(path, os.O_RDWR|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal("OpenFile (O_TRUNC) failed:", err)
		}
		after, _ := io.ReadAll(f)
		f.Close()
		if len(after) != 0 {
			t.Errorf("expected truncated file, got %q", after)
		}
		fi, err := fsys.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%q %q %v", contents, after, fi.Mode())
	})
}

func TestConformanceCreate(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		path := filepath.Join(dir, "testfile")
		for _, content := range []string{"initial", "second create"} {
			f, err := fsys.Create(path)
			if err != nil {
				t.Fatal("Create failed:", err)
			}
			io.WriteString(f, content)
			f.Close()
		}
		buf, err := afero.ReadFile(fsys, path)
		if err != nil || string(buf) != "second create" {
			t.Errorf("content = %q, %v; want %q", buf, err, "second create")
		}
		return string(buf)
	})
}

func TestConformanceRename(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		from := filepath.Join(dir, "/renamefrom")
		to := filepath.Join(dir, "/renameto")
		exists := filepath.Join(dir, "/renameexists")
		for _, name := range []string{from, exists} {
			file, err := fsys.Create(name)
			if err != nil {
				t.Fatalf("create %q failed: %v", name, err)
			}
			if err := file.Close(); err != nil {
				t.Errorf("close %q failed: %v", name, err)
			}
		}
		if err := fsys.Rename(from, to); err != nil {
			t.Fatalf("rename %q, %q failed: %v", from, to, err)
		}
		file, err := fsys.Create(from)
		if err != nil {
			t.Fatalf("create %q failed: %v", from, err)
		}
		file.WriteString("from, again")
		file.Close()
		if err := fsys.Rename(from, exists); err != nil {
			t.Errorf("rename %q, %q failed: %v", from, exists, err)
		}
		names := readDirNames(t, fsys, dir)
		if strings.Contains(" "+strings.Join(names, " ")+" ", " renamefrom ") {
			t.Error("File is still called renamefrom")
		}
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " renameto ") {
			t.Error("File was not renamed to renameto")
		}
		if _, err := fsys.Stat(to); err != nil {
			t.Errorf("stat %q failed: %v", to, err)
		}
		data, _ := afero.ReadFile(fsys, exists)
		return fmt.Sprintf("%q %q", names, data)
	})
}

func readDirNames(t *testing.T, fsys afero.Fs, dir string) []string {
	t.Helper()
	f, err := fsys.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	return sortStrings(names)
}

func TestConformanceRemove(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		x, err := afero.TempFile(fsys, dir, "afero")
		if err != nil {
			t.Fatal("unable to work with temp file", err)
		}
		path := x.Name()
		x.Close()
		if err := fsys.Remove(path); err != nil {
			t.Fatalf("Remove() failed: %v", err)
		}
		if _, err := fsys.Stat(path); !os.IsNotExist(err) {
			t.Errorf("Remove() didn't remove file")
		}
		if err := fsys.Remove(path); !os.IsNotExist(err) {
			t.Errorf("Remove() didn't raise error for non-existent file: %v", err)
		}
		names := readDirNames(t, fsys, dir)
		for _, e := range names {
			if e == filepath.Base(path) {
				t.Error("File was not removed from parent directory")
			}
		}
		// Also a lower (or fresh) file and an non-empty directory.
		rmErr := fsys.Remove(filepath.Join(dir, "more"))
		if rmErr == nil {
			t.Errorf("Remove(non-empty dir) = nil")
		}
		return fmt.Sprintf("%q %s", names, errClass(rmErr))
	})
}

func TestConformanceTruncate(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		f := tmpFileIn(t, fsys, dir)
		defer f.Close()
		var out []string
		check := func(size int64) {
			t.Helper()
			fi, err := f.Stat()
			if err != nil {
				t.Fatalf("Stat %q: %s", f.Name(), err)
			}
			if fi.Size() != size {
				t.Errorf("Stat %q: size %d want %d", f.Name(), fi.Size(), size)
			}
			out = append(out, fmt.Sprint(fi.Size()))
		}
		check(0)
		f.Write([]byte("hello, world\n"))
		check(13)
		f.Truncate(10)
		check(10)
		f.Truncate(1024)
		check(1024)
		f.Truncate(0)
		check(0)
		if _, err := f.Write([]byte("surprise!")); err == nil {
			check(13 + 9)
		}
		data, _ := afero.ReadFile(fsys, f.Name())
		return fmt.Sprintf("%v %q", out, data)
	})
}

func TestConformanceSeek(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		f := tmpFileIn(t, fsys, dir)
		defer f.Close()
		const data = "hello, world\n"
		io.WriteString(f, data)
		tests := []struct {
			in     int64
			whence int
			out    int64
		}{
			{0, 1, int64(len(data))},
			{0, 0, 0},
			{5, 0, 5},
			{0, 2, int64(len(data))},
			{0, 0, 0},
			{-1, 2, int64(len(data)) - 1},
			{1 << 33, 0, 1 << 33},
			{1 << 33, 2, 1<<33 + int64(len(data))},
		}
		var out []string
		for i, tt := range tests {
			off, err := f.Seek(tt.in, tt.whence)
			if off != tt.out || err != nil {
				t.Errorf("#%d: Seek(%v, %v) = %v, %v want %v, nil", i, tt.in, tt.whence, off, err, tt.out)
			}
			out = append(out, fmt.Sprint(off, errClass(err)))
		}
		return strings.Join(out, ",")
	})
}

func TestConformanceReadAt(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		f := tmpFileIn(t, fsys, dir)
		defer f.Close()
		io.WriteString(f, "hello, world\n")
		b := make([]byte, 5)
		n, err := f.ReadAt(b, 7)
		if err != nil || n != len(b) || string(b) != "world" {
			t.Fatalf("ReadAt 7: %d, %v, %q", n, err, b)
		}
		n2, err2 := f.ReadAt(b, 10)
		return fmt.Sprintf("%d %q %v", n2, b[:n2], err2)
	})
}

func TestConformanceWriteAt(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		f := tmpFileIn(t, fsys, dir)
		defer f.Close()
		io.WriteString(f, "hello, world\n")
		n, err := f.WriteAt([]byte("WORLD"), 7)
		if err != nil || n != 5 {
			t.Fatalf("WriteAt 7: %d, %v", n, err)
		}
		f2, err := fsys.Open(f.Name())
		if err != nil {
			t.Fatalf("ReadFile %s: %v", f.Name(), err)
		}
		defer f2.Close()
		buf := new(bytes.Buffer)
		buf.ReadFrom(f2)
		if buf.String() != "hello, WORLD\n" {
			t.Fatalf("after write: have %q want %q", buf.String(), "hello, WORLD\n")
		}
		return buf.String()
	})
}

// setupTestFiles is afero's: four files five directories down.
func setupTestFiles(t *testing.T, fsys afero.Fs, path string) string {
	t.Helper()
	testSubDir := filepath.Join(path, "more", "subdirectories", "for", "testing", "we")
	if err := fsys.MkdirAll(testSubDir, 0o700); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		f, err := fsys.Create(filepath.Join(testSubDir, fmt.Sprintf("testfile%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "Testfile %d content", i)
		f.Close()
	}
	return testSubDir
}

func TestConformanceReaddirnames(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		testSubDir := setupTestFiles(t, fsys, dir)
		tDir := filepath.Dir(testSubDir)
		namesRoot := readDirNames(t, fsys, tDir)
		namesSub := readDirNames(t, fsys, testSubDir)
		findNames(t, fsys, tDir, testSubDir, namesRoot, namesSub)
		return fmt.Sprintf("%q %q", namesRoot, namesSub)
	})
}

func TestConformanceReaddirSimple(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		testSubDir := setupTestFiles(t, fsys, dir)
		tDir := filepath.Dir(testSubDir)
		root, err := fsys.Open(tDir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		rootInfo, err := root.Readdir(1)
		if err != nil {
			t.Error(len(rootInfo), err)
		}
		out := fmt.Sprint(len(rootInfo), err)
		rootInfo, err = root.Readdir(5)
		if err != io.EOF {
			t.Error(len(rootInfo), err)
		}
		out += fmt.Sprint(" ", len(rootInfo), err)
		sub, err := fsys.Open(testSubDir)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		subInfo, err := sub.Readdir(5)
		if err != nil {
			t.Error(len(subInfo), err)
		}
		return out + fmt.Sprint(" ", len(subInfo), err)
	})
}

// TestConformanceReaddir pages through a directory with every n in 0..5:
// chunk sizes and errors must match OsFs's, and ReadDir must agree.
func TestConformanceReaddir(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		testSubDir := setupTestFiles(t, fsys, dir)
		var out strings.Builder
		const nums = 6
		for num := 0; num < nums; num++ {
			root, err := fsys.Open(testSubDir)
			if err != nil {
				t.Fatal(err)
			}
			infosn := make([]string, nums)
			for j := 0; j < nums; j++ {
				info, err := root.Readdir(num)
				infosn[j] = fmt.Sprintln(len(info), err)
				out.WriteString(infosn[j])
			}
			root.Close()
			root, err = fsys.Open(testSubDir)
			if err != nil {
				t.Fatal(err)
			}
			if rd, ok := root.(fs.ReadDirFile); ok {
				for j := 0; j < nums; j++ {
					des, err := rd.ReadDir(num)
					if s := fmt.Sprintln(len(des), err); s != infosn[j] {
						t.Errorf("Readdir(%d) call %d: ReadDir says %s, Readdir says %s", num, j, s, infosn[j])
					}
				}
			}
			root.Close()
		}
		return out.String()
	})
}

func TestConformanceReaddirRegularFile(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		f := tmpFileIn(t, fsys, dir)
		defer f.Close()
		_, err1 := f.Readdirnames(-1)
		if err1 == nil {
			t.Error("Readdirnames on a file: expected error")
		}
		_, err2 := f.Readdir(-1)
		if err2 == nil {
			t.Error("Readdir on a file: expected error")
		}
		return errClass(err1) + " " + errClass(err2)
	})
}

func TestConformanceReaddirAll(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		testSubDir := setupTestFiles(t, fsys, dir)
		tDir := filepath.Dir(testSubDir)
		list := func(d string) []string {
			f, err := fsys.Open(d)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fis, err := f.Readdir(-1)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, fi := range fis {
				names = append(names, fmt.Sprintf("%s:%v:%d", fi.Name(), fi.Mode(), map[bool]int64{true: 0, false: fi.Size()}[fi.IsDir()]))
			}
			return sortStrings(names)
		}
		namesRoot, namesSub := list(tDir), list(testSubDir)
		return fmt.Sprintf("%q %q", namesRoot, namesSub)
	})
}

func findNames(t *testing.T, fsys afero.Fs, tDir, testSubDir string, root, sub []string) {
	t.Helper()
	want := map[string]bool{"we": false}
	for _, e := range root {
		f, err := fsys.Open(filepath.Join(tDir, e))
		if err != nil {
			t.Error("Open", filepath.Join(tDir, e), ":", err)
		} else {
			f.Close()
		}
		if _, ok := want[e]; ok {
			want[e] = true
		}
	}
	for _, e := range sub {
		f, err := fsys.Open(filepath.Join(testSubDir, e))
		if err != nil {
			t.Error("Open", filepath.Join(testSubDir, e), ":", err)
		} else {
			f.Close()
		}
		if e == "testfile1" || e == "testfile2" {
			want[e] = true
		}
	}
	for _, n := range []string{"we", "testfile1", "testfile2"} {
		if !want[n] {
			t.Errorf("didn't find %s in %q / %q", n, root, sub)
		}
	}
}

func TestConformanceWalk(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		setupTestFiles(t, fsys, dir)
		var out strings.Builder
		err := afero.Walk(fsys, dir, func(path string, info os.FileInfo, err error) error {
			if err != nil {
				t.Error("walkFn err:", err)
				return nil
			}
			var size int64
			if !info.IsDir() {
				size = info.Size()
			}
			fmt.Fprintln(&out, path, info.Name(), size, info.IsDir(), info.Mode())
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		return out.String()
	})
}

// setupGlobFiles is afero's, with its odd "/../" names.
func setupGlobFiles(t *testing.T, fsys afero.Fs, path string) string {
	t.Helper()
	testSubDir := filepath.Join(path, "globs", "bobs")
	if err := fsys.MkdirAll(testSubDir, 0o700); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	for i, name := range []string{"/matcher", "/../submatcher", "/../../match"} {
		f, err := fsys.Create(filepath.Join(testSubDir, name))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "Testfile %d content", i+1)
		f.Close()
	}
	return testSubDir
}

func TestConformanceGlob(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		setupGlobFiles(t, fsys, dir)
		var out strings.Builder
		for _, tt := range []struct{ pattern, result string }{
			{dir + "/globs/bobs/matcher", dir + "/globs/bobs/matcher"},
			{dir + "/globs/*/mat?her", dir + "/globs/bobs/matcher"},
			{dir + "/globs/bobs/../*", dir + "/globs/submatcher"},
			{dir + "/match", dir + "/match"},
		} {
			matches, err := afero.Glob(fsys, tt.pattern)
			if err != nil {
				t.Errorf("Glob error for %q: %s", tt.pattern, err)
				continue
			}
			found := false
			for _, m := range matches {
				found = found || m == tt.result
			}
			if !found {
				t.Errorf("Glob(%#q) = %#v want %v", tt.pattern, matches, tt.result)
			}
			fmt.Fprintln(&out, matches)
		}
		for _, pattern := range []string{"no_match", "../*/no_match", dir + "/globs/*", dir + "/*/*/*"} {
			matches, err := afero.Glob(fsys, pattern)
			if err != nil {
				t.Errorf("Glob error for %q: %s", pattern, err)
			}
			fmt.Fprintln(&out, matches)
		}
		if _, err := afero.Glob(fsys, dir+"/[7"); err == nil {
			t.Error("Glob(bad pattern) = nil error")
		}
		return out.String()
	})
}

func TestConformanceGlobSymlink(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		setupGlobFiles(t, fsys, dir)
		lk := fsys.(afero.Linker)
		if err := lk.SymlinkIfPossible("target", filepath.Join(dir, "symlink")); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for _, tt := range []struct {
			path, dest string
			broken     bool
		}{{"test1", "link1", false}, {"test2", "link2", true}} {
			path := filepath.Join(dir, tt.path)
			dest := filepath.Join(dir, tt.dest)
			f, err := fsys.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			if err := lk.SymlinkIfPossible(path, dest); err != nil {
				t.Fatal(err)
			}
			if tt.broken {
				fsys.Remove(path)
			}
			matches, err := afero.Glob(fsys, dest)
			if err != nil || len(matches) != 1 || matches[0] != dest {
				t.Errorf("Glob(%#q) = %#v, %v want %v", dest, matches, err, dest)
			}
			fmt.Fprintln(&out, matches)
		}
		return out.String()
	})
}

// TestConformanceUtil ports afero's util tests: Exists, DirExists, IsDir,
// IsEmpty, WriteReader, SafeWriteReader, TempFile, TempDir.
func TestConformanceUtil(t *testing.T) {
	runConformance(t, func(t *testing.T, fsys afero.Fs, dir string) string {
		var out []string
		say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
		setupTestFiles(t, fsys, dir)
		empty := filepath.Join(dir, "emptydir")
		if err := fsys.Mkdir(empty, 0o755); err != nil {
			t.Fatal(err)
		}
		zero := filepath.Join(dir, "zero")
		if err := afero.WriteFile(fsys, zero, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{dir, empty, zero, filepath.Join(dir, "more"), filepath.Join(dir, "more/subdirectories/for/testing/we/testfile1"), filepath.Join(dir, "missing")} {
			ex, err1 := afero.Exists(fsys, p)
			de, err2 := afero.DirExists(fsys, p)
			id, err3 := afero.IsDir(fsys, p)
			ie, err4 := afero.IsEmpty(fsys, p)
			say("%s exists=%v,%s direxists=%v,%s isdir=%v,%s isempty=%v,%s", p, ex, errClass(err1), de, errClass(err2), id, errClass(err3), ie, errClass(err4))
		}
		if ok, _ := afero.IsEmpty(fsys, empty); !ok {
			t.Errorf("IsEmpty(emptydir) = false")
		}
		if ok, _ := afero.IsEmpty(fsys, filepath.Join(dir, "more")); ok {
			t.Errorf("IsEmpty(more) = true")
		}
		wr := filepath.Join(dir, "a", "b", "written")
		err := afero.WriteReader(fsys, wr, strings.NewReader("via reader"))
		data, _ := afero.ReadFile(fsys, wr)
		say("WriteReader %s %q", errClass(err), data)
		err = afero.SafeWriteReader(fsys, wr, strings.NewReader("again"))
		say("SafeWriteReader over existing %v", err != nil)
		if err == nil {
			t.Errorf("SafeWriteReader over an existing file = nil")
		}
		err = afero.SafeWriteReader(fsys, filepath.Join(dir, "c", "safe"), strings.NewReader("safe"))
		data, _ = afero.ReadFile(fsys, filepath.Join(dir, "c", "safe"))
		say("SafeWriteReader new %s %q", errClass(err), data)
		tf, err := afero.TempFile(fsys, dir, "tmp-*.txt")
		if err != nil {
			t.Fatal(err)
		}
		tf.WriteString("temp")
		tf.Close()
		td, err := afero.TempDir(fsys, dir, "tdir")
		if err != nil {
			t.Fatal(err)
		}
		tfi, err1 := fsys.Stat(tf.Name())
		tdi, err2 := fsys.Stat(td)
		if err1 != nil || err2 != nil || tfi.Mode() != 0o600 || tdi.Mode() != fs.ModeDir|0o700 {
			t.Errorf("TempFile/TempDir: %v %v; %v %v", tfi, err1, tdi, err2)
		} else {
			say("TempFile %v TempDir %v", tfi.Mode(), tdi.Mode())
		}
		return strings.Join(out, "\n")
	})
}
