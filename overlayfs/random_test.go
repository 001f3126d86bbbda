//go:build linux

package overlayfs_test

// The random differential: seeded sequences of 60–100 operations run on
// cowfs and on os over a copy, compared step by step, then the final trees,
// the trees beside the roots, and Changes().
//
// What a sequence holds: decorated names ("x/", "x/.", "x//", "a//b",
// "./x", "d/../x", "nope/../x", "ld/../x"); up to three handles at once
// (append-only ones on lower files among them; opened with O_NOFOLLOW,
// O_DIRECTORY or the access mode O_WRONLY|O_RDWR now and then),
// interleaved with path operations and used after Close; stretches run
// after os.Chdir into the root or one of its directories, with names
// relative to it; Chmod to setgid, sticky and 0 modes followed by creates
// inside; symlink chains, self-loops and ".." links (some lead out of the
// root: writes outside are allowed, and each side has its own outside tree
// to write to); FIFOs, sockets and hard links in the fixture; io.Copy (also io.CopyN,
// ReadFrom of a LimitReader, of a handle, and into a buffer: os's
// copy_file_range path, into closed, read-only and directory handles),
// ReadFrom and WriteString; seeks past the end then writes (holes); Lstat; Chtimes then
// Stat, and Chtimes with zero times (left unchanged) or times far from now;
// hard links (random_classes_test.go) of lower files, links made before,
// directories, symlinks, FIFOs and names outside, then writes through one
// name read through the other (and through a handle opened before),
// renames of one name over the other, Chmod and Chtimes through one name,
// removal of one; symlinks with absolute targets into the root and beside
// it (each side's own: "$ROOT", "$DIR"), "", "a//b", "d/.", "d/..", targets
// of PATH_MAX and NAME_MAX, and one to "/" read through and removed in the
// same step; every FileInfo's modification time (its class: the
// fixture's, moved, or the exact value a Chtimes set), per step and, for
// directories, over the final trees; names through bind mounts of the root ("../alias/...") and of
// one of its directories ("../dalias/...", and a link "toalias" in the
// root leading to it), on both sides: os writes through them into its
// copy, the overlay into its layer (the real root must not change);
// TestRandomAliasNames checks in os that they name what they should.
//
// What is not compared, because it differs between Linux file systems
// (the generator is validated os against os on the disk's file system and
// on a tmpfs, TestRandomOracleSelfCheck):
//   - seeks on directories other than to 0 (offsets are file system cookies);
//   - directory sizes;
//   - listing order (listings are compared sorted);
//   - whether entries added during paging appear: a handle lists a
//     directory to its end in one step and a later listing rewinds first.
//
// And what is outside the overlay's contract, so never generated (or not
// compared): the root's own entry listed from its parent outside the
// root (the disk's, not the layer's); a rename between the root and
// outside it (the overlay is a file system of its own: EXDEV, as across
// mount points); an outside RemoveAll or Rename of a directory holding
// the root (os would destroy the real root: the overlay alone runs it and
// must fail, changing nothing, which the next steps compare); a
// copy of a file into itself (never ends when it appends); a
// working directory that was renamed or removed (a process's working
// directory is an inode, the overlay names it by path: when the os side's
// working directory is no longer the original directory, both sides go
// back to absolute names); opening a FIFO (os blocks); what the kernel
// does because an alias is a mount point, which the overlay, treating the
// alias as the directory it shows, does not model: a rename between two
// mounts (EXDEV in os), a Remove, RemoveAll or Rename of an alias's mount
// point itself (EBUSY in os), and names through the alias of root/al once
// os removed root/al (the mount holds the deleted directory; the overlay's
// alias names the path).
//
// COWFS_DIFF_SEQS sets the number of sequences (default 60, and 1,000
// with COWFS_LONG=1; 10 and 100 for the generator's self-check) and COWFS_DIFF_SEED the first seed (default 1);
// COWFS_DIFF_TRACE=1 prints every step. go test (and so .ci/run) runs the
// default slice; a long run: COWFS_DIFF_SEQS=10000 go test -run
// TestRandomDifferential -timeout 1h ./overlayfs. Not parallel: it changes
// the process's working directory.

import (
	"errors"
	"fmt"
	"github.com/cowfs/cowfs/internal/longtest"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"

	"github.com/cowfs/cowfs/overlayfs"
)

// randFixture builds the tree of the random differential under dir/root,
// with dir/outside.txt and dir/outdir beside it.
func randFixture(t testing.TB, dir string) string {
	t.Helper()
	root := filepath.Join(dir, "root")
	files := map[string]string{
		"a": "alpha\n", "b": "bravo", "x": "#!/bin/sh\n", "p": "private", "ro": "read only\n",
		"d/b": "d bravo\n", "d/c": "charlie", "g/h": "golf hotel\n", "dir/sub/s": "sierra",
		"sg/f": "in setgid\n", "al/f": "foxtrot\n", "al/sub/g": "golf",
	}
	dirs := []string{"d/e", "empty", "dir/sub", "g", "sg", "st"}
	links := [][2]string{
		{"l", "a"}, {"ld", "d"}, {"m", "missing"}, {"self", "self"}, {"c1", "c2"}, {"c2", "a"},
		{"d/up", ".."}, {"dl", "d/"}, {"out", "../outdir"}, {"outf", "../outside.txt"}, {"lp", "pipe"},
		{"dir/sub/top", "../.."}, {"loop1", "loop2"}, {"loop2", "loop1"}, {"toalias", "../dalias"}, {"al/up", ".."},
	}
	modes := map[string]fs.FileMode{"x": 0o755, "p": 0o600, "ro": 0o444, "sg": 0o2775, "st": 0o1777, "g": 0o700}
	must := func(err error) {
		if err != nil {
			t.Helper()
			t.Fatal(err)
		}
	}
	for _, d := range append([]string{""}, dirs...) {
		must(os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	for p, data := range files {
		must(os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		must(os.WriteFile(filepath.Join(root, p), []byte(data), 0o644))
	}
	for _, l := range links {
		must(os.Symlink(l[1], filepath.Join(root, l[0])))
	}
	// big's long names fill more than one 4 KiB directory block (ext4) or
	// 4 KiB of directory size (btrfs): lookups that miss there are answered
	// by lstat until the overlay lists it (see lookup.go).
	must(os.MkdirAll(filepath.Join(root, "big"), 0o755))
	for i := range randBigFiles {
		must(os.WriteFile(filepath.Join(root, randBigName(i)), nil, 0o644))
	}
	// Lower hard links: files with two names, in one directory and across two.
	must(os.Link(filepath.Join(root, "b"), filepath.Join(root, "hb")))
	must(os.Link(filepath.Join(root, "d/c"), filepath.Join(root, "dir/hc")))
	must(unix.Mkfifo(filepath.Join(root, "pipe"), 0o644))
	must(unix.Mknod(filepath.Join(root, "sock"), unix.S_IFSOCK|0o755, 0))
	must(unix.Mkfifo(filepath.Join(root, "d/pipe"), 0o600))
	must(filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		m, ok := modes[filepath.ToSlash(rel)]
		switch {
		case ok:
		case d.IsDir():
			m = 0o755
		case d.Type() == 0:
			m = 0o644
		default:
			return nil
		}
		return os.Chmod(p, m&fs.ModePerm|m&(fs.ModeSetgid|fs.ModeSticky))
	}))
	must(os.Chmod(filepath.Join(root, "sg"), 0o775|fs.ModeSetgid))
	must(os.Chmod(filepath.Join(root, "st"), 0o777|fs.ModeSticky))
	must(os.WriteFile(filepath.Join(dir, "outside.txt"), []byte("outside\n"), 0o644))
	must(os.MkdirAll(filepath.Join(dir, "outdir"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "outdir/o"), []byte("o"), 0o644))
	must(setTimes(dir))
	return root
}

// randDirs are the fixture's directories a sequence may Chdir into.
var randDirs = []string{"", "d", "d/e", "dir", "dir/sub", "g", "sg", "st", "empty", "big"}

// randBigFiles is the number of files in the fixture's big directory.
const randBigFiles = 60

// randBigName is the name of the i-th file in the big directory.
func randBigName(i int) string {
	return fmt.Sprintf("big/file-%03d-%s", i, strings.Repeat("x", 56))
}

// randBase are the names sequences work on, root-relative: fixture entries
// of every kind and new names.
var randBase = []string{
	"a", "b", "x", "p", "ro", "d", "d/b", "d/c", "d/e", "d/e/f", "d/up", "d/pipe", "g", "g/h", "empty",
	"empty/n", "dir", "dir/sub", "dir/sub/s", "dir/sub/top", "sg", "sg/f", "sg/new", "st", "st/new",
	"l", "ld", "ld/b", "m", "self", "c1", "c2", "dl", "out", "out/o", "outf", "pipe", "sock", "lp",
	"loop1", "new", "n", "n/f", "newdir", "newdir/f", "up/outside.txt", "d/up/a", "nope",
	"big", randBigName(7), randBigName(randBigFiles - 1), "big/new", "big/n2", "big/n3", "big/n4", "big/n5",
	// Through the bind mounts randAliases makes beside the root; "al"
	// itself is never named, so that no sequence removes or moves it (see
	// randAliases).
	"../alias/a", "../alias/d/c", "../alias/new", "../alias/ld/b", "../alias/d", "../dalias/f",
	"../dalias/sub/g", "../dalias/new", "../dalias/up/a", "../dalias/sub", "toalias/f", "toalias/new",
	"al/f", "al/new", "al/sub/g", "al/up/a",
	// Hard links the generator makes (randLinkNames), and the fixture's.
	"h1", "d/h3", "sg/h4", "hb", "dir/hc",
	// New names outside, through the link out of the root.
	"out/new", "out/new/x",
}

// randLinkNames are new names for hard links: a link's new name is one of
// these two times in three.
var randLinkNames = []string{"h1", "h2", "d/h3", "sg/h4", "big/h5", "dir/sub/h6", "st/h7", "g/h8"}

// randAliases bind-mounts root at dir/alias and root/al at dir/dalias
// (dir holds root), as the generator's names expect, and returns what
// undoes it. Where mounting is not allowed it makes nothing (those names
// then fail alike on both sides) and returns the reason. No generated name
// removes or moves root/al by its own name: a bind mount holds on to its
// directory where the overlay's alias names a path (see the package
// documentation), so after that the two part. (A RemoveAll of "x/.." in
// the root still empties the root, al with it: randRun stops comparing
// names through dalias then.)
func randAliases(dir, root string) (undo func(), err error) {
	if filepath.Dir(root) != dir {
		return func() {}, fmt.Errorf("randAliases: %s is not in %s", root, dir)
	}
	return bindBeside(root, map[string]string{"alias": "", "dalias": "al"})
}

// bindBeside bind-mounts, for each name and root-relative source in m,
// root/source at a new directory name beside root, and returns what undoes
// it; on an error nothing is left mounted.
func bindBeside(root string, m map[string]string) (undo func(), err error) {
	var done []string
	undo = func() {
		for _, at := range done {
			unix.Unmount(at, unix.MNT_DETACH)
			os.Remove(at)
		}
		done = nil
	}
	for name, src := range m {
		at := filepath.Join(filepath.Dir(root), name)
		if err := os.Mkdir(at, 0o755); err != nil {
			undo()
			return func() {}, err
		}
		if err := unix.Mount(filepath.Join(root, src), at, "", unix.MS_BIND, ""); err != nil {
			os.Remove(at)
			undo()
			return func() {}, err
		}
		done = append(done, at)
	}
	return undo, nil
}

// randAbove are names of directories that hold the root, reached through
// links out of it and "..": an outside RemoveAll or Rename of one must be
// refused, where os would remove or move the real root.
var randAbove = []string{"out/..", "out/../", "..", "../", "d/up/..", "dir/sub/top/.."}

// randTargets are symlink targets: relative ones only, so both sides'
// links read the same; some leave the root.
var randTargets = []string{"a", "d", "d/", "..", "../outside.txt", "missing", "self", "new", "c1", "d/b", "up", ".", "sg", "../root/a", "./a"}

// randLowerFiles are the fixture's regular files: an append-only handle on
// one appends to content still on the lower.
var randLowerFiles = []string{"a", "b", "x", "p", "ro", "d/b", "d/c", "g/h", "dir/sub/s", "sg/f", "hb", "dir/hc"}

var randData = []string{"", "Z", "hello", "0123456789abcdefghij", "alpha\n", "\x00\x01"}

var randPerms = []fs.FileMode{0o644, 0o600, 0o755, 0o700, 0o444, 0, 0o777, 0o755 | fs.ModeSetgid, 0o775 | fs.ModeSetgid, 0o777 | fs.ModeSticky, 0o755 | fs.ModeSetuid, 0o1700, 0o2700}

// randGen generates one sequence. cwd is the directory names are relative
// to ("" with rel=false: absolute names).
type randGen struct {
	r     *rand.Rand
	rel   bool
	cwd   string
	opens string // the name the last op opens; for a Chdir, "\x00" and the directory
}

// opening records that the op being made opens name.
func (g *randGen) opening(name string) string {
	g.opens = name
	return name
}

func (g *randGen) pick(s []string) string { return s[g.r.IntN(len(s))] }

// name returns a name for the current mode: root-relative for absolute
// mode (joined to the root by env.p), or relative to the working
// directory, decorated now and then.
func (g *randGen) name() string { return g.nameOf(g.pick(randBase)) }

// nameOrAbove is name, or one time in eight a directory holding the root.
func (g *randGen) nameOrAbove() string {
	if g.r.IntN(8) == 0 {
		return g.pick(randAbove)
	}
	return g.name()
}

// nameOf returns n, root-relative, as name does.
func (g *randGen) nameOf(n string) string {
	if g.rel && g.r.IntN(3) > 0 {
		// Reach it from the working directory.
		up := strings.Repeat("../", strings.Count(g.cwd, "/")+1)
		if g.cwd == "" {
			up = ""
		}
		n = up + n
	}
	switch g.r.IntN(14) {
	case 0:
		n += "/"
	case 1:
		n += "/."
	case 2:
		n += "//"
	case 3:
		n = "./" + n
	case 4:
		n = "d/../" + n
	case 5:
		n = "nope/../" + n
	case 6:
		n = "ld/../" + n
	case 7:
		n = strings.Replace(n, "/", "//", 1)
	case 8:
		n += "/.."
	}
	return n
}

// linkOld is the old name of a hard link: a lower file, a link made
// before, or any name.
func (g *randGen) linkOld() string {
	switch g.r.IntN(4) {
	case 0:
		return g.name()
	case 1:
		return g.nameOf(g.pick(randLinkNames))
	}
	return g.nameOf(g.pick(randLowerFiles))
}

// linkNew is the new name of a hard link: mostly a free one.
func (g *randGen) linkNew() string {
	if g.r.IntN(3) == 0 {
		return g.name()
	}
	return g.nameOf(g.pick(randLinkNames))
}

func (g *randGen) slot() int { return g.r.IntN(3) }

func (g *randGen) flag() int {
	f := []int{rdonly, wronly, rdwr}[g.r.IntN(3)]
	if g.r.IntN(12) == 0 {
		f = wronly | rdwr // neither read nor write, on Linux
	}
	for _, bit := range []int{creat, excl, trunc, appnd} {
		if g.r.IntN(3) == 0 {
			f |= bit
		}
	}
	// O_NOFOLLOW and O_DIRECTORY now and then (they found divergences).
	for _, bit := range []int{syscall.O_NOFOLLOW, syscall.O_DIRECTORY} {
		if g.r.IntN(10) == 0 {
			f |= bit
		}
	}
	return f
}

// op returns the next operation and, for one that opens a name, the name.
func (g *randGen) op() (op, string) {
	o := g.op1()
	return o, g.opens
}

func (g *randGen) op1() op {
	g.opens = ""
	switch g.r.IntN(55) {
	case 0, 1, 2:
		return openFile(g.slot(), g.opening(g.name()), g.flag(), g.pick2(randPerms))
	case 3:
		return open(g.slot(), g.opening(g.name()))
	case 4:
		return create(g.slot(), g.opening(g.name()))
	case 5:
		return closeH(g.slot())
	case 6:
		return read(g.slot(), g.r.IntN(24))
	case 7:
		return readAt(g.slot(), g.r.IntN(24), int64(g.r.IntN(40)-2))
	case 8, 9:
		return write(g.slot(), g.pick(randData))
	case 10:
		return writeString(g.slot(), g.pick(randData))
	case 11:
		return writeAt(g.slot(), g.pick(randData), int64(g.r.IntN(40)-2))
	case 12, 13:
		return seek(g.slot(), int64(g.r.IntN(60)-4), g.r.IntN(3))
	case 14:
		return truncH(g.slot(), int64(g.r.IntN(40)-2))
	case 15:
		return fstat(g.slot())
	case 16:
		return listOp(g.slot(), g.r.IntN(3), g.r.IntN(4)-1)
	case 17:
		dst, src := g.slot(), g.slot()
		g.opens = fmt.Sprintf("\x03%d%d", dst, src)
		return copyOpKind(dst, src, g.r.IntN(5), int64(g.r.IntN(6)))
	case 18:
		return readFromOp(g.slot(), g.pick(randData))
	case 19:
		return syncH(g.slot())
	case 20, 21:
		return mkdir(g.name(), g.pick2(randPerms))
	case 22:
		return mkdirAll(g.name(), g.pick2(randPerms))
	case 23, 24:
		return remove(g.name())
	case 25:
		// os.RemoveAll opens the parent of a name it cannot remove.
		n := g.nameOrAbove()
		g.opens = "\x02" + n
		return removeAll(n)
	case 26, 27:
		from, to := g.nameOrAbove(), g.name()
		g.opens = "\x01" + from + "\x00" + to
		return rename(from, to)
	case 28, 29:
		return chmod(g.name(), g.pick2(randPerms))
	case 30:
		return chownOp(g.name(), g.r.IntN(3)-1, g.r.IntN(3)-1)
	case 31:
		t := time.Unix(int64(1e9+g.r.IntN(1e6)), int64(g.r.IntN(1e9)))
		switch g.r.IntN(4) {
		case 0: // both zero: nothing to change, no name looked up (Linux)
			return chtimesPair(g.name(), time.Time{}, time.Time{})
		case 1: // the mtime left as it is: not read back (a new file's is the clock's)
			return chtimesPair(g.name(), t, time.Time{})
		}
		return chtimesStat(g.name(), t)
	case 32, 33:
		return symlink(g.pick(randTargets), g.name())
	case 34:
		return readlinkMapped(g.name())
	case 35, 36:
		return lstat(g.name())
	case 37, 38:
		return stat(g.name())
	case 39:
		return readFile(g.opening(g.name()))
	case 40:
		return writeFile(g.opening(g.name()), g.pick(randData), g.pick2(randPerms))
	case 41:
		return owner(g.name())
	case 42:
		d := g.pick(randDirs)
		g.rel, g.cwd = true, d
		g.opens = "\x00" + d
		return chdirOp(d)
	case 44:
		// Appends to a lower file, the first perhaps before any read.
		f := []int{wronly | appnd, wronly | appnd, rdwr | appnd, wronly}[g.r.IntN(4)]
		return openFile(g.slot(), g.opening(g.nameOf(g.pick(randLowerFiles))), f, 0o644)
	case 43, 46:
		// A hard link of any name to any other: a lower file, a
		// directory (EPERM), a symlink (not followed), over an entry
		// (EEXIST), outside.
		from, to := g.linkOld(), g.linkNew()
		g.opens = "\x04" + from + "\x00" + to
		return hardLink(from, to)
	case 47:
		// A link, then a write through one name read through the other.
		from, to := g.linkOld(), g.linkNew()
		g.opens = "\x04" + from + "\x00" + to
		return linkWriteRead(from, to, g.pick(randData))
	case 51:
		from, to := g.linkOld(), g.linkNew()
		g.opens = "\x04" + from + "\x00" + to
		if g.r.IntN(2) == 0 {
			return linkRename(from, to, g.r.IntN(2) == 0)
		}
		return linkMeta(from, to, g.pick2(randPerms), time.Unix(int64(1e9+g.r.IntN(1e6)), int64(g.r.IntN(1e9))))
	case 53:
		// Times far from now: before 1970, the epoch, 2038 and after,
		// to the nanosecond, on any name (directories too).
		t := g.pick([]string{"-1e9+123", "0", "2^31", "2^31-1ns", "2^33+7", "1e9+999999999"})
		tm := map[string]time.Time{"-1e9+123": time.Unix(-1e9, 123), "0": time.Unix(0, 0), "2^31": time.Unix(1<<31, 0),
			"2^31-1ns": time.Unix(1<<31-1, 999999999), "2^33+7": time.Unix(1<<33, 7), "1e9+999999999": time.Unix(1e9, 999999999)}[t]
		if g.r.IntN(2) == 0 {
			return chtimesStat(g.name(), tm)
		}
		n := g.name()
		c, d := chtimesPair(n, time.Unix(1e9, 1), tm), dirTime(n)
		return op{c.desc + "; " + d.desc, func(e *env) string { return c.run(e) + "; " + d.run(e) }}
	case 52:
		from, to := g.linkOld(), g.linkNew()
		g.opens = "\x04" + from + "\x00" + to
		return handleLink(g.slot(), from, to, g.r.IntN(2) == 0, g.r.IntN(2) == 0, g.pick(randData))
	case 48:
		return symlinkMapped(g.pick(randAbsTargets), g.name())
	case 49:
		if g.r.IntN(2) == 0 {
			return dirTime(g.nameOf(g.pick(randDirs)))
		}
		return dirTime(g.name())
	case 50:
		return rootLinkProbe("/", "rootlink", g.pick([]string{"tmp", "proc", "nope", "etc/passwd", "."}))
	default:
		g.rel, g.cwd = false, ""
		return chdirOp("-")
	}
}

func (g *randGen) pick2(s []fs.FileMode) fs.FileMode { return s[g.r.IntN(len(s))] }

// randOps returns the sequence of a seed, 60 to 100 operations, and for
// each the name it opens, if any.
func randOps(seed uint64) ([]op, []string) {
	return randOpsFrom(rand.New(rand.NewPCG(seed, 12)))
}

// randOpsFrom draws a sequence of 60 to 100 operations from r.
// fuzzRandom runs the random differential on a sequence drawn from data.
func fuzzRandom(t *testing.T, data []byte) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	rops, notes := randOpsFrom(lcFuzzRand(data))
	base := t.TempDir()
	if err := errors.Join(randCompare(t, base, base, "fuzz", rops, notes, false)...); err != nil {
		t.Errorf("random differential:\n%v", err)
	}
}

func randOpsFrom(r *rand.Rand) ([]op, []string) {
	g := &randGen{r: r}
	n := 60 + r.IntN(41)
	ops, opens := make([]op, n), make([]string, n)
	for i := range ops {
		ops[i], opens[i] = g.op()
	}
	return ops, opens
}

// chdirOp makes later names relative to dir (root-relative), after
// os.Chdir into it; "-" goes back to absolute names.
func chdirOp(dir string) op {
	if dir == "-" {
		return op{"absolute names", func(e *env) string { e.cwd = nil; return "" }}
	}
	return op{fmt.Sprintf("Chdir(%q)", dir), func(e *env) string {
		e.cwd = &dir
		return e.res(os.Chdir(e.wd()), "")
	}}
}

// listOp lists a directory handle to its end with one of the three listing
// calls in chunks of n; a handle listed before is rewound first.
func listOp(slot, how, n int) op {
	inner := []func(int, int) op{readdirnames, readdir, readDirH}[how](slot, n)
	return withHandle("rewound "+strings.TrimPrefix(inner.desc, fmt.Sprintf("#%d.", slot)), slot, func(e *env, f afero.File) string {
		if e.listed[f] {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return e.res(err, "rewind")
			}
		}
		e.listed[f] = true
		if fi, err := f.Stat(); err == nil {
			if pfi, err := os.Stat(filepath.Dir(e.root)); err == nil && sameInode(fi, pfi) {
				// The root's own entry, listed from outside, shows the disk.
				return "listing of the root's parent: not compared"
			}
		}
		return inner.run(e)
	})
}

// copyOp is io.Copy(#dst, #src).
func copyOp(dst, src int) op {
	return op{fmt.Sprintf("io.Copy(#%d, #%d)", dst, src), func(e *env) string {
		d, s := e.handles[dst], e.handles[src]
		if d == nil || s == nil {
			return noHandle
		}
		n, err := io.Copy(d, s)
		return e.res(e.dirReadErr(s, err), "n=%d", n)
	}}
}

// copyOpKind is a copy from #src into #dst the way kind says: io.Copy,
// io.CopyN(n), #dst.ReadFrom(io.LimitReader(#src, n)) (n may be 0: os
// copies and reads nothing), io.Copy into a buffer (#src's WriteTo), or
// #dst.ReadFrom(#src) itself. Each reaches os's copy_file_range path,
// which checks both handles (closed, directory, read-only) before
// reading a byte.
func copyOpKind(dst, src, kind int, n int64) op {
	if kind == 0 {
		return copyOp(dst, src)
	}
	desc := []string{"", "io.CopyN(#%d, #%d, %d)", "#%d.ReadFrom(io.LimitReader(#%d, %d))", "io.Copy(buffer #%d, #%d)", "#%d.ReadFrom(#%d)"}[kind]
	if kind >= 3 {
		desc = fmt.Sprintf(desc, dst, src)
	} else {
		desc = fmt.Sprintf(desc, dst, src, n)
	}
	return op{desc, func(e *env) string {
		d, s := e.handles[dst], e.handles[src]
		if d == nil || s == nil {
			return noHandle
		}
		var (
			k    int64
			err  error
			left int64 = -1
			buf  strings.Builder
		)
		switch kind {
		case 1:
			k, err = io.CopyN(d, s, n)
		case 2:
			lr := &io.LimitedReader{R: s, N: n}
			k, err = d.(io.ReaderFrom).ReadFrom(lr)
			left = lr.N
		case 3:
			k, err = io.Copy(&buf, s)
		case 4:
			k, err = d.(io.ReaderFrom).ReadFrom(s)
		}
		return e.res(e.dirReadErr(s, err), "n=%d left=%d copied=%q", k, left, buf.String())
	}}
}

// readFromOp is #slot.ReadFrom(strings.NewReader(data)).
func readFromOp(slot int, data string) op {
	return withHandle(fmt.Sprintf("ReadFrom(%q)", data), slot, func(e *env, f afero.File) string {
		rf, ok := f.(io.ReaderFrom)
		if !ok {
			return fmt.Sprintf("%T has no ReadFrom method", f)
		}
		r := strings.NewReader(data)
		n, err := rf.ReadFrom(r)
		return e.res(err, "n=%d unread=%d", n, r.Len())
	})
}

func chownOp(rel string, uid, gid int) op {
	o := chown(rel, uid, gid)
	return op{o.desc, func(e *env) string {
		s := o.run(e)
		return s + " " + owner(rel).run(e)
	}}
}

// chtimesStat sets the times of rel and reads the modification time back.
func chtimesStat(rel string, mt time.Time) op {
	c, m := chtimes(rel, mt), mtime(rel)
	return op{c.desc + "; " + m.desc, func(e *env) string { return c.run(e) + "; " + m.run(e) }}
}

// randSide is one side of a random run: its parent dir, root and env.
type randSide struct {
	dir, root string
	env       *env
}

// randRun runs ops on want and got, keeping each side's working directory
// for its own steps, and returns the mismatches.
func randRun(ops []op, opens []string, want, got *randSide, origIno map[string]uint64) []error {
	var errs []error
	for i, o := range ops {
		// A working directory renamed or removed on the os side is
		// outside the contract: both go back to absolute names.
		if cwd := want.env.cwd; cwd != nil && !sameIno(want.root, *cwd, origIno) {
			want.env.cwd, got.env.cwd = nil, nil
		}
		if (strings.Contains(o.desc, "dalias") || strings.Contains(o.desc, "toalias")) && !want.aliasLive() {
			// root/al is gone on the os side (a RemoveAll of "x/.." in the
			// root empties it): the bind mount holds the deleted
			// directory, the overlay's alias names the path (see the
			// package documentation).
			continue
		}
		if names, ok := strings.CutPrefix(opens[i], "\x01"); ok {
			from, to, _ := strings.Cut(names, "\x00")
			if a, b := want.inRoot(from), want.inRoot(to); a != 0 && b != 0 && a != b {
				continue // across the root's edge: the overlay is a file system of its own (EXDEV)
			}
			if want.mountPoint(from) || want.mountPoint(to) || want.acrossMounts(from, to) {
				continue // EBUSY or EXDEV in os, for mount points the overlay does not model
			}
			if want.aboveRoot(from) && !want.holdsRoot(to) && !want.isLink(from) {
				// os would move the real root: the overlay refuses (EBUSY)
				// and changes nothing, which the next steps compare.
				errs = append(errs, refused(i, o, got)...)
				continue
			}
			if want.holdsRoot(from) || want.holdsRoot(to) {
				continue // would move the real root
			}
		} else if names, ok := strings.CutPrefix(opens[i], "\x04"); ok {
			from, to, _ := strings.Cut(names, "\x00")
			if a, b := want.linkedIn(from), want.inRoot(to); a != 0 && b != 0 && a != b {
				continue // across the root's edge: the overlay is a file system of its own (EXDEV)
			}
			if want.acrossMounts(from, to) {
				continue // EXDEV in os, between mounts the overlay does not model
			}
		} else if slots, ok := strings.CutPrefix(opens[i], "\x03"); ok {
			if want.sameFile(int(slots[0]-'0'), int(slots[1]-'0')) {
				continue // a copy of a file into itself never ends when it appends
			}
		} else if name, ok := strings.CutPrefix(opens[i], "\x02"); ok {
			if want.isFIFO(rawDir(strings.TrimRight(name, "/"))) {
				continue // os would block on the FIFO
			}
			if want.mountPoint(name) {
				continue // EBUSY in os, for a mount point the overlay does not model
			}
			if want.holdsRoot(name) {
				if want.aboveRoot(name) && !want.isLink(name) {
					// os would remove the real root: the overlay refuses.
					errs = append(errs, refused(i, o, got)...)
				}
				continue
			}
		} else if dir, ok := strings.CutPrefix(opens[i], "\x00"); ok {
			if !sameIno(want.root, dir, origIno) {
				// Not the original directory any more: absolute names.
				want.env.cwd, got.env.cwd = nil, nil
				continue
			}
		} else if opens[i] != "" && want.isFIFO(opens[i]) {
			continue // os would block
		}
		out := [2]string{want.run(o), got.run(o)}
		if trace {
			fmt.Printf("op %d %s\n\twant %.200s\n\tgot  %.200s\n", i, o.desc, out[0], out[1])
		}
		if out[0] != out[1] {
			errs = append(errs, fmt.Errorf("op %d %s:\n\twant %s\n\tgot  %s", i, o.desc, out[0], out[1]))
			if len(errs) > 5 {
				break
			}
		}
	}
	want.env.closeAll()
	got.env.closeAll()
	return errs
}

// run runs o on this side, from the side's working directory: with
// absolute names each side still works from a directory of its own (a
// handle opened by a relative name earlier is looked up by name again by
// os's DirEntry.Info).
func (s *randSide) run(o op) string {
	wd := s.root
	if s.env.cwd != nil {
		wd = s.env.wd()
	}
	if err := os.Chdir(wd); err != nil {
		return "chdir: " + err.Error()
	}
	return o.run(s.env)
}

// refused runs o, which os would let remove or move the real root, on the
// overlay's side alone, and reports it unless it failed: with EBUSY, or
// with an error the name gives first (a missing target's parent). Either
// way nothing may change, which the next steps compare with the os side,
// which did not run it.
func refused(i int, o op, got *randSide) []error {
	if !got.env.cow {
		return nil // the self-check: os on both sides, neither runs it
	}
	if out := got.run(o); strings.HasPrefix(out, "err=nil") {
		return []error{fmt.Errorf("op %d %s: reaches the real root; want an error (EBUSY), got %s", i, o.desc, out)}
	}
	return nil
}

// isLink reports whether name's last component, on this side, is a
// symlink: removing or renaming it acts on the link, not on its target.
func (s *randSide) isLink(name string) bool {
	if s.env.cwd != nil {
		os.Chdir(s.env.wd())
	}
	fi, err := os.Lstat(strings.TrimRight(s.env.p(name), "/"))
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

// isFIFO reports whether name, on this side, names a FIFO.
func (s *randSide) isFIFO(name string) bool {
	if s.env.cwd != nil {
		os.Chdir(s.env.wd())
	}
	fi, err := os.Stat(s.env.p(name))
	return err == nil && fi.Mode()&fs.ModeNamedPipe != 0
}

// aliasLive reports whether this side's dalias still shows root/al, the
// directory randAliases bound there.
func (s *randSide) aliasLive() bool {
	a, err := os.Stat(filepath.Join(s.dir, "dalias"))
	if err != nil {
		return true // no aliases in this run: those names fail alike
	}
	b, err := os.Stat(filepath.Join(s.root, "al"))
	return err == nil && os.SameFile(a, b)
}

// mountPoint reports whether name, on this side, names the top of a
// mount itself (not through a symlink, not as "x/." or "x/.."): the
// alias directories of randAliases.
func (s *randSide) mountPoint(name string) bool {
	if s.env.cwd != nil {
		os.Chdir(s.env.wd())
	}
	p := strings.TrimRight(s.env.p(name), "/")
	if b := filepath.Base(p); b == "." || b == ".." {
		return false // the kernel refuses these before it looks at mounts
	}
	id, ok := mountID(p, false)
	pid, pok := mountID(rawDir(p), true)
	return ok && pok && id != pid
}

// acrossMounts reports whether the directories holding two names' last
// components are on different mounts on this side (rename's EXDEV).
func (s *randSide) acrossMounts(a, b string) bool {
	if s.env.cwd != nil {
		os.Chdir(s.env.wd())
	}
	pa, pb := strings.TrimRight(s.env.p(a), "/"), strings.TrimRight(s.env.p(b), "/")
	ia, oka := mountID(rawDir(pa), true)
	ib, okb := mountID(rawDir(pb), true)
	return oka && okb && ia != ib
}

// mountID returns the mount ID of the directory at p (following a final
// symlink when follow is set).
func mountID(p string, follow bool) (uint64, bool) {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if follow {
		flags = 0
	}
	var sx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, p, flags, unix.STATX_TYPE|unix.STATX_MNT_ID, &sx) != nil ||
		sx.Mask&unix.STATX_MNT_ID == 0 || sx.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, false
	}
	return sx.Mnt_id, true
}

// inRoot says where the directory holding name's last component is on
// this side: 1 inside the root, 2 outside, 0 unknown (it does not resolve).
func (s *randSide) inRoot(name string) int {
	if s.env.cwd != nil {
		os.Chdir(s.env.wd())
	}
	p := strings.TrimRight(s.env.p(name), "/")
	dir := rawDir(p)
	if b := filepath.Base(p); b == "." || b == ".." {
		dir = p
	}
	canon, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return 0
	}
	if canon, err = filepath.Abs(canon); err != nil {
		return 0
	}
	if canon == s.root || strings.HasPrefix(canon, s.root+"/") {
		return 1
	}
	return 2
}

// linkedIn is inRoot for the old name of a link: one ending in a slash
// names what its final symlink leads to (linkat follows it then).
func (s *randSide) linkedIn(name string) int {
	if !strings.HasSuffix(name, "/") {
		return s.inRoot(name)
	}
	p, ok := s.resolved(name)
	switch {
	case !ok:
		return 0
	case p == s.root || strings.HasPrefix(p, s.root+"/"):
		return 1
	}
	return 2
}

// rawDir is the name without its last component, not cleaned
// (filepath.Dir would take "link/.." for nothing).
func rawDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	switch {
	case i < 0:
		return "."
	case i == 0:
		return "/"
	}
	return p[:i]
}

// holdsRoot reports whether name, on this side, is an ancestor of the root
// (reached through ".." or links out of it): an outside write there would
// reach into the real root.
func (s *randSide) holdsRoot(name string) bool {
	p, ok := s.resolved(name)
	return ok && (p == s.root || strings.HasPrefix(s.root, p+"/"))
}

// aboveRoot reports whether name, on this side, resolves to a directory
// that holds the root: an outside name for the overlay.
func (s *randSide) aboveRoot(name string) bool {
	p, ok := s.resolved(name)
	return ok && strings.HasPrefix(s.root, p+"/")
}

// resolved returns the absolute path name resolves to on this side.
func (s *randSide) resolved(name string) (string, bool) {
	if s.env.cwd != nil {
		os.Chdir(s.env.wd())
	}
	p, err := filepath.EvalSymlinks(strings.TrimRight(s.env.p(name), "/"))
	if err != nil {
		return "", false
	}
	p, err = filepath.Abs(p)
	return p, err == nil
}

// sameFile reports whether two handle slots hold the same open regular file.
func (s *randSide) sameFile(a, b int) bool {
	fa, fb := s.env.handles[a], s.env.handles[b]
	if fa == nil || fb == nil {
		return false
	}
	ia, erra := fa.Stat()
	ib, errb := fb.Stat()
	return erra == nil && errb == nil && ia.Mode().IsRegular() && os.SameFile(ia, ib)
}

// sameInode compares FileInfos by device and inode (cowfs renames infos).
func sameInode(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino && a.IsDir()
}

// trace, from COWFS_DIFF_TRACE=1, prints every step's outcomes.
var trace = os.Getenv("COWFS_DIFF_TRACE") == "1"

// sameIno reports whether root/rel is still the directory it was.
func sameIno(root, rel string, orig map[string]uint64) bool {
	fi, err := os.Lstat(filepath.Join(root, rel))
	if err != nil || !fi.IsDir() {
		return false
	}
	return fi.Sys().(*syscall.Stat_t).Ino == orig[rel]
}

func dirInodes(root string) map[string]uint64 {
	m := map[string]uint64{}
	for _, d := range randDirs {
		if fi, err := os.Lstat(filepath.Join(root, d)); err == nil {
			m[d] = fi.Sys().(*syscall.Stat_t).Ino
		}
	}
	return m
}

// randSequence runs seed's sequence with cowfs (or, with oracle set, os
// again) over a tree under baseA against os on a copy under baseB, and
// returns the mismatches.
func randSequence(t testing.TB, baseA, baseB string, seed uint64, oracle bool) []error {
	t.Helper()
	ops, opens := randOps(seed)
	return randCompare(t, baseA, baseB, fmt.Sprint(seed), ops, opens, oracle)
}

// randCompare runs ops (and their notes from randOpsFrom) as randSequence
// does; label names the run in reports and directories.
func randCompare(t testing.TB, baseA, baseB, label string, ops []op, opens []string, oracle bool) []error {
	t.Helper()
	// Each side's tree sits a few levels down in a directory of its own,
	// so that names climbing out of the root stay on their side.
	topA, topB := filepath.Join(baseA, label+"A"), filepath.Join(baseB, label+"B")
	dirA, dirB := filepath.Join(topA, "1/2/3"), filepath.Join(topB, "1/2/3")
	for _, d := range []string{dirA, dirB} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	defer os.RemoveAll(topA)
	defer os.RemoveAll(topB)
	rootA, rootB := randFixture(t, dirA), randFixture(t, dirB)
	var unbind []func()
	for _, side := range [][2]string{{dirA, rootA}, {dirB, rootB}} {
		undo, err := randAliases(side[0], side[1])
		if err != nil {
			t.Logf("no bind-mount aliases in this sequence: mounting needs CAP_SYS_ADMIN: %v", err)
		}
		unbind = append(unbind, undo)
		defer undo() // before the trees are removed: they would be removed through it
	}
	before := mustWalk(t, osTarget{}, rootA)
	origIno := dirInodes(rootB)
	sumA := hashTree(t, rootA)
	want := &randSide{dir: dirB, root: rootB, env: newEnv(osTarget{}, rootB, false)}
	var c *overlayfs.Fs
	got := &randSide{dir: dirA, root: rootA}
	if oracle {
		got.env = newEnv(osTarget{}, rootA, false)
	} else {
		c = newCow(t, rootA, overlayfs.AllowOutsideWrites())
		got.env = newEnv(c, c.Root(), true)
	}
	errs := randRun(ops, opens, want, got, origIno)
	for _, undo := range unbind {
		undo() // the trees are compared by their own names
	}
	var gotFs target = osTarget{}
	if c != nil {
		gotFs = c
	}
	wantTree, err := walkTarget(osTarget{}, rootB)
	if err != nil {
		return append([]error{fmt.Errorf("seed %s, ops:\n\t%s", label, opList(ops))}, append(errs, fmt.Errorf("walking the os copy: %v", err))...)
	}
	gotTree, err := walkTarget(gotFs, rootA)
	if err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, diffTrees(wantTree, gotTree)...)
	errs = append(errs, diffDirTimes(dirTimesOf(osTarget{}, rootB, wantTree, gotTree), dirTimesOf(gotFs, rootA, gotTree, wantTree))...)
	// Beside the roots: what writes through links leaving the root did.
	bB, bA := besides(t, topB), besides(t, topA)
	errs = append(errs, diffTrees(bB, bA)...)
	errs = append(errs, diffDirTimes(dirTimesOf(osTarget{}, topB, bB, bA), dirTimesOf(osTarget{}, topA, bA, bB))...)
	if c != nil {
		errs = append(errs, checkChanges(c, before, wantTree)...)
		if hashTree(t, rootA) != sumA {
			errs = append(errs, errors.New("the real root was modified"))
		}
	}
	if len(errs) > 0 {
		errs = append([]error{fmt.Errorf("seed %s, ops:\n\t%s", label, opList(ops))}, errs...)
	}
	return errs
}

// besides walks dir without its root subtree (nor the aliases of it).
func besides(t testing.TB, dir string) map[string]entry {
	m := mustWalk(t, osTarget{}, dir)
	for k := range m {
		for _, sub := range []string{"1/2/3/root", "1/2/3/alias", "1/2/3/dalias"} {
			if k == sub || strings.HasPrefix(k, sub+"/") {
				delete(m, k) // the root, and the root seen through its aliases
			}
		}
	}
	return m
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// TestRandomDifferential runs COWFS_DIFF_SEQS sequences (default 60, 1,000 with COWFS_LONG=1) from
// seed COWFS_DIFF_SEED (default 1) on cowfs and on os, and reports every
// diverging seed (at most five in full).
func TestRandomDifferential(t *testing.T) {
	dir := t.TempDir()
	runRandom(t, dir, dir, false)
}

// TestRandomAliasNames validates the generator's names through bind mounts
// in os: each alias name reaches the file of the root it stands for, ".."
// from the top of an alias leaves for the alias's parent, the aliases are
// mount points (which randRun keeps out of removals and renames), and
// renames between them and canonical names cross mounts.
func TestRandomAliasNames(t *testing.T) {
	dir := t.TempDir()
	root := randFixture(t, dir)
	undo, err := randAliases(dir, root)
	if err != nil {
		t.Skipf("bind mounts need CAP_SYS_ADMIN, which this process lacks: %v", err)
	}
	defer undo()
	t.Chdir(root)
	for name, want := range map[string]string{
		"../alias/a": "a", "../alias/d/c": "d/c", "../alias/ld/b": "d/b", "../alias/d": "d",
		"../dalias/f": "al/f", "../dalias/sub/g": "al/sub/g", "toalias/f": "al/f", "al/up/a": "a",
		"../dalias/sub": "al/sub", "../dalias/up": "..", "../alias": ".",
	} {
		gi, gerr := os.Stat(name)
		wi, werr := os.Stat(filepath.Join(root, want))
		if gerr != nil || werr != nil || !os.SameFile(gi, wi) {
			t.Errorf("os: %s is not root/%s: %v, %v", name, want, gerr, werr)
		}
	}
	for _, name := range []string{"../alias/new", "../dalias/new", "../dalias/up/a", "toalias/new"} {
		if _, err := os.Lstat(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("os: %s exists (%v): the generator means it new or missing", name, err)
		}
	}
	side := &randSide{dir: dir, root: root, env: newEnv(osTarget{}, root, false)}
	for name, want := range map[string]bool{"../alias": true, "../dalias": true, "toalias": false, "al": false, "../dalias/sub": false} {
		if got := side.mountPoint(name); got != want {
			t.Errorf("mountPoint(%s) = %v, want %v", name, got, want)
		}
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{{"../dalias/f", "al/f", true}, {"toalias/f", "../dalias/new", false}, {"../alias/a", "a", true}, {"../alias/a", "../alias/d/c", false}, {"a", "d/b", false}} {
		if got := side.acrossMounts(c.a, c.b); got != c.want {
			t.Errorf("acrossMounts(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestRandomOracleSelfCheck validates the generator: os against os on a
// second copy, on the temp dir's file system and on a tmpfs, must never
// diverge. Otherwise a sequence compares something file-system specific.
func TestRandomOracleSelfCheck(t *testing.T) {
	disk := t.TempDir()
	var fsType unix.Statfs_t
	unix.Statfs(disk, &fsType)
	t.Logf("temp dir file system type %#x", fsType.Type)
	t.Run("disk", func(t *testing.T) { runRandom(t, disk, disk, true) })
	mem := t.TempDir()
	if err := unix.Mount("tmpfs", mem, "tmpfs", 0, "size=64m"); err != nil {
		t.Skipf("cannot mount a tmpfs on %s (%v): needs CAP_SYS_ADMIN", mem, err)
	}
	t.Cleanup(func() { unix.Unmount(mem, unix.MNT_DETACH) })
	t.Run("tmpfs", func(t *testing.T) { runRandom(t, mem, mem, true) })
	// One side on each: what differs between the two file systems shows.
	t.Run("tmpfs-vs-disk", func(t *testing.T) { runRandom(t, mem, disk, true) })
}

func runRandom(t *testing.T, baseA, baseB string, oracle bool) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(wd) // restores the working directory at the end
	def := longtest.N(60, 1000)
	if oracle {
		def = longtest.N(10, 100) // the generator's own check, on three pairs of file systems
	}
	n, first := envInt("COWFS_DIFF_SEQS", def), envInt("COWFS_DIFF_SEED", 1)
	failed := 0
	for seed := first; seed < first+n; seed++ {
		errs := randSequence(t, baseA, baseB, uint64(seed), oracle)
		if err := errors.Join(errs...); err != nil {
			if failed++; failed <= 5 {
				t.Errorf("%v", err)
			}
		}
		os.Chdir(wd)
	}
	t.Logf("%d sequences, seeds %d..%d: %d diverged", n, first, first+n-1, failed)
}

// TestCornerClasses pins each class of divergence the random differential
// found (issue 12), with the issue's own examples, against os on a copy of
// the random differential's fixture. Not parallel: some change directory.
func TestCornerClasses(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(wd)
	classes := []struct {
		name string
		ops  []op
	}{
		{"dot-names", []op{
			mkdir("empty/n/.", 0o755), mkdir("a/.", 0o755), mkdir("d/.", 0o755), symlink("x", "a/."),
			rename("ro", "newdir/."), rename("ro", "d/."), rename("g/.", "dir/sub"), rename("g/.", "nowhere"),
			remove("g/."), remove("empty/."), remove("empty/.."), removeAll("g/.."), lstat("g"),
			openFile(0, "b/.", creat|wronly, 0o644), openFile(0, "d/.", creat|wronly, 0o644),
			openFile(0, "d/..", creat|excl|wronly, 0o644), openFile(0, "empty/n/.", creat|wronly, 0o644),
		}},
		{"trailing-slashes", []op{
			openFile(0, "self/", wronly|creat|excl, 0o644), openFile(0, "m/new//", creat|wronly, 0o644),
			openFile(0, "d/new//", creat|wronly, 0o644), rename("m//", "g"), rename("a", "dl//"),
			rename("a", "ld//"), rename("l/", "x"), remove("l/"), mkdir("m/", 0o755), lstat("m"),
			// A create through final symlinks stops at a target ending in
			// a slash (EISDIR), even where following it on would loop
			// (seed 559 of the random differential).
			symlink("s/", "s"), openFile(0, "s", creat|wronly, 0o644), openFile(1, "s", wronly, 0), stat("s"),
			symlink("s2", "s1"), symlink("s1/", "s2"), openFile(0, "s1", creat|wronly|trunc|appnd, 0o755),
			openFile(0, "s1", creat|excl|wronly, 0o644), stat("s1"),
			// But where the loop is in the target's directory part, the
			// walk to it says ELOOP first (seed 3605: a -> "a/.").
			remove("a"), symlink("a/.", "a"), create(0, "c2"), openFile(1, "a", creat|wronly, 0o644),
			symlink("loop1/x/", "s3"), openFile(2, "s3", creat|wronly, 0o644), symlink("s4/./", "s4"), create(0, "s4"),
		}},
		{"setgid", []op{
			mkdir("sg/n", 0o755), lstat("sg/n"), owner("sg/n"), writeFile("sg/nf", "x", 0o755|fs.ModeSetgid), lstat("sg/nf"),
			chmod("d", 0o2755), mkdir("d/n", 0o700), mkdir("d/n/m", 0o700), lstat("d/n/m"), chmod("g", 0),
			mkdir("g/z", 0o755), lstat("g/z"), chmod("st", 0o1777), writeFile("st/f", "s", 0o644), lstat("st/f"),
			chmod("x", 0o755|fs.ModeSetuid|fs.ModeSetgid), chownOp("x", -1, -1), lstat("x"),
		}},
		{"links-out-over-lower", []op{
			remove("x"), symlink("..", "x"), stat("x"), readFile("x/outside.txt"), remove("b"),
			symlink("../outside.txt", "b"), stat("b"), readFile("b"), remove("d/b"), symlink("../..", "d/b"),
			stat("d/b"), create(0, "ld/b"), lstat("ld/b/root"),
		}},
		{"handles-after-chdir", []op{
			chdirOp("d"), open(0, "../g"), chdirOp("dir/sub"), readdirnames(0, -1), readdir(0, -1), readDirH(0, -1),
			rename("../../g", "../../g2"), listOp(0, 0, -1), fstat(0), chdirOp("-"),
			// A DirEntry's Info lstats the handle's name as given, against
			// the working directory of now, outside the root too (seed
			// 2147): "../out" from st names nothing from d/e.
			chdirOp("st"), open(1, "../out"), chdirOp("d/e"), listOp(1, 2, -1), chdirOp("-"), listOp(1, 2, -1),
		}},
		{"fresh-metadata", []op{
			open(0, "a"), chmod("a", 0o600), openFile(1, "a", wronly, 0), truncH(1, 2), fstat(0),
			seek(0, 0, io.SeekEnd), open(2, "d"), chmod("d", 0o700), fstat(2), open(0, "b"),
			openFile(1, "b", wronly|trunc, 0), read(0, 10), write(1, "new"), read(0, 10), fstat(0),
		}},
		{"io-copy", []op{
			open(0, "a"), open(1, "b"), copyOp(1, 0), fstat(0), read(0, 3), closeH(1), copyOp(1, 0),
			readFromOp(1, ""), readFromOp(1, "x"), openFile(2, "p", rdwr|appnd, 0), copyOp(2, 0), copyOp(0, 2),
			open(1, "d"), copyOp(2, 1), copyOp(1, 2), writeString(2, "tail"), seek(2, 30, io.SeekStart), write(2, "hole"),
		}},
		{"open-flags", []op{
			// O_DIRECTORY's bit is in O_TMPFILE: an outside open with it
			// once passed openat2 a mode, and openat2 said EINVAL.
			openFile(0, "outf", wronly|appnd|syscall.O_DIRECTORY, 0o600), openFile(0, "../outside.txt", wronly|syscall.O_DIRECTORY, 0o600),
			openFile(0, "out", rdwr|syscall.O_DIRECTORY, 0o600), openFile(0, "out/new", wronly|creat|syscall.O_NOFOLLOW, 0o600), writeString(0, "n"),
			openFile(1, "l", rdonly|syscall.O_NOFOLLOW, 0), openFile(1, "ld", rdonly|syscall.O_DIRECTORY, 0), openFile(1, "outf", wronly|syscall.O_NOFOLLOW, 0),
			openFile(2, "a", wronly|rdwr, 0), write(2, "x"), read(2, 1), openFile(2, "d", rdonly|syscall.O_DIRECTORY|creat, 0o755),
		}},
		{"outside-handle-info", []op{
			// A DirEntry's Info of a directory outside the root, opened
			// through a symlink in it, looks its name up in the view
			// (seed 2079): the symlink removed, the name is gone.
			writeFile("out/o", "x", 0o644), open(0, "out"), readDirH(0, -1), remove("out"), seek(0, 0, io.SeekStart), readDirH(0, -1),
			symlink("d", "out"), seek(0, 0, io.SeekStart), readDirH(0, -1),
		}},
		{"create-through-slash-link-outside", []op{
			// An outside create through a symlink whose target ends in
			// a slash is EISDIR, as inside (seed 3996): "up" from the
			// top of the directory alias is the alias's parent, outside.
			symlink("d/", "ld/../../dalias/up/q"), lstat("../dalias/up/q"), writeFile("../dalias/up/q", "0123", 0o755), lstat("../d"),
			symlink("nothing/", "../outdir/sl"), openFile(0, "../outdir/sl", wronly|creat, 0o644), openFile(1, "../outdir/sl", wronly|creat|excl, 0o644), lstat("../outdir/nothing"),
			symlink("nothing/./", "../outdir/sl2"), openFile(0, "../outdir/sl2", wronly|creat, 0o644), symlink("sl3/x/", "../outdir/sl3"), openFile(1, "../outdir/sl3", wronly|creat, 0o644),
			symlink("o/x/", "../outdir/sl4"), openFile(2, "../outdir/sl4", wronly|creat, 0o644), symlink("sl5/./", "../outdir/sl5"), create(0, "out/sl5"),
			symlink(".", "../outdir/sl6"), create(1, "out/sl6"), symlink("o/.", "../outdir/sl7"), create(2, "out/sl7"), symlink("../outdir/.", "../outdir/sl8"), create(0, "out/sl8"),
			symlink("../outdir/..", "../outdir/sl9"), create(1, "out/sl9"), symlink("nope/..", "../outdir/sla"), create(2, "out/sla"),
		}},
		{"link-new-name-outside", []op{
			// linkat resolves the new name before it compares mounts: an
			// outside new name that exists is EEXIST, one it cannot reach
			// says why (seeds 159 and 164); EXDEV only for a free name.
			hardLink("d/b", "out/o/."), hardLink("a", "outf/."), hardLink("a", "out/o/x"), hardLink("a", "out/o"),
			hardLink("a", "out/o/"), hardLink("a", "out/nope/x"), hardLink("a", "out/new/"), hardLink("a", "outf"),
			symlink("self", "../outdir/self"), hardLink("a", "out/self"), hardLink("a", "out/self/x"), hardLink("d", "out/o/."),
		}},
		{"dir-times", []op{
			// A Chtimes that leaves the mtime (UTIME_OMIT) keeps a time
			// the directory's entries moved (seed 44).
			mkdir("sg/new", 0o755), dirTime("sg"), chtimesPair("sg", time.Unix(1e9, 5), time.Time{}), dirTime("sg"),
			chtimesPair("d", time.Unix(1e9, 7), time.Unix(1e9, 9)), dirTime("d"), chtimesPair("d", time.Unix(1e9, 8), time.Time{}), dirTime("d"),
			writeFile("d/new", "x", 0o644), dirTime("d"), chtimesPair("d", time.Unix(1e9, 6), time.Time{}), dirTime("d"), dirTime("ld"),
		}},
		{"removed-dir-handle-time", []op{
			// fstat of a removed directory reports the time it had
			// when removed: RemoveAll's unlinks of its entries moved it
			// (a lower directory's handle, and a layer one's).
			open(0, "d/e"), open(1, "d"), removeAll("d"), fstat(0), fstat(1), mkdir("n", 0o755), writeFile("n/f", "x", 0o644),
			open(2, "n"), openFile(0, "dir/sub", rdonly, 0), removeAll("n"), removeAll("dir"), fstat(2), fstat(0),
			chtimesPair("empty", time.Unix(1e9, 3), time.Unix(1e9, 4)), open(1, "empty"), remove("empty"), fstat(1),
		}},
		{"file-times", []op{
			// What moves a file's time and what does not: empty writes,
			// truncations to its own size, O_TRUNC of an empty file,
			// empty copies, Chmod, a read.
			openFile(0, "a", rdwr, 0), write(0, ""), lstat("a"), writeAt(0, "", 3), lstat("a"), writeString(0, ""), lstat("a"),
			readFromOp(0, ""), lstat("a"), read(0, 3), lstat("a"), truncH(0, 6), lstat("a"), truncH(0, 7), lstat("a"),
			chtimesPair("b", time.Unix(1e9, 1), time.Unix(1e9, 2)), openFile(1, "b", wronly|appnd, 0), write(1, ""), lstat("b"), truncH(1, 5), lstat("b"),
			open(2, "d/b"), copyOpKind(1, 2, 1, 0), lstat("b"), copyOpKind(1, 2, 2, 0), lstat("b"), chmod("b", 0o600), lstat("b"),
			writeFile("empty/e", "", 0o644), chtimesPair("empty/e", time.Unix(1e9, 1), time.Unix(1e9, 2)), openFile(0, "empty/e", wronly|trunc, 0), lstat("empty/e"),
			chtimesPair("empty/e", time.Unix(1e9, 1), time.Unix(1e9, 2)), openFile(0, "empty/e", rdonly|trunc, 0), lstat("empty/e"),
			chtimesPair("empty/e", time.Unix(1e9, 1), time.Unix(1e9, 2)), openFile(0, "empty/e", wronly|creat, 0o644), lstat("empty/e"), syncH(0), closeH(0), lstat("empty/e"),
			openFile(0, "x", rdonly|trunc, 0), lstat("x"), openFile(0, "p", wronly|creat|excl, 0o644), lstat("p"), hardLink("x", "xl"), lstat("x"), rename("xl", "xm"), lstat("x"),
		}},
		{"no-op-renames-keep-dir-times", []op{
			// A rename of a name onto itself, or onto another name of
			// the same file, changes nothing: not the directory's time.
			hardLink("a", "d/h1"), chtimesPair("", time.Unix(1e9, 1), time.Unix(1e9, 2)), chtimesPair("d", time.Unix(1e9, 1), time.Unix(1e9, 3)),
			rename("a", "d/h1"), dirTime(""), dirTime("d"), rename("d/h1", "a"), dirTime(""), dirTime("d"), rename("a", "a"), rename("d", "d"), rename("l", "l"),
			dirTime(""), hardLink("b", "h2"), chtimesPair("", time.Unix(1e9, 1), time.Unix(1e9, 4)), rename("h2", "b"), rename("b", "./h2"), dirTime(""), lstat("b"), lstat("h2"),
		}},
		{"special-files", []op{
			chmod("pipe", 0o600), lstat("pipe"), rename("sock", "d/s2"), lstat("d/s2"), chtimesStat("pipe", time.Unix(1e9, 0)),
			remove("d/pipe"), openFile(0, "sock", rdonly, 0),
		}},
	}
	for _, c := range classes {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			if err := errors.Join(randCompare(t, base, base, c.name, c.ops, make([]string, len(c.ops)), false)...); err != nil {
				t.Error(err)
			}
			os.Chdir(wd)
		})
	}
}
