package overlayfs_test

// Shared helpers of the oracle suites: fixture trees from txtar, a faithful
// tree copy, the os "target" every scenario runs against, error classes, tree
// walks and the Changes oracle.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/overlayfs"
)

// target is what a scenario drives: cowfs, or the real os on a temp copy.
type target interface {
	afero.Fs
	afero.Lstater
	afero.Linker
	afero.LinkReader
}

var (
	_ target = (*overlayfs.Fs)(nil)
	_ target = osTarget{}
)

// osTarget calls the os package directly: the oracle.
type osTarget struct{}

func (osTarget) Create(name string) (afero.File, error) { return nilFile(os.Create(name)) }
func (osTarget) Mkdir(name string, perm os.FileMode) error {
	return os.Mkdir(name, perm)
}
func (osTarget) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osTarget) Open(name string) (afero.File, error)         { return nilFile(os.Open(name)) }
func (osTarget) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	return nilFile(os.OpenFile(name, flag, perm))
}
func (osTarget) Remove(name string) error                        { return os.Remove(name) }
func (osTarget) RemoveAll(path string) error                     { return os.RemoveAll(path) }
func (osTarget) Rename(oldname, newname string) error            { return os.Rename(oldname, newname) }
func (osTarget) Stat(name string) (os.FileInfo, error)           { return os.Stat(name) }
func (osTarget) Name() string                                    { return "os" }
func (osTarget) Chmod(name string, mode os.FileMode) error       { return os.Chmod(name, mode) }
func (osTarget) Chown(name string, uid, gid int) error           { return os.Chown(name, uid, gid) }
func (osTarget) Chtimes(name string, a, m time.Time) error       { return os.Chtimes(name, a, m) }
func (osTarget) SymlinkIfPossible(oldname, newname string) error { return os.Symlink(oldname, newname) }
func (osTarget) ReadlinkIfPossible(name string) (string, error)  { return os.Readlink(name) }
func (osTarget) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	fi, err := os.Lstat(name)
	return fi, true, err
}

// nilFile keeps a nil *os.File from becoming a non-nil afero.File.
func nilFile(f *os.File, err error) (afero.File, error) {
	if f == nil {
		return nil, err
	}
	return f, err
}

// newCow builds the Fs under test over root.
func newCow(t testing.TB, root string, opts ...overlayfs.Option) *overlayfs.Fs {
	t.Helper()
	c, err := overlayfs.New(root, opts...)
	if err != nil {
		t.Fatalf("overlayfs.New(%q): %v", root, err)
	}
	return c
}

// ---- fixtures ----

// treesDir holds the fixture trees shared by every package.
const treesDir = "../testdata/trees"

// writeTree materializes the fixture archive name (e.g. "project") under dir,
// which must not exist yet. Directives in the archive comment:
//
//	mode PATH PERM        permission bits of a file or directory (octal)
//	dir PATH [PERM]       an empty directory (default 0755)
//	symlink PATH TARGET   a symbolic link
//
// A PATH or TARGET holding a space is a Go double-quoted string. All
// modification times are set to a fixed instant so copies compare equal.
func writeTree(t testing.TB, name, dir string) {
	t.Helper()
	ar, err := txtar.ParseFile(filepath.Join(treesDir, name+".txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if err := materialize(ar, dir); err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
}

var fixtureTime = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

func materialize(ar *txtar.Archive, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	mkparents := func(rel string) error {
		return os.MkdirAll(filepath.Dir(filepath.Join(dir, filepath.FromSlash(rel))), 0o755)
	}
	for _, f := range ar.Files {
		if err := mkparents(f.Name); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(f.Name)), f.Data, 0o644); err != nil {
			return err
		}
	}
	var modes [][2]string
	for line := range strings.Lines(string(ar.Comment)) {
		verb, rest, _ := strings.Cut(strings.TrimRight(line, "\n"), " ")
		if verb != "mode" && verb != "dir" && verb != "symlink" {
			continue
		}
		args, err := splitArgs(rest)
		if err != nil {
			return fmt.Errorf("directive %q: %w", line, err)
		}
		switch {
		case verb == "mode" && len(args) == 2:
			modes = append(modes, [2]string{args[0], args[1]})
		case verb == "dir" && (len(args) == 1 || len(args) == 2):
			if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(args[0])), 0o755); err != nil {
				return err
			}
			if len(args) == 2 {
				modes = append(modes, [2]string{args[0], args[1]})
			}
		case verb == "symlink" && len(args) == 2:
			if err := mkparents(args[0]); err != nil {
				return err
			}
			if err := os.Symlink(args[1], filepath.Join(dir, filepath.FromSlash(args[0]))); err != nil {
				return err
			}
		default:
			return fmt.Errorf("bad directive %q", line)
		}
	}
	// Umask may have masked MkdirAll/WriteFile: set every mode explicitly.
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch d.Type() {
		case fs.ModeDir:
			return os.Chmod(p, 0o755)
		case 0:
			return os.Chmod(p, 0o644)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range modes {
		perm, err := strconv.ParseUint(m[1], 8, 32)
		if err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(m[0])), fs.FileMode(perm)); err != nil {
			return err
		}
	}
	return setTimes(dir)
}

// setTimes gives every entry under dir (symlinks too) the fixture time.
func setTimes(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		return lutimes(p, fixtureTime)
	})
	if err != nil {
		return err
	}
	// Children first: setting a child's time does not touch its parent's mtime,
	// but creating it did; directories last, deepest first.
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := os.Chtimes(d, fixtureTime, fixtureTime); err != nil {
			return err
		}
	}
	return nil
}

// splitArgs splits a directive's arguments on spaces; an argument starting with
// a double quote is a Go quoted string.
func splitArgs(s string) ([]string, error) {
	var out []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return out, nil
		}
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, err
			}
			u, _ := strconv.Unquote(q)
			out = append(out, u)
			s = s[len(q):]
			continue
		}
		i := strings.IndexAny(s, " \t")
		if i < 0 {
			i = len(s)
		}
		out = append(out, s[:i])
		s = s[i:]
	}
}

// copyTree copies src to dst (which must not exist) keeping types (FIFOs
// and sockets included), symlink targets, mode bits (setuid, setgid and
// sticky too) and modification times.
func copyTree(src, dst string) error {
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			if err := os.Mkdir(out, 0o700); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, data, 0o600); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeNamedPipe != 0:
			if err := mkfifo(out); err != nil {
				return &fs.PathError{Op: "mkfifo", Path: out, Err: err}
			}
		case fi.Mode()&fs.ModeSocket != 0:
			if err := mksock(out); err != nil {
				return &fs.PathError{Op: "mknod", Path: out, Err: err}
			}
		default:
			return fmt.Errorf("copyTree: %s: unsupported type %v", p, fi.Mode().Type())
		}
		return os.Chmod(out, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
	})
	if err != nil {
		return err
	}
	var dirs []string
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, rel)
			return nil
		}
		return lutimes(filepath.Join(dst, rel), fi.ModTime())
	})
	if err != nil {
		return err
	}
	slices.Reverse(dirs)
	for _, rel := range dirs {
		fi, err := os.Lstat(filepath.Join(src, rel))
		if err != nil {
			return err
		}
		if err := os.Chtimes(filepath.Join(dst, rel), fi.ModTime(), fi.ModTime()); err != nil {
			return err
		}
	}
	return nil
}

// hashTree digests everything observable about the tree at dir with os:
// names, types, modes, sizes, mtimes, owners, contents and symlink targets.
func hashTree(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%q %v %d %d", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if uid, gid, ok := sysOwner(fi); ok {
			fmt.Fprintf(h, " %d:%d", uid, gid)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, " -> %q", target)
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(data)
		}
		h.Write([]byte{'\n'})
		return nil
	})
	if err != nil {
		t.Fatalf("hashTree(%s): %v", dir, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkUnchanged fails t when the tree at dir no longer has digest want.
func checkUnchanged(t testing.TB, dir, want string) {
	t.Helper()
	if got := hashTree(t, dir); got != want {
		t.Errorf("the original tree %s was modified (digest %s, want %s)", dir, got, want)
	}
}

// origTree materializes a fixture as a read-only original shared by the
// subtests of one test, and checks at cleanup that nothing changed it.
func origTree(t testing.TB, fixture string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "orig")
	writeTree(t, fixture, dir)
	sum := hashTree(t, dir)
	t.Cleanup(func() { checkUnchanged(t, dir, sum) })
	return dir
}

// osCopy returns a fresh copy of orig in a temp dir for os to mutate.
func osCopy(t testing.TB, orig string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), filepath.Base(orig))
	if err := copyTree(orig, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ---- errors ----

// errClasses are the classes an error is sorted into, os's sentinels and errnos.
var errClasses = []struct {
	name string
	err  error
}{
	{"ErrNotExist", fs.ErrNotExist},
	{"ErrExist", fs.ErrExist},
	{"ErrPermission", fs.ErrPermission},
	{"ENOTDIR", syscall.ENOTDIR},
	{"EISDIR", syscall.EISDIR},
	{"ENOTEMPTY", syscall.ENOTEMPTY},
	{"EINVAL", syscall.EINVAL},
	{"ELOOP", syscall.ELOOP},
	{"EBADF", syscall.EBADF},
	{"EXDEV", syscall.EXDEV},
	{"ENAMETOOLONG", syscall.ENAMETOOLONG},
	{"EBUSY", syscall.EBUSY},
	{"ErrClosed", os.ErrClosed},
	{"EOF", io.EOF},
	{"ErrInvalid", fs.ErrInvalid},
}

// errClass names the classes err belongs to ("nil" for nil, "other" for none).
func errClass(err error) string {
	if err == nil {
		return "nil"
	}
	var names []string
	for _, c := range errClasses {
		if errors.Is(err, c.err) {
			names = append(names, c.name)
		}
	}
	if len(names) == 0 {
		return "other"
	}
	return strings.Join(names, "|")
}

// describeErr renders the class, concrete type, Op and path(s) of err, with
// root replaced by "$ROOT" so both sides compare equal.
func describeErr(err error, root string) string {
	if err == nil {
		return "nil"
	}
	rel := func(p string) string {
		if root != "" && (p == root || strings.HasPrefix(p, root+"/")) {
			return "$ROOT" + p[len(root):]
		}
		return p
	}
	class := errClass(err)
	if class == "other" {
		// No sentinel: compare the innermost message instead, without paths.
		inner := err
		for u := errors.Unwrap(inner); u != nil; u = errors.Unwrap(inner) {
			inner = u
		}
		class = fmt.Sprintf("other(%s)", inner.Error())
	}
	if class == "other(negative offset)" || (class == "EINVAL" && strings.HasSuffix(err.Error(), "negative offset")) {
		// os says errors.New("negative offset"); DESIGN.md promises EINVAL
		// with the same message, so both sides render alike.
		class = "negative-offset"
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &le):
		return fmt.Sprintf("%s (*os.LinkError op=%s old=%s new=%s)", class, le.Op, rel(le.Old), rel(le.New))
	case errors.As(err, &pe):
		return fmt.Sprintf("%s (*fs.PathError op=%s path=%s)", class, pe.Op, rel(pe.Path))
	}
	return fmt.Sprintf("%s (%T)", class, err)
}

// ---- tree snapshots ----

// entry is what a walk sees of one name.
type entry struct {
	mode    fs.FileMode // type and permission bits
	content string      // file bytes or symlink target
}

func (e entry) String() string {
	switch {
	case e.mode&fs.ModeSymlink != 0:
		return fmt.Sprintf("%v -> %q", e.mode, e.content)
	case e.mode.IsRegular():
		return fmt.Sprintf("%v %q", e.mode, abbrev(e.content))
	}
	return e.mode.String()
}

func abbrev(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}

// walkTarget lists every entry under root as seen through fsys, keyed by
// slash path relative to root, using Lstat, Readdirnames, Readlink and reads.
func walkTarget(fsys target, root string) (map[string]entry, error) {
	out := map[string]entry{}
	var errs []error
	var walk func(rel string)
	walk = func(rel string) {
		p := root
		if rel != "" {
			p = root + "/" + rel
		}
		fi, _, err := fsys.LstatIfPossible(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("walk: lstat %s: %v", rel, err))
			return
		}
		e := entry{mode: fi.Mode() & (fs.ModeType | fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)}
		switch {
		case fi.IsDir():
			f, err := fsys.Open(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("walk: open dir %s: %v", rel, err))
				break
			}
			names, err := f.Readdirnames(-1)
			f.Close()
			if err != nil {
				errs = append(errs, fmt.Errorf("walk: readdirnames %s: %v", rel, err))
			}
			slices.Sort(names)
			for _, n := range names {
				walk(path2(rel, n))
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := fsys.ReadlinkIfPossible(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("walk: readlink %s: %v", rel, err))
			}
			// An absolute target into the tree (or beside it) names each
			// side's own: "$ROOT/..." and "$DIR/..." compare.
			e.content = unmapTarget(target, root)
		case fi.Mode().IsRegular():
			data, err := readAll(fsys, p)
			if err != nil {
				errs = append(errs, fmt.Errorf("walk: read %s: %v", rel, err))
			}
			e.content = string(data)
		}
		if rel == "" {
			rel = "." // the root's own mode is a change too, at "."
		}
		out[rel] = e
	}
	walk("")
	return out, errors.Join(errs...)
}

// unmapTarget renders a symlink target naming root or its parent
// absolutely as "$ROOT/..." or "$DIR/...", so that two copies' links
// compare.
func unmapTarget(target, root string) string {
	switch dir := filepath.Dir(root); {
	case target == root || strings.HasPrefix(target, root+"/"):
		return "$ROOT" + target[len(root):]
	case target == dir || strings.HasPrefix(target, dir+"/"):
		return "$DIR" + target[len(dir):]
	}
	return target
}

func path2(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func readAll(fsys afero.Fs, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// diffTrees reports every difference between want (os) and got (cowfs).
func diffTrees(want, got map[string]entry) []error {
	var errs []error
	for _, k := range sortedKeys(want, got) {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case !gok:
			errs = append(errs, fmt.Errorf("tree: %s: missing in cowfs, want %v", k, w))
		case !wok:
			errs = append(errs, fmt.Errorf("tree: %s: extra in cowfs: %v", k, g))
		case w != g:
			errs = append(errs, fmt.Errorf("tree: %s: want %v, got %v", k, w, g))
		}
	}
	return errs
}

func sortedKeys[V any](ms ...map[string]V) []string {
	var keys []string
	for _, m := range ms {
		for k := range m {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// ---- Changes oracle ----

// wantChanges computes, from two os trees, what Changes() must report:
// added, deleted, and modified (type, perm, content, symlink target) entries.
// Directory times and owners are not changes.
func wantChanges(before, after map[string]entry) []overlayfs.Change {
	var out []overlayfs.Change
	for _, k := range sortedKeys(before, after) {
		b, bok := before[k]
		a, aok := after[k]
		switch {
		case !bok:
			out = append(out, overlayfs.Change{Path: k, Kind: overlayfs.Added, Mode: a.mode})
		case !aok:
			out = append(out, overlayfs.Change{Path: k, Kind: overlayfs.Deleted, OldMode: b.mode})
		case a.mode.IsDir() && b.mode.IsDir() && a.mode == b.mode:
		case a != b:
			out = append(out, overlayfs.Change{Path: k, Kind: overlayfs.Modified, Mode: a.mode, OldMode: b.mode})
		}
	}
	return out
}

// checkChanges compares c.Changes() with the os oracle: the trees before
// (the original) and after (the os copy), as walkTarget lists them.
func checkChanges(c *overlayfs.Fs, before, after map[string]entry) []error {
	want := wantChanges(before, after)
	got := c.Changes()
	if !slices.IsSortedFunc(got, func(a, b overlayfs.Change) int { return strings.Compare(a.Path, b.Path) }) {
		return []error{fmt.Errorf("Changes() not sorted by Path: %v", fmtChanges(got))}
	}
	if fmtChanges(want) != fmtChanges(got) {
		return []error{fmt.Errorf("Changes():\n\twant %s\n\tgot  %s", fmtChanges(want), fmtChanges(got))}
	}
	return nil
}

func fmtChanges(cs []overlayfs.Change) string {
	var b bytes.Buffer
	b.WriteString("[")
	for i, c := range cs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s:%s(%v<-%v)", c.Kind, c.Path, c.Mode, c.OldMode)
	}
	b.WriteString("]")
	return b.String()
}

// ---- operations ----

// env is one side of a differential run.
type env struct {
	fs      target
	root    string // absolute root; op paths are joined to it verbatim
	cow     bool   // the side under test: also assert cowfs-only promises
	handles map[int]afero.File
	listed  map[afero.File]bool // handles listed before
	cwd     *string             // set: names are relative to root/cwd, the working directory
}

func newEnv(fsys target, root string, cow bool) *env {
	return &env{fs: fsys, root: root, cow: cow, handles: map[int]afero.File{}, listed: map[afero.File]bool{}}
}

// p joins rel to the root without cleaning, so "a/../b" and "a/" reach the
// file system as written; with a working directory set, rel is passed as
// it is, relative to it.
func (e *env) p(rel string) string {
	switch {
	case e.cwd != nil && rel == "":
		return "."
	case e.cwd != nil:
		return rel
	case rel == "":
		return e.root
	}
	return e.root + "/" + rel
}

// wd is the working directory of a side with one set.
func (e *env) wd() string {
	if *e.cwd == "" {
		return e.root
	}
	return e.root + "/" + *e.cwd
}

func (e *env) closeAll() {
	for _, f := range e.handles {
		f.Close()
	}
	clear(e.handles)
}

// op is one step of a scenario. run returns everything observable about the
// step's outcome, rendered so that both sides compare as strings.
type op struct {
	desc string
	run  func(e *env) string
}

func (e *env) res(err error, format string, args ...any) string {
	s := "err=" + describeErr(err, e.root)
	if format != "" {
		s += " " + fmt.Sprintf(format, args...)
	}
	return s
}

func (e *env) relName(name string) string {
	if name == e.root || strings.HasPrefix(name, e.root+"/") {
		return "$ROOT" + name[len(e.root):]
	}
	return name
}

// info renders what a FileInfo tells: name, type and perm, size for files and
// symlinks (a directory's size is file-system specific).
func info(fi fs.FileInfo) string {
	if fi == nil {
		return "info=nil"
	}
	s := fmt.Sprintf("name=%q mode=%v dir=%v", fi.Name(), fi.Mode(), fi.IsDir())
	if fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0 {
		s += fmt.Sprintf(" size=%d", fi.Size())
	}
	if k, ok := sysNlinkOf(fi); ok {
		s += fmt.Sprintf(" nlink=%d", k)
	}
	s += " mtime=" + timeClass(fi.ModTime()) + sysMtime(fi)
	return s
}

// randDirEpoch is the time randFixture gives every entry of the fixture
// (fixtureTime); a Chtimes of the generator sets one in 2001.
var randDirEpoch = fixtureTime

// timeClass renders a directory's modification time as the differential
// compares it: "fixture" while it is the fixture's, "moved" for one of
// the last hour (the clock's, which the two sides read at different
// instants), and the exact value otherwise (one Chtimes set).
func timeClass(t time.Time) string {
	switch {
	case t.Equal(randDirEpoch):
		return "fixture"
	case time.Since(t).Abs() < time.Hour:
		return "moved"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func flagString(flag int) string {
	var s []string
	switch flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		s = append(s, "O_RDONLY")
	case os.O_WRONLY:
		s = append(s, "O_WRONLY")
	case os.O_RDWR:
		s = append(s, "O_RDWR")
	default:
		s = append(s, "O_WRONLY|O_RDWR") // neither read nor write on Linux
	}
	rest := flag &^ (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	for _, f := range []struct {
		bit  int
		name string
	}{{os.O_CREATE, "O_CREATE"}, {os.O_EXCL, "O_EXCL"}, {os.O_TRUNC, "O_TRUNC"}, {os.O_APPEND, "O_APPEND"}} {
		if flag&f.bit != 0 {
			s = append(s, f.name)
			rest &^= f.bit
		}
	}
	if rest != 0 {
		s = append(s, fmt.Sprintf("%#x", rest)) // O_NOFOLLOW, O_DIRECTORY, ...
	}
	return strings.Join(s, "|")
}

const noHandle = "no handle"

func withHandle(desc string, slot int, fn func(e *env, f afero.File) string) op {
	return op{fmt.Sprintf("#%d.%s", slot, desc), func(e *env) string {
		f := e.handles[slot]
		if f == nil {
			return noHandle
		}
		return fn(e, f)
	}}
}

func openFile(slot int, rel string, flag int, perm fs.FileMode) op {
	return openFlags(slot, rel, flag, flagString(flag), perm)
}

// openFlags is OpenFile with its flags named by desc (for flags
// flagString does not render: O_DIRECTORY, O_NOFOLLOW, O_SYNC, ...).
func openFlags(slot int, rel string, flag int, desc string, perm fs.FileMode) op {
	return op{fmt.Sprintf("#%d=OpenFile(%q, %s, %#o)", slot, rel, desc, perm), func(e *env) string {
		f, err := e.fs.OpenFile(e.p(rel), flag, perm)
		if err != nil {
			return e.res(err, "")
		}
		if old := e.handles[slot]; old != nil {
			old.Close()
		}
		e.handles[slot] = f
		return e.res(err, "name=%s", e.relName(f.Name()))
	}}
}

func open(slot int, rel string) op {
	return op{fmt.Sprintf("#%d=Open(%q)", slot, rel), func(e *env) string {
		f, err := e.fs.Open(e.p(rel))
		if err != nil {
			return e.res(err, "")
		}
		if old := e.handles[slot]; old != nil {
			old.Close()
		}
		e.handles[slot] = f
		return e.res(err, "name=%s", e.relName(f.Name()))
	}}
}

func create(slot int, rel string) op {
	return op{fmt.Sprintf("#%d=Create(%q)", slot, rel), func(e *env) string {
		f, err := e.fs.Create(e.p(rel))
		if err != nil {
			return e.res(err, "")
		}
		if old := e.handles[slot]; old != nil {
			old.Close()
		}
		e.handles[slot] = f
		return e.res(err, "name=%s", e.relName(f.Name()))
	}}
}

func closeH(slot int) op {
	return withHandle("Close()", slot, func(e *env, f afero.File) string { return e.res(f.Close(), "") })
}

func read(slot, n int) op {
	return withHandle(fmt.Sprintf("Read(%d)", n), slot, func(e *env, f afero.File) string {
		buf := make([]byte, n)
		k, err := f.Read(buf)
		return e.res(e.dirReadErr(f, err), "n=%d data=%q", k, buf[:max(k, 0)])
	})
}

// dirReadErr: read(2) on a directory is EISDIR, except where a file system
// (ext4) leaves a listed directory's offset at its largest hash and the
// kernel's offset check says EINVAL first. os's EINVAL there is taken as
// EISDIR.
func (e *env) dirReadErr(f afero.File, err error) error {
	if errors.Is(err, syscall.EINVAL) {
		if fi, serr := f.Stat(); serr == nil && fi.IsDir() {
			return &fs.PathError{Op: "read", Path: f.Name(), Err: syscall.EISDIR}
		}
	}
	return err
}

func readAt(slot, n int, off int64) op {
	return withHandle(fmt.Sprintf("ReadAt(%d, %d)", n, off), slot, func(e *env, f afero.File) string {
		buf := make([]byte, n)
		k, err := f.ReadAt(buf, off)
		return e.res(err, "n=%d data=%q", k, buf[:max(k, 0)])
	})
}

func write(slot int, data string) op {
	return withHandle(fmt.Sprintf("Write(%q)", data), slot, func(e *env, f afero.File) string {
		k, err := f.Write([]byte(data))
		return e.res(err, "n=%d", k)
	})
}

func writeString(slot int, data string) op {
	return withHandle(fmt.Sprintf("WriteString(%q)", data), slot, func(e *env, f afero.File) string {
		k, err := f.WriteString(data)
		return e.res(err, "n=%d", k)
	})
}

func writeAt(slot int, data string, off int64) op {
	return withHandle(fmt.Sprintf("WriteAt(%q, %d)", data, off), slot, func(e *env, f afero.File) string {
		k, err := f.WriteAt([]byte(data), off)
		return e.res(err, "n=%d", k)
	})
}

func seek(slot int, off int64, whence int) op {
	return withHandle(fmt.Sprintf("Seek(%d, %d)", off, whence), slot, func(e *env, f afero.File) string {
		n, err := f.Seek(off, whence)
		if whence != io.SeekStart || off != 0 {
			if fi, serr := f.Stat(); serr == nil && fi.IsDir() {
				e.listed[f] = true // its listing offset is a cookie now: a listing rewinds first
				// A directory's offset after listing is a file system
				// cookie (ext4 hashes), so relative seeks are not comparable.
				return "directory seek relative to a file-system-specific offset"
			}
		}
		return e.res(err, "off=%d", n)
	})
}

func truncH(slot int, size int64) op {
	return withHandle(fmt.Sprintf("Truncate(%d)", size), slot, func(e *env, f afero.File) string {
		return e.res(f.Truncate(size), "")
	})
}

func syncH(slot int) op {
	return withHandle("Sync()", slot, func(e *env, f afero.File) string { return e.res(f.Sync(), "") })
}

func fstat(slot int) op {
	return withHandle("Stat()", slot, func(e *env, f afero.File) string {
		fi, err := f.Stat()
		return e.res(err, "%s", info(fi))
	})
}

// sortedNote is appended to a cowfs listing that is not in sorted order, so
// the mismatch shows against os (whose listing is compared sorted).
const sortedNote = " UNSORTED"

// listing loops list(n) until it returns an error or, for n <= 0, once; it
// renders the chunk sizes, the errors and the sorted set of names.
func listing(e *env, n int, list func(int) ([]string, error)) string {
	var sizes []string
	var all []string
	var errs []string
	for i := 0; i < 1000; i++ {
		names, err := list(n)
		sizes = append(sizes, strconv.Itoa(len(names)))
		all = append(all, names...)
		errs = append(errs, describeErr(err, e.root))
		if err != nil || n <= 0 {
			break
		}
	}
	// One more call after the end: n > 0 must keep saying io.EOF, n <= 0
	// must return nothing and nil.
	names, err := list(n)
	sizes = append(sizes, strconv.Itoa(len(names)))
	errs = append(errs, describeErr(err, e.root))
	note := ""
	if e.cow && !slices.IsSorted(all) {
		note = sortedNote
	}
	slices.Sort(all)
	return fmt.Sprintf("chunks=%v errs=%v names=%q%s", sizes, errs, all, note)
}

func readdir(slot, n int) op {
	return withHandle(fmt.Sprintf("Readdir(%d)...", n), slot, func(e *env, f afero.File) string {
		return listing(e, n, func(n int) ([]string, error) {
			fis, err := f.Readdir(n)
			var out []string
			for _, fi := range fis {
				out = append(out, info(fi))
			}
			return out, err
		})
	})
}

// listCall is the listing op of handle slot named by kind: "Readdir",
// "Readdirnames" or "ReadDir".
func listCall(kind string, slot, n int) op {
	switch kind {
	case "Readdir":
		return readdir(slot, n)
	case "Readdirnames":
		return readdirnames(slot, n)
	default:
		return readDirH(slot, n)
	}
}

func readdirnames(slot, n int) op {
	return withHandle(fmt.Sprintf("Readdirnames(%d)...", n), slot, func(e *env, f afero.File) string {
		return listing(e, n, f.Readdirnames)
	})
}

func readDirH(slot, n int) op {
	return withHandle(fmt.Sprintf("ReadDir(%d)...", n), slot, func(e *env, f afero.File) string {
		rd, ok := f.(fs.ReadDirFile)
		if !ok {
			return fmt.Sprintf("%T has no ReadDir method", f)
		}
		return listing(e, n, func(n int) ([]string, error) {
			des, err := rd.ReadDir(n)
			var out []string
			for _, de := range des {
				fi, ierr := de.Info()
				out = append(out, fmt.Sprintf("%s type=%v info={%s} %s", de.Name(), de.Type(), info(fi), errClass(ierr)))
			}
			return out, err
		})
	})
}

func mkdir(rel string, perm fs.FileMode) op {
	return op{fmt.Sprintf("Mkdir(%q, %#o)", rel, perm), func(e *env) string { return e.res(e.fs.Mkdir(e.p(rel), perm), "") }}
}

func mkdirAll(rel string, perm fs.FileMode) op {
	return op{fmt.Sprintf("MkdirAll(%q, %#o)", rel, perm), func(e *env) string { return e.res(e.fs.MkdirAll(e.p(rel), perm), "") }}
}

func remove(rel string) op {
	return op{fmt.Sprintf("Remove(%q)", rel), func(e *env) string { return e.res(e.fs.Remove(e.p(rel)), "") }}
}

func removeAll(rel string) op {
	return op{fmt.Sprintf("RemoveAll(%q)", rel), func(e *env) string { return e.res(e.fs.RemoveAll(e.p(rel)), "") }}
}

func rename(from, to string) op {
	return op{fmt.Sprintf("Rename(%q, %q)", from, to), func(e *env) string { return e.res(e.fs.Rename(e.p(from), e.p(to)), "") }}
}

func chmod(rel string, mode fs.FileMode) op {
	return op{fmt.Sprintf("Chmod(%q, %v)", rel, mode), func(e *env) string { return e.res(e.fs.Chmod(e.p(rel), mode), "") }}
}

func chown(rel string, uid, gid int) op {
	return op{fmt.Sprintf("Chown(%q, %d, %d)", rel, uid, gid), func(e *env) string {
		return e.res(e.fs.Chown(e.p(rel), uid, gid), "")
	}}
}

func chtimes(rel string, mtime time.Time) op {
	return op{fmt.Sprintf("Chtimes(%q, %v)", rel, mtime), func(e *env) string {
		return e.res(e.fs.Chtimes(e.p(rel), mtime, mtime), "")
	}}
}

// chtimesPair is Chtimes with its two times apart; a zero one is left
// unchanged (UTIME_OMIT), and two zero ones look no name up on Linux.
func chtimesPair(rel string, atime, mtime time.Time) op {
	return op{fmt.Sprintf("Chtimes(%q, %v, %v)", rel, atime, mtime), func(e *env) string {
		return e.res(e.fs.Chtimes(e.p(rel), atime, mtime), "")
	}}
}

// mtime compares modification times: only meaningful after Chtimes.
func mtime(rel string) op {
	return op{fmt.Sprintf("Stat(%q).ModTime()", rel), func(e *env) string {
		fi, err := e.fs.Stat(e.p(rel))
		if err != nil {
			return e.res(err, "")
		}
		return e.res(err, "mtime=%s", fi.ModTime().UTC().Format(time.RFC3339Nano))
	}}
}

// owner renders the uid and gid Lstat reports through Sys().
func owner(rel string) op {
	return op{fmt.Sprintf("Lstat(%q).Sys() owner", rel), func(e *env) string {
		fi, _, err := e.fs.LstatIfPossible(e.p(rel))
		if err != nil {
			return e.res(err, "")
		}
		uid, gid, ok := sysOwner(fi)
		if !ok {
			return e.res(err, "Sys()=%T", fi.Sys())
		}
		return e.res(err, "uid=%d gid=%d", uid, gid)
	}}
}

func symlink(target, rel string) op {
	return op{fmt.Sprintf("Symlink(%q, %q)", target, rel), func(e *env) string {
		return e.res(e.fs.SymlinkIfPossible(target, e.p(rel)), "")
	}}
}

func readlink(rel string) op {
	return op{fmt.Sprintf("Readlink(%q)", rel), func(e *env) string {
		s, err := e.fs.ReadlinkIfPossible(e.p(rel))
		return e.res(err, "target=%q", s)
	}}
}

func lstat(rel string) op {
	return op{fmt.Sprintf("Lstat(%q)", rel), func(e *env) string {
		fi, _, err := e.fs.LstatIfPossible(e.p(rel))
		return e.res(err, "%s", info(fi))
	}}
}

func stat(rel string) op {
	return op{fmt.Sprintf("Stat(%q)", rel), func(e *env) string {
		fi, err := e.fs.Stat(e.p(rel))
		return e.res(err, "%s", info(fi))
	}}
}

// readFile opens rel read-only and reads it to the end.
func readFile(rel string) op {
	return op{fmt.Sprintf("ReadFile(%q)", rel), func(e *env) string {
		f, err := e.fs.Open(e.p(rel))
		if err != nil {
			return e.res(err, "")
		}
		defer f.Close()
		data, err := io.ReadAll(f)
		return e.res(err, "data=%q", data)
	}}
}

// writeFile does what os.WriteFile does, with the target's own calls.
func writeFile(rel, data string, perm fs.FileMode) op {
	return op{fmt.Sprintf("WriteFile(%q, %q, %#o)", rel, abbrev(data), perm), func(e *env) string {
		f, err := e.fs.OpenFile(e.p(rel), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
		if err != nil {
			return e.res(err, "")
		}
		_, werr := f.Write([]byte(data))
		cerr := f.Close()
		return e.res(werr, "close=%s", describeErr(cerr, e.root))
	}}
}

// runOps runs ops on both sides and reports every step whose outcome differs.
func runOps(ops []op, want, got *env) []error {
	var errs []error
	cascade := false
	for i, o := range ops {
		w := o.run(want)
		g := o.run(got)
		if w == g {
			continue
		}
		if w == noHandle || g == noHandle {
			// A handle exists on one side only: one line says so.
			if cascade {
				continue
			}
			cascade = true
		}
		errs = append(errs, fmt.Errorf("op %d %s:\n\twant %s\n\tgot  %s", i, o.desc, w, g))
	}
	return errs
}

// differential runs ops on os over a fresh copy of orig and on cowfs over orig
// itself, then compares each step, the final trees and Changes().
func differential(t testing.TB, orig string, ops []op, opts ...overlayfs.Option) []error {
	t.Helper()
	view, err := walkTarget(osTarget{}, orig)
	if err != nil {
		t.Fatalf("walking the original: %v", err)
	}
	return differentialView(t, orig, view, ops, opts...)
}

// differentialView is differential with the original's walk done once by
// the caller (the original never changes).
func differentialView(t testing.TB, orig string, origView map[string]entry, ops []op, opts ...overlayfs.Option) []error {
	t.Helper()
	copyDir := osCopy(t, orig)
	c := newCow(t, orig, opts...)
	return compareRun(t, ops, origView, copyDir, c, newEnv(osTarget{}, copyDir, false), newEnv(c, c.Root(), true))
}

// compareRun runs ops on want (os over copyDir) and got (c), then compares
// the final trees and c.Changes() with the os oracle.
func compareRun(t testing.TB, ops []op, origView map[string]entry, copyDir string, c *overlayfs.Fs, want, got *env) []error {
	t.Helper()
	errs := runOps(ops, want, got)
	want.closeAll()
	got.closeAll()
	wantTree, err := walkTarget(osTarget{}, copyDir)
	if err != nil {
		t.Fatalf("walking the os copy: %v", err)
	}
	gotTree, err := walkTarget(c, c.Root())
	if err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, diffTrees(wantTree, gotTree)...)
	errs = append(errs, checkChanges(c, origView, wantTree)...)
	return errs
}

func isSorted(s []string) bool { return slices.IsSorted(s) }

func sortStrings(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
