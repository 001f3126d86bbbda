//go:build linux

package overlayfs_test

// The os-exactness hunt: inputs the random differential's generators do not
// make, each run on os over a copy of the fixture and on the overlay of the
// original (runScenarios), comparing every result, the full errors (type,
// Op, Path, errno) and the final tree.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
)

// statFull renders what Stat or Lstat tells beyond info: the link count
// and owner from Sys().
func statFull(rel string, follow bool) op {
	name := "Lstat"
	if follow {
		name = "Stat"
	}
	return op{fmt.Sprintf("%s(%q) full", name, rel), func(e *env) string {
		var fi fs.FileInfo
		var err error
		if follow {
			fi, err = e.fs.Stat(e.p(rel))
		} else {
			fi, _, err = e.fs.LstatIfPossible(e.p(rel))
		}
		if err != nil {
			return e.res(err, "")
		}
		return e.res(err, "%s %s", info(fi), sysNlink(fi))
	}}
}

func sysNlink(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("Sys()=%T", fi.Sys())
	}
	return fmt.Sprintf("nlink=%d uid=%d gid=%d", st.Nlink, st.Uid, st.Gid)
}

// fstatFull is a handle's Stat with the link count.
func fstatFull(slot int) op {
	return withHandle("Stat() full", slot, func(e *env, f afero.File) string {
		fi, err := f.Stat()
		if err != nil {
			return e.res(err, "")
		}
		return e.res(err, "%s %s", info(fi), sysNlink(fi))
	})
}

// readdirNlinks lists rel with Readdir and with ReadDir's Info, rendering
// each entry's link count.
func readdirNlinks(rel string) op {
	return op{fmt.Sprintf("Readdir(%q) nlinks", rel), func(e *env) string {
		f, err := e.fs.Open(e.p(rel))
		if err != nil {
			return e.res(err, "")
		}
		defer f.Close()
		fis, err := f.Readdir(-1)
		var out []string
		for _, fi := range fis {
			out = append(out, fi.Name()+":"+sysNlink(fi))
		}
		slices.Sort(out)
		if _, serr := f.Seek(0, io.SeekStart); serr != nil {
			return e.res(serr, "")
		}
		des, derr := f.(fs.ReadDirFile).ReadDir(-1)
		var out2 []string
		for _, de := range des {
			fi, ierr := de.Info()
			if ierr != nil {
				out2 = append(out2, de.Name()+":"+errClass(ierr))
				continue
			}
			out2 = append(out2, de.Name()+":"+sysNlink(fi))
		}
		slices.Sort(out2)
		return e.res(err, "readdir=%q readDir=%q %s", out, out2, describeErr(derr, e.root))
	}}
}

// hname renders a handle's Name().
func hname(slot int) op {
	return withHandle("Name()", slot, func(e *env, f afero.File) string { return e.relName(f.Name()) })
}

// hardLink is Link on either side: os.Link for os.
func hardLink(oldRel, newRel string) op {
	return op{fmt.Sprintf("Link(%q, %q)", oldRel, newRel), func(e *env) string {
		l, ok := e.fs.(interface{ Link(o, n string) error })
		var err error
		if ok {
			err = l.Link(e.p(oldRel), e.p(newRel))
		} else {
			err = os.Link(e.p(oldRel), e.p(newRel))
		}
		return e.res(err, "")
	}}
}

// listStep lists n entries once (no loop), rendering names in order.
func listStep(slot, n int) op {
	return withHandle(fmt.Sprintf("Readdirnames(%d) once", n), slot, func(e *env, f afero.File) string {
		names, err := f.Readdirnames(n)
		return e.res(err, "n=%d", len(names))
	})
}

var long256 = strings.Repeat("n", 256)

func TestExactEdges(t *testing.T) {
	long255 := strings.Repeat("n", 255)
	deep := strings.Repeat("./", 2100) + "README.md" // > PATH_MAX bytes
	runScenarios(t, []scenario{
		{name: "append-trunc", ops: []op{openFile(0, "go.mod", wronly|appnd|trunc, 0), fstat(0), write(0, "a"), seek(0, 0, io.SeekStart), write(0, "b"), closeH(0), readFile("go.mod")}},
		{name: "rdonly-trunc", ops: []op{openFile(0, "go.mod", rdonly|trunc, 0), fstat(0), read(0, 10), write(0, "x"), closeH(0), readFile("go.mod")}},
		{name: "excl-no-creat", ops: []op{openFile(0, "go.mod", rdwr|excl, 0), openFile(1, "nope", rdwr|excl, 0), openFile(2, "internal", rdonly|excl, 0)}},
		{name: "o-directory", ops: []op{
			openFlags(0, "internal", syscall.O_DIRECTORY, "O_DIRECTORY", 0), readdirnames(0, -1),
			openFlags(1, "README.md", syscall.O_DIRECTORY, "O_DIRECTORY", 0),
			openFlags(2, "link-to-internal", syscall.O_DIRECTORY, "O_DIRECTORY", 0),
			openFlags(3, "link-to-readme", syscall.O_DIRECTORY, "O_DIRECTORY", 0),
			openFlags(4, "nope", syscall.O_DIRECTORY|os.O_CREATE|os.O_RDWR, "O_DIRECTORY|O_CREATE|O_RDWR", 0o644),
			openFlags(5, "nope2", syscall.O_DIRECTORY|os.O_CREATE, "O_DIRECTORY|O_CREATE", 0o755),
			openFlags(6, "nope3", syscall.O_DIRECTORY|os.O_CREATE|os.O_EXCL|os.O_WRONLY, "O_DIRECTORY|O_CREATE|O_EXCL|O_WRONLY", 0o755),
			openFlags(7, "internal", syscall.O_DIRECTORY|os.O_CREATE, "O_DIRECTORY|O_CREATE", 0o755),
			lstat("nope"), lstat("nope2"), lstat("nope3"),
			openFlags(0, "README.md", syscall.O_DIRECTORY|os.O_WRONLY, "O_DIRECTORY|O_WRONLY", 0),
			openFlags(1, "go.mod", syscall.O_DIRECTORY|os.O_RDONLY|os.O_TRUNC, "O_DIRECTORY|O_TRUNC", 0),
			openFlags(2, "internal", syscall.O_DIRECTORY|os.O_RDWR, "O_DIRECTORY|O_RDWR", 0),
			openFlags(3, "internal", syscall.O_DIRECTORY|os.O_TRUNC, "O_DIRECTORY|O_TRUNC", 0),
			openFlags(4, "dangling", syscall.O_DIRECTORY, "O_DIRECTORY", 0),
			openFlags(5, "nope", syscall.O_DIRECTORY, "O_DIRECTORY", 0),
			openFlags(6, "link-to-readme", syscall.O_DIRECTORY|os.O_RDWR, "O_DIRECTORY|O_RDWR", 0),
			openFlags(7, "link-to-internal/", syscall.O_DIRECTORY, "O_DIRECTORY", 0), hname(7),
			openFlags(0, "empty", syscall.O_DIRECTORY|syscall.O_NOFOLLOW, "O_DIRECTORY|O_NOFOLLOW", 0), readdirnames(0, -1),
			openFlags(1, "link-to-internal", syscall.O_DIRECTORY|syscall.O_NOFOLLOW, "O_DIRECTORY|O_NOFOLLOW", 0),
			mkdir("nd", 0o755), openFlags(2, "nd", syscall.O_DIRECTORY, "O_DIRECTORY", 0), symlink("nd", "lnd"), openFlags(3, "lnd", syscall.O_DIRECTORY, "O_DIRECTORY", 0),
			writeFile("nf", "x", 0o644), openFlags(4, "nf", syscall.O_DIRECTORY, "O_DIRECTORY", 0), openFlags(5, "nf", syscall.O_DIRECTORY|os.O_WRONLY, "O_DIRECTORY|O_WRONLY", 0),
			readFile("README.md"), readFile("go.mod"),
		}},
		{name: "o-nofollow", ops: []op{
			openFlags(0, "link-to-readme", syscall.O_NOFOLLOW, "O_NOFOLLOW", 0),
			openFlags(1, "link-to-internal", syscall.O_NOFOLLOW, "O_NOFOLLOW", 0),
			openFlags(2, "link-to-internal/util/util.go", syscall.O_NOFOLLOW, "O_NOFOLLOW", 0),
			openFlags(3, "dangling", syscall.O_NOFOLLOW|os.O_CREATE|os.O_WRONLY, "O_NOFOLLOW|O_CREATE|O_WRONLY", 0o644),
			openFlags(4, "README.md", syscall.O_NOFOLLOW, "O_NOFOLLOW", 0), read(4, 3),
			lstat("does-not-exist"),
			openFlags(0, "link-to-internal/", syscall.O_NOFOLLOW, "O_NOFOLLOW", 0),
			openFlags(1, "link-to-readme", syscall.O_NOFOLLOW|os.O_CREATE|os.O_EXCL|os.O_WRONLY, "O_NOFOLLOW|O_CREATE|O_EXCL|O_WRONLY", 0o644),
			openFlags(2, "link-to-readme", syscall.O_NOFOLLOW|os.O_WRONLY|os.O_TRUNC, "O_NOFOLLOW|O_WRONLY|O_TRUNC", 0),
			openFlags(3, "link-to-readme", syscall.O_NOFOLLOW|os.O_CREATE|os.O_RDWR, "O_NOFOLLOW|O_CREATE|O_RDWR", 0o644),
			openFlags(4, "link-to-internal/util/util.go", syscall.O_NOFOLLOW|os.O_RDWR, "O_NOFOLLOW|O_RDWR", 0), write(4, "w"),
			openFlags(5, "new", syscall.O_NOFOLLOW|os.O_CREATE|os.O_RDWR, "O_NOFOLLOW|O_CREATE|O_RDWR", 0o600), write(5, "n"),
			symlink("new", "lnew"), openFlags(6, "lnew", syscall.O_NOFOLLOW, "O_NOFOLLOW", 0), openFlags(7, "lnew", syscall.O_NOFOLLOW|os.O_WRONLY, "O_NOFOLLOW|O_WRONLY", 0),
			symlink("internal", "lint"), openFlags(0, "lint/", syscall.O_NOFOLLOW, "O_NOFOLLOW", 0), openFlags(1, "lint", syscall.O_NOFOLLOW, "O_NOFOLLOW", 0),
			openFlags(2, "loopy", syscall.O_NOFOLLOW, "O_NOFOLLOW", 0), symlink("loopy", "loopy"), openFlags(3, "loopy", syscall.O_NOFOLLOW, "O_NOFOLLOW", 0),
			readFile("README.md"), readFile("internal/util/util.go"),
		}},
		{name: "o-sync-etc", ops: []op{
			openFlags(0, "go.mod", os.O_RDWR|os.O_SYNC, "O_RDWR|O_SYNC", 0), write(0, "x"),
			openFlags(1, "go.mod", os.O_RDWR|syscall.O_NONBLOCK|syscall.O_NOATIME|syscall.O_CLOEXEC, "O_RDWR|O_NONBLOCK|O_NOATIME|O_CLOEXEC", 0), read(1, 4),
			openFlags(2, "go.mod", os.O_RDWR|syscall.O_DSYNC, "O_RDWR|O_DSYNC", 0), write(2, "y"), readFile("go.mod"),
		}},
		{name: "o-wronly-rdwr-both", ops: []op{
			openFlags(0, "go.mod", os.O_WRONLY|os.O_RDWR, "O_WRONLY|O_RDWR", 0), read(0, 3), write(0, "x"), readAt(0, 3, 0), writeAt(0, "x", 0), writeString(0, "s"),
			truncH(0, 1), fstat(0), seek(0, 2, io.SeekStart), syncH(0), closeH(0),
			openFlags(1, "main.go", os.O_WRONLY|os.O_RDWR|os.O_TRUNC, "O_WRONLY|O_RDWR|O_TRUNC", 0), read(1, 3), fstat(1),
			openFlags(2, "internal", os.O_WRONLY|os.O_RDWR, "O_WRONLY|O_RDWR", 0), openFlags(3, "n", os.O_WRONLY|os.O_RDWR|os.O_CREATE, "O_WRONLY|O_RDWR|O_CREATE", 0o644), write(3, "x"),
			openFlags(4, "README.md", os.O_WRONLY|os.O_RDWR|os.O_APPEND, "O_WRONLY|O_RDWR|O_APPEND", 0), write(4, "x"), read(4, 1),
			readFile("go.mod"), readFile("main.go"), readFile("README.md"),
		}},
		{name: "seek-whence", ops: []op{
			open(0, "go.mod"), seek(0, -1, io.SeekStart), seek(0, 5, io.SeekStart), seek(0, -10, io.SeekCurrent),
			seek(0, 2, io.SeekCurrent), seek(0, 0, io.SeekEnd), seek(0, 10, io.SeekEnd), read(0, 3), seek(0, -1000, io.SeekEnd), seek(0, 0, 3), seek(0, 0, 4), seek(0, 0, -1), seek(0, 0, io.SeekCurrent),
		}},
		{name: "seek-after-close", ops: []op{open(0, "go.mod"), closeH(0), seek(0, 0, io.SeekStart), seek(0, -1, io.SeekStart), fstat(0), syncH(0), hname(0), writeString(0, "x")}},
		{name: "closed-dir-handle", ops: []op{open(0, "internal"), closeH(0), readdirnames(0, 1), readDirH(0, 1), readdir(0, 0), seek(0, 0, io.SeekStart), read(0, 1)}},
		{name: "dir-handle-writes", ops: []op{open(0, "internal"), writeString(0, "x"), writeAt(0, "x", 0), truncH(0, 0), truncH(0, -1), syncH(0), readAt(0, 4, 0), readAt(0, 4, -1)}},
		{name: "truncate-handles", ops: []op{
			open(0, "go.mod"), truncH(0, 0), truncH(0, -1), truncH(0, 5),
			openFile(1, "go.mod", wronly|appnd, 0), truncH(1, 3), truncH(1, -5), write(1, "X"), readFile("go.mod"),
			openFile(2, "main.go", rdwr, 0), truncH(2, 1<<20), fstat(2), truncH(2, 2), closeH(2), readFile("main.go"),
			openFile(3, "go.mod", rdwr, 0), writeAt(3, "z", math.MaxInt64), writeAt(3, "z", math.MaxInt64-1), readAt(3, 1, math.MaxInt64), readAt(3, 2, math.MaxInt64-1),
			readAt(3, 0, math.MaxInt64), fstat(3), closeH(3), readFile("go.mod"), open(4, "README.md"), readAt(4, 1, math.MaxInt64), writeFile("nf", "x", 0o644), open(5, "nf"), readAt(5, 1, math.MaxInt64),
		}},
		{name: "writeat-append", ops: []op{
			openFile(0, "go.mod", rdwr|appnd, 0), writeAt(0, "x", 0), writeAt(0, "", 0), writeAt(0, "x", -1), writeAt(0, "", -1),
			openFile(1, "new", wronly|creat|appnd, 0o644), writeAt(1, "q", 3), write(1, "w"), readFile("new"),
		}},
		{name: "stat-after-remove", ops: []op{
			open(0, "README.md"), openFile(1, "go.mod", rdwr, 0), write(1, "X"), create(2, "n"), write(2, "y"),
			remove("README.md"), remove("go.mod"), remove("n"),
			fstatFull(0), fstatFull(1), fstatFull(2), write(1, "Y"), fstatFull(1), read(0, 5),
		}},
		{name: "nlink", ops: []op{
			statFull("README.md", false), statFull("internal", false), statFull("empty", false), statFull("link-to-readme", true),
			statFull("", false), mkdir("internal/new", 0o755), statFull("internal", false), mkdir("nd", 0o755), mkdir("nd/sub", 0o755),
			statFull("nd", false), statFull("", false), remove("empty"), statFull("", false), rename("internal/new", "cmd/new"),
			statFull("internal", false), statFull("cmd", false), hardLink("README.md", "R2"), statFull("README.md", false),
			open(0, "R2"), fstatFull(0), removeAll("a"), statFull("", false), removeAll("internal/util"), statFull("internal", false),
			open(1, ""), fstatFull(1), open(2, "cmd"), fstatFull(2), readdirNlinks(""), readdirNlinks("cmd"), statFull("link-to-internal", true),
			rename("cmd", "internal/cmd2"), statFull("internal", false), statFull("internal/cmd2", false), fstatFull(2), removeAll("docs"), mkdir("docs", 0o755),
			mkdir("docs/x", 0o755), statFull("docs", false), readdirNlinks(""), readdirNlinks("internal"), remove("empty"), writeFile("empty", "now a file", 0o644),
			statFull("", false), remove("go.mod"), mkdir("go.mod", 0o700), statFull("", false), rename("go.mod", "private/gm"), statFull("private", false), statFull("", false),
		}},
		{name: "readdir-steps", ops: []op{
			open(0, "internal/util"), listStep(0, 1), listStep(0, 1), listStep(0, 10), listStep(0, 10), listStep(0, 0),
			seek(0, 0, io.SeekStart), listStep(0, 2), listStep(0, 100), listStep(0, 1),
			seek(0, 0, io.SeekStart), readdirnames(0, -1), readdirnames(0, -1), seek(0, 0, io.SeekStart), readdir(0, 2),
		}},
		{name: "readdir-after-new-entries-rewind", ops: []op{
			open(0, "docs"), readdirnames(0, -1), writeFile("docs/zzz", "z", 0o644), remove("docs/guide.md"), readdirnames(0, -1), seek(0, 0, io.SeekStart), readdirnames(0, -1),
			seek(0, 0, io.SeekStart), readDirH(0, 1), seek(0, 0, io.SeekStart), readdir(0, -1),
		}},
		{name: "readdir-root-rewind", ops: []op{open(0, ""), listStep(0, 3), seek(0, 0, io.SeekStart), readdirnames(0, 4), mkdir("zzz", 0o700), seek(0, 0, io.SeekStart), readdir(0, -1)}},
		{name: "readdir-on-file-steps", ops: []op{open(0, "go.mod"), listStep(0, 1), listStep(0, 0), listStep(0, -1), readDirH(0, 1), readdir(0, 1), read(0, 3)}},
		{name: "readdir-removed-dir", ops: []op{open(0, "empty"), remove("empty"), readdirnames(0, -1), readdir(0, 1), open(1, "a/b/c/d"), removeAll("a"), readDirH(1, -1), fstat(1)}},
		{name: "names", ops: []op{
			open(0, "./README.md"), hname(0), open(1, "internal/../go.mod"), hname(1), open(2, "internal//util/util.go"), hname(2), open(3, "internal/."), hname(3), readdirnames(3, -1),
			stat("internal/util/."), stat("internal/util/./"), stat("README.md/."), stat("nope/."), lstat("link-to-internal/."), lstat("dangling/."),
		}},
		{name: "odd-bytes", ops: []op{
			writeFile("new\nline", "nl", 0o644), writeFile("bad\xff\xfeutf8", "bad", 0o644), writeFile(" lead", "sp", 0o644), writeFile("trail ", "sp", 0o644),
			writeFile("tab\there", "t", 0o644), writeFile("back\\slash", "b", 0o644), writeFile("quote\"s", "q", 0o644), writeFile("*?[", "glob", 0o644),
			readdirnamesOf(""), mkdir("dir\xc3\x28", 0o755), rename("bad\xff\xfeutf8", "dir\xc3\x28/\x80"), readdirnamesOf("dir\xc3\x28"), stat("dir\xc3\x28/\x80"),
		}},
		{name: "long-components", ops: []op{
			mkdir(long255, 0o755), mkdir(long256, 0o755), symlink("x", long256), symlink(long256, "lnk"), stat("lnk"), rename("README.md", long256),
			rename(long256, "x"), remove(long256), removeAll(long256), chmod(long256, 0o644), chtimes(long256, t1), readlink(long256),
			openFile(0, long256, rdonly, 0), openFile(1, long256, rdwr|creat, 0o644), writeFile(long255+"/"+long255, "ok", 0o644), lstat(long255 + "/" + long255),
			mkdirAll(long255+"/"+long256+"/x", 0o755), hardLink("go.mod", long256), hardLink(long256, "q"),
		}},
		{name: "path-max", ops: []op{
			stat(deep), lstat(deep), readFile(deep), writeFile(deep+"x", "x", 0o644), mkdir(deep+"d", 0o755), remove(deep), removeAll(deep + "q"),
			rename(deep, "x"), rename("go.mod", deep+"y"), chmod(deep, 0o600), readlink(deep), symlink(deep, "ok-long-target"), readlink("ok-long-target"),
			symlink(strings.Repeat("t", 4096), "too-long-target"), symlink(strings.Repeat("t", 4095), "max-target"), readlink("max-target"), stat("max-target"),
		}},
		{name: "rename-self-and-links", ops: []op{
			hardLink("README.md", "hard"), rename("README.md", "hard"), lstat("README.md"), lstat("hard"), statFull("hard", false),
			rename("README.md", "README.md/"), rename("empty", "empty/"), rename("empty/", "empty"), rename("internal", "internal/"), rename("internal/", "internal/util/x"),
			rename("empty", "."), rename(".", "x"), rename("empty", ".."), rename("internal/..", "x"), rename("empty", ""),
		}},
		{name: "rename-dir-forms", ops: []op{
			rename("cmd", "empty/"), lstat("empty/tool"), rename("docs/", "scripts"), rename("docs", "private/"), rename("a/b", "a/b/"), rename("a/b/", "a/z/"), lstat("a/z/c"),
			rename("a", "link-to-internal"), rename("a", "dangling"), lstat("a"), lstat("dangling/b"),
		}},
		{name: "rename-over-symlinks", ops: []op{
			rename("empty", "link-to-internal"), rename("empty", "link-to-readme"), rename("empty", "dangling"), rename("link-to-internal", "empty"),
			rename("link-to-readme", "internal"), rename("go.mod", "link-to-internal"), lstat("link-to-internal"), lstat("internal"),
			rename("main.go", "link-to-internal/"), rename("docs", "link-to-readme/"), rename("link-to-readme/", "x"), rename("empty", "loop"), symlink("loop", "loop"),
			rename("empty", "loop"), rename("README.md", "loop/x"), rename("loop/", "y"), lstat("loop"), lstat("empty"),
		}},
		{name: "root-forms", ops: []op{
			rename("", "x"), rename("", "internal/x"), rename("", ""), rename("", "nodir/x"), rename("README.md", ""), rename("nope", ""), rename("README.md/", ""), rename("internal", ""),
			rename("internal/..", "x"), rename("internal", "internal/.."), rename("", "internal/.."), rename("", "README.md/x"), remove(""), removeAll("internal/.."), lstat(""), chmod("", 0o700), lstat(""),
			chtimes("", t1), mtime(""), chown("", 5, 6), owner(""), mkdir("", 0o755), mkdirAll("", 0o755), symlink("x", ""), hardLink("README.md", ""), hardLink("", "x"),
			openFile(0, "", wronly, 0), openFile(1, "", rdonly|creat, 0o644), openFile(2, "", rdonly|trunc, 0), readlink(""),
		}},
		{name: "chtimes-range", ops: []op{
			chtimes("go.mod", time.Unix(-1, 5)), mtime("go.mod"), chtimes("go.mod", time.Date(1902, 1, 1, 0, 0, 0, 1, time.UTC)), mtime("go.mod"), // ext4 keeps 1901 to 2446
			chtimes("go.mod", time.Date(2200, 6, 7, 8, 9, 10, 999999999, time.FixedZone("x", 3600))), mtime("go.mod"), chtimes("go.mod", time.Unix(0, 0)), mtime("go.mod"),
			chtimes("internal", time.Unix(1e9, 123456789).Local()), mtime("internal"), chtimesPair("go.mod", time.Time{}, time.Unix(5, 0)), mtime("go.mod"),
			chtimesPair("main.go", time.Unix(5, 0), time.Time{}), mtime("main.go"), chtimes("link-to-readme", time.Unix(7, 7)), mtime("README.md"), mtime("link-to-readme"),
		}},
		{name: "nul-bytes", ops: []op{
			symlink("a\x00b", "l1"), symlink("x", "l\x002"), hardLink("README.md", "h\x00"), hardLink("REA\x00DME.md", "h"), rename("README.md", "r\x00"), rename("R\x00", "r"),
			chmod("go.mod\x00", 0o600), chown("go.mod\x00", 0, 0), chtimes("go.mod\x00", t1), removeAll("x\x00y"), remove("go.mod\x00"), mkdirAll("a\x00/b", 0o755), openFile(0, "n\x00", rdwr|creat, 0o644),
		}},
		{name: "misc-names", ops: []op{
			stat(long256 + "/x"), lstat("internal/" + long256 + "/x"), mkdirAll(long256+"/x", 0o755), writeFile("...", "three", 0o644), mkdir("....", 0o755),
			readdirnamesOf(""), stat(".../"), rename("...", "..../..."), readFile("..../..."), stat("internal/.../.."), stat("nope/.."), stat("README.md/.."),
			writeFile("-dash", "d", 0o644), writeFile("#hash", "h", 0o644), writeFile("~", "t", 0o644), readdirnamesOf(""),
		}},
		{name: "handle-flag-mixes", ops: []op{
			openFile(0, "go.mod", rdonly|appnd, 0), truncH(0, 1), write(0, "x"), read(0, 3), writeAt(0, "x", 0),
			openFile(1, "main.go", wronly|appnd, 0), truncH(1, 4), write(1, "Z"), seek(1, 0, io.SeekCurrent), readAt(1, 2, 0), closeH(1),
			openFile(2, "README.md", rdwr|appnd|trunc, 0), write(2, "ab"), seek(2, 0, io.SeekStart), read(2, 10), writeAt(2, "q", 0), closeH(2),
			readFile("go.mod"), readFile("main.go"), readFile("README.md"),
		}},
		{name: "handles-over-replaced-names", ops: []op{
			open(0, "go.mod"), openFile(1, "go.mod", rdwr, 0), rename("main.go", "go.mod"), read(0, 6), write(1, "W"), readAt(1, 6, 0), fstatFull(1), readFile("go.mod"),
			openFile(2, "README.md", rdwr, 0), remove("README.md"), writeFile("README.md", "new one", 0o644), write(2, "old"), readAt(2, 5, 0), fstatFull(2), readFile("README.md"),
			openFile(3, "internal/util/util.go", wronly|appnd, 0), removeAll("internal"), write(3, "gone"), fstatFull(3), mkdirAll("internal/util", 0o755), readdirnamesOf("internal/util"),
			open(4, "docs"), rename("docs", "d2"), mkdir("docs", 0o755), readdirnames(4, -1), fstatFull(4),
		}},
		{name: "remove-dots", ops: []op{remove("."), // root/.. is outside the root: refused (ErrOutsideRoot), not os's ENOTEMPTY
			remove("internal/."), remove("internal/.."), remove("empty/."), remove("empty/../empty"), lstat("empty"), remove("internal")}},
		{name: "removeall-forms", ops: []op{
			removeAll("missing"), removeAll("missing/x"), removeAll("README.md/x"), removeAll("link-to-internal/util"), lstat("internal/util"), removeAll("link-to-internal/"),
			lstat("link-to-internal"), lstat("internal"), removeAll("docs/."), lstat("docs"), removeAll("cmd/.."), lstat("cmd"), removeAll("dangling"), lstat("dangling"),
		}},
		{name: "mkdir-modes", ops: []op{
			mkdir("st", fs.ModeSticky|0o777), mkdir("sg", fs.ModeSetgid|0o755), mkdir("su", fs.ModeSetuid|0o755), mkdir("all", fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky|0o777),
			mkdir("raw", 0o7777), lstat("st"), lstat("sg"), lstat("su"), lstat("all"), lstat("raw"), mkdirAll("ma/b", fs.ModeSticky|fs.ModeSetgid|0o750), lstat("ma"), lstat("ma/b"),
			mkdir("sg/in", 0o700), lstat("sg/in"), mkdir("typ", fs.ModeDir|0o755), lstat("typ"), mkdir("sym", fs.ModeSymlink|0o755), lstat("sym"),
		}},
		{name: "create-modes", ops: []op{
			writeFile("su", "x", fs.ModeSetuid|0o755), writeFile("sg", "x", fs.ModeSetgid|0o755), writeFile("st", "x", fs.ModeSticky|0o644), writeFile("raw", "x", 0o7777),
			lstat("su"), lstat("sg"), lstat("st"), lstat("raw"), writeFile("dirbit", "x", fs.ModeDir|0o644), lstat("dirbit"), writeFile("sockbit", "x", fs.ModeSocket|0o644), lstat("sockbit"),
		}},
		{name: "chmod-modes", ops: []op{
			chmod("README.md", fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky|0o755), lstat("README.md"), chmod("internal", fs.ModeSetgid|fs.ModeSticky|0o700), lstat("internal"),
			chmod("go.mod", fs.ModeDir|0o600), lstat("go.mod"), chmod("main.go", 0o7777), lstat("main.go"), chmod("empty", fs.ModeSymlink|fs.ModeSetuid|0o751), lstat("empty"),
			chmod("link-to-readme", fs.ModeSticky|0o600), lstat("README.md"), lstat("link-to-readme"),
		}},
		{name: "chown-forms", ops: []op{chown("README.md", -1, 5), owner("README.md"), chown("README.md", 6, -1), owner("README.md"), chown("dangling", -1, -1), chown("nope", -1, -1), chown("README.md", -2, -1), owner("README.md")}},
		{name: "symlink-forms", ops: []op{
			symlink("", "e"), symlink("x", ""), symlink("x", "."), symlink("x", "internal/.."), symlink("x", "empty/."), symlink("x", "new/"), symlink("t", "link-to-internal/"), symlink("t", "dangling/"),
			readlink(""), readlink("."), readlink("link-to-internal/."), stat("dangling"), stat("link-to-readme/"),
			// The target is read first: ENOENT or ENAMETOOLONG before EEXIST, ENOENT of the parent, or outside the root.
			symlink("", "README.md"), symlink("", "nodir/x"), symlink("", "../outside-cowfs-edges"), symlink("", long256+"/x"),
			symlink(strings.Repeat("t", 4096), "README.md"), symlink(strings.Repeat("t", 4096), "nodir/x"), symlink(strings.Repeat("t", 5000), "../outside-cowfs-edges"),
		}},
		{name: "link-forms", ops: []op{
			hardLink("internal", "li"), hardLink("empty", "le"), hardLink("link-to-internal", "ll"), lstat("ll"), hardLink("dangling", "ld"), lstat("ld"), readlink("ld"),
			hardLink("link-to-readme/", "lr"), hardLink("README.md", "README.md"), hardLink("README.md", "link-to-readme"), hardLink("nope", "x"), hardLink("README.md", "nope/x"), hardLink("README.md", "go.mod/x"),
			hardLink("README.md", ""), hardLink("", "x"),
		}},
	})
}

// TestHugeFileGrowth: a truncation or a write past the largest file the
// layer holds (its bytes are in memory: half the machine's memory) fails
// with EFBIG, as os does past its file system's largest file (ext4: 16
// TiB), instead of an allocation that kills the process. Where os's file
// system takes the size (tmpfs, or below ext4's limit), only the overlay's
// side is checked: EFBIG, and the file unchanged.
func TestHugeFileGrowth(t *testing.T) {
	orig := origTree(t, "small")
	for _, size := range []int64{1 << 40, 1 << 50, math.MaxInt64 - 1} {
		for _, how := range []string{"Truncate", "WriteAt", "Seek+Write"} {
			copyDir := osCopy(t, orig)
			c := newCow(t, orig)
			grow := func(root string, fsys afero.Fs) error {
				f, err := fsys.OpenFile(root+"/a", os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				switch how {
				case "Truncate":
					return f.Truncate(size)
				case "WriteAt":
					_, err := f.WriteAt([]byte("x"), size)
					return err
				}
				if _, err := f.Seek(size, io.SeekStart); err != nil {
					return err
				}
				_, err = f.Write([]byte("x"))
				return err
			}
			got := grow(c.Root(), c)
			if !errors.Is(got, syscall.EFBIG) {
				t.Errorf("%s(%d): got %v, want EFBIG", how, size, got)
			}
			var pe *fs.PathError
			if !errors.As(got, &pe) || pe.Path != c.Root()+"/a" {
				t.Errorf("%s(%d): got %#v, want an *fs.PathError naming the file", how, size, got)
			}
			if data, err := afero.ReadFile(c, c.Root()+"/a"); err != nil || string(data) != "alpha\n" {
				t.Errorf("%s(%d): a now holds %q, %v; want it unchanged", how, size, data, err)
			}
			if size < 1<<44 || how == "Seek+Write" {
				// ext4 and tmpfs take the size, and tmpfs the offset
				// (ext4's Seek says EINVAL): the overlay's limit is its own.
				continue
			}
			if want := grow(copyDir, osTarget{}); want != nil && describeErr(want, copyDir) != describeErr(got, c.Root()) {
				t.Errorf("%s(%d): got %s, os says %s", how, size, describeErr(got, c.Root()), describeErr(want, copyDir))
			}
		}
	}
}

// TestIOFSExactErrors: every io/fs call of the IOFS() view returns what
// os.DirFS of the os copy returns, errors compared whole (type, Op, Path,
// errno), on names valid, invalid and through symlinks, and on handles.
func TestIOFSExactErrors(t *testing.T) {
	orig := origTree(t, "project")
	c, copyDir := apply(t, orig, append(slices.Clone(mergedOps), symlink("nowhere", "docs/dangling2"), symlink("loop", "loop"), mkdir("nd", 0o755), writeFile("nd/f", "f", 0o644)))
	want, got := os.DirFS(copyDir), c.IOFS()
	names := []string{
		".", "README.md", "go.mod", "main.go", "internal", "internal/util", "a", "a/only-new.txt", "commands", "cmd", "docs", "nd", "nd/f",
		"link-to-readme", "link-to-internal", "link-to-internal/util", "dangling", "docs/dangling2", "loop", "loop/x", "internal/util/up",
		"internal/util/up/go.mod", "missing", "missing/x", "README.md/x", "README.md/", "internal/", "/README.md", "../README.md", "./README.md",
		"internal/../README.md", "internal//util", "", "a\x00b", "docs/my notes.txt", "private", "empty", "empty/.",
	}
	res := func(root string, err error) string { return describeErr(err, root) }
	for _, name := range names {
		calls := []struct {
			call string
			fn   func(fsys fs.FS) (string, error)
		}{
			{"Open", func(fsys fs.FS) (string, error) {
				f, err := fsys.Open(name)
				if err != nil {
					return "", err
				}
				defer f.Close()
				fi, err := f.Stat()
				if err != nil {
					return "", err
				}
				return info(fi), nil
			}},
			{"Stat", func(fsys fs.FS) (string, error) { fi, err := fs.Stat(fsys, name); return info(fi), err }},
			{"Lstat", func(fsys fs.FS) (string, error) { fi, err := fs.Lstat(fsys, name); return info(fi), err }},
			{"ReadFile", func(fsys fs.FS) (string, error) { b, err := fs.ReadFile(fsys, name); return string(b), err }},
			{"ReadLink", func(fsys fs.FS) (string, error) { s, err := fs.ReadLink(fsys, name); return s, err }},
			{"ReadDir", func(fsys fs.FS) (string, error) {
				des, err := fs.ReadDir(fsys, name)
				var out []string
				for _, de := range des {
					out = append(out, de.Name()+" "+de.Type().String())
				}
				return strings.Join(out, ","), err
			}},
			{"Read/ReadDir of handle", func(fsys fs.FS) (string, error) {
				f, err := fsys.Open(name)
				if err != nil {
					return "open failed", nil
				}
				buf := make([]byte, 4)
				n, rerr := f.Read(buf)
				var derr error
				if rd, ok := f.(fs.ReadDirFile); ok {
					_, derr = rd.ReadDir(-1)
				}
				var seekRes string
				if sk, ok := f.(io.Seeker); ok {
					fi, serr := f.Stat()
					isDir := serr == nil && fi.IsDir()
					for _, sa := range [][2]int64{{1, io.SeekStart}, {-1, io.SeekStart}, {2, io.SeekCurrent}, {-2, io.SeekEnd}, {0, 9}} {
						if isDir && sa[1] == io.SeekEnd {
							continue // ext4 takes it, tmpfs says EINVAL
						}
						off, err := sk.Seek(sa[0], int(sa[1]))
						if isDir && err == nil {
							off = 0 // a directory's offsets are file-system cookies
						}
						seekRes += fmt.Sprintf(" seek=%d,%s", off, res("", err))
					}
				} else {
					seekRes = " no Seek"
				}
				if ra, ok := f.(io.ReaderAt); ok {
					b := make([]byte, 3)
					n, err := ra.ReadAt(b, 2)
					n2, err2 := ra.ReadAt(b[:1], -1)
					seekRes += fmt.Sprintf(" readat=%d %q %s %d %s", n, b[:n], res("", err), n2, res("", err2))
				} else {
					seekRes += " no ReadAt"
				}
				cerr, cerr2 := f.Close(), f.Close()
				_, serr := f.Stat()
				return fmt.Sprintf("read=%d %q %s readdir=%s%s close=%s close2=%s stat=%s", n, buf[:n], res("", rerr), res("", derr), seekRes, res("", cerr), res("", cerr2), res("", serr)), nil
			}},
			{"Sub", func(fsys fs.FS) (string, error) {
				sub, err := fs.Sub(fsys, name)
				if err != nil {
					return "", err
				}
				if fsys == want {
					// fs.Sub's view has no Stat (fs.Stat then opens):
					// os.DirFS of the directory is the oracle.
					sub = os.DirFS(copyDir + "/" + name)
				}
				fi, err := fs.Stat(sub, "nd/f")
				return info(fi), err
			}},
		}
		for _, cl := range calls {
			w, werr := cl.fn(want)
			g, gerr := cl.fn(got)
			// os.DirFS's handles and ReadLink name the host path in
			// errors; IOFS keeps the io/fs name (fs's convention): only
			// that is not compared.
			ws, gs := w+" err="+res(copyDir, werr), g+" err="+res(c.Root(), gerr)
			ws = strings.ReplaceAll(strings.ReplaceAll(ws, "$ROOT/", ""), copyDir+"/", "")
			gs = strings.ReplaceAll(gs, c.Root()+"/", "")
			if ws != gs {
				t.Errorf("%s(%q):\n\twant %s\n\tgot  %s", cl.call, name, ws, gs)
			}
		}
	}
}

// mtimeMoved renders whether rel's modification time is still t (set by a
// Chtimes before) or moved: times themselves differ between the two sides.
func mtimeMoved(rel string, t time.Time) op {
	return op{fmt.Sprintf("Lstat(%q).ModTime() moved from %v", rel, t), func(e *env) string {
		fi, _, err := e.fs.LstatIfPossible(e.p(rel))
		if err != nil {
			return e.res(err, "")
		}
		return e.res(err, "moved=%v", !fi.ModTime().Equal(t))
	}}
}

// TestExactMtimes: which operations move which modification times, as on
// os: a directory's when an entry is made, removed or renamed in it; a
// file's when written or truncated, not when read, renamed, linked or
// chmodded.
func TestExactMtimes(t *testing.T) {
	dirs := []string{"", "internal", "internal/util", "docs", "empty", "cmd", "cmd/tool", "a/b"}
	files := []string{"README.md", "go.mod", "main.go", "docs/guide.md", "internal/util/util.go", "cmd/tool/main.go"}
	reset := func() []op {
		var ops []op
		for _, p := range append(slices.Clone(dirs), files...) {
			ops = append(ops, chtimes(p, t1))
		}
		return ops
	}
	check := func(paths []string) []op {
		var ops []op
		for _, p := range paths {
			ops = append(ops, mtimeMoved(p, t1))
		}
		return ops
	}
	steps := []struct {
		name string
		ops  []op
	}{
		{"create", []op{writeFile("internal/n", "n", 0o644)}},
		{"create-existing", []op{openFile(0, "go.mod", wronly|creat, 0o644), closeH(0)}},
		{"create-empty-trunc", []op{writeFile("docs/e", "", 0o644), chtimes("docs", t1), chtimes("docs/e", t1), openFile(0, "docs/e", wronly|trunc, 0), closeH(0), mtimeMoved("docs/e", t1)}},
		{"open-rdwr-no-write", []op{openFile(0, "go.mod", rdwr, 0), read(0, 3), closeH(0)}},
		{"write-nothing", []op{openFile(0, "go.mod", wronly, 0), write(0, ""), closeH(0)}},
		{"write", []op{openFile(0, "go.mod", wronly, 0), write(0, "x"), closeH(0)}},
		{"writeat", []op{openFile(0, "main.go", wronly, 0), writeAt(0, "x", 100), closeH(0)}},
		{"append", []op{openFile(0, "README.md", wronly|appnd, 0), write(0, "x"), closeH(0)}},
		{"truncate-same-size", []op{openFile(0, "go.mod", wronly, 0), truncH(0, 33), closeH(0)}},
		{"truncate", []op{openFile(0, "go.mod", wronly, 0), truncH(0, 3), closeH(0)}},
		{"o-trunc", []op{openFile(0, "go.mod", wronly|trunc, 0), closeH(0)}},
		{"mkdir", []op{mkdir("cmd/tool/x", 0o755)}},
		{"mkdirall", []op{mkdirAll("internal/util/p/q", 0o755)}},
		{"remove-file", []op{remove("docs/guide.md")}},
		{"remove-empty-dir", []op{remove("empty")}},
		{"removeall", []op{removeAll("internal/util")}},
		{"rename-file-same-dir", []op{rename("go.mod", "go2.mod")}},
		{"rename-file-across", []op{rename("go.mod", "docs/go.mod")}},
		{"rename-over", []op{rename("go.mod", "main.go")}},
		{"rename-dir-across", []op{rename("cmd/tool", "internal/tool")}},
		{"rename-onto-itself", []op{rename("go.mod", "go.mod")}},
		{"symlink", []op{symlink("x", "docs/l")}},
		{"link", []op{hardLink("go.mod", "docs/hl")}},
		{"chmod", []op{chmod("go.mod", 0o600), chmod("docs", 0o700)}},
		{"chown", []op{chown("go.mod", 1, 1), chown("docs", 1, 1)}},
		{"read-and-list", []op{readFile("go.mod"), readdirnamesOf("docs")}},
		{"failed-ops", []op{mkdir("docs", 0o755), remove("internal"), rename("cmd", "internal"), openFile(0, "go.mod", wronly|creat|excl, 0o644)}},
	}
	var scs []scenario
	for _, st := range steps {
		sc := scenario{name: st.name + "/dirs", ops: slices.Concat(reset(), st.ops, check(dirs))}
		scs = append(scs, sc, scenario{name: st.name + "/files", ops: slices.Concat(reset(), st.ops, check(files))})
	}
	runScenarios(t, scs)
}

// TestExactEmptyName: every call with the empty name, as os answers it
// (ENOENT, the name itself in the error), on a working directory inside
// the root.
func TestExactEmptyName(t *testing.T) {
	orig := origTree(t, "small")
	copyDir := osCopy(t, orig)
	c := newCow(t, orig)
	calls := map[string]func(fsys target) error{
		"Open":   func(fsys target) error { f, err := fsys.Open(""); closeIfFile(f); return err },
		"Create": func(fsys target) error { f, err := fsys.Create(""); closeIfFile(f); return err },
		"OpenFile": func(fsys target) error {
			f, err := fsys.OpenFile("", os.O_RDWR|os.O_CREATE, 0o644)
			closeIfFile(f)
			return err
		},
		"Stat":      func(fsys target) error { _, err := fsys.Stat(""); return err },
		"Lstat":     func(fsys target) error { _, _, err := fsys.LstatIfPossible(""); return err },
		"Mkdir":     func(fsys target) error { return fsys.Mkdir("", 0o755) },
		"MkdirAll":  func(fsys target) error { return fsys.MkdirAll("", 0o755) },
		"Remove":    func(fsys target) error { return fsys.Remove("") },
		"RemoveAll": func(fsys target) error { return fsys.RemoveAll("") },
		"Rename1":   func(fsys target) error { return fsys.Rename("", "x") },
		"Rename2":   func(fsys target) error { return fsys.Rename("a", "") },
		"Chmod":     func(fsys target) error { return fsys.Chmod("", 0o644) },
		"Chown":     func(fsys target) error { return fsys.Chown("", 0, 0) },
		"Chtimes":   func(fsys target) error { return fsys.Chtimes("", t1, t1) },
		"Chtimes0":  func(fsys target) error { return fsys.Chtimes("", time.Time{}, time.Time{}) },
		"Symlink1":  func(fsys target) error { return fsys.SymlinkIfPossible("a", "") },
		"Readlink":  func(fsys target) error { _, err := fsys.ReadlinkIfPossible(""); return err },
	}
	for _, dir := range []string{"", "/d"} {
		for name, call := range calls {
			t.Chdir(copyDir + dir)
			want := describeErr(call(osTarget{}), copyDir)
			t.Chdir(c.Root() + dir)
			got := describeErr(call(c), c.Root())
			if want != got {
				t.Errorf("%s(\"\") in %q: got %s, want %s", name, "."+dir, got, want)
			}
		}
	}
	if err := errors.Join(diffTrees(mustWalk(t, osTarget{}, copyDir), mustWalk(t, c, c.Root()))...); err != nil {
		t.Error(err)
	}
}

func closeIfFile(f afero.File) {
	if f != nil {
		f.Close()
	}
}

// TestDirTimesLifecycle: the directory times the layer keeps follow
// Snapshot, Restore and Fork as the rest of the view does (the view's
// Stat before a change is the oracle after a Restore), and after a
// Commit the view's times are the real directories' (os.Stat).
func TestDirTimesLifecycle(t *testing.T) {
	root := t.TempDir()
	writeTree(t, "small", root+"/r")
	root += "/r"
	c := newCow(t, root)
	at := func(fsys afero.Fs, rel string) time.Time {
		t.Helper()
		fi, err := fsys.Stat(root + "/" + rel)
		if err != nil {
			t.Fatal(err)
		}
		return fi.ModTime()
	}
	d0 := at(c, "d")
	s := c.Snapshot()
	time.Sleep(10 * time.Millisecond) // the clock must move for a change to show
	if err := afero.WriteFile(c, root+"/d/new", []byte("n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d1 := at(c, "d")
	if d1.Equal(d0) {
		t.Fatalf("d's mtime did not move with a new entry: %v", d1)
	}
	fork := c.Fork()
	c.Restore(s)
	if got := at(c, "d"); !got.Equal(d0) {
		t.Errorf("after Restore: d's mtime %v, want %v as at the Snapshot", got, d0)
	}
	if got := at(fork, "d"); !got.Equal(d1) {
		t.Errorf("the Fork: d's mtime %v, want %v as when forked", got, d1)
	}
	if err := fork.Remove(root + "/d/c"); err != nil {
		t.Fatal(err)
	}
	if got := at(c, "d"); !got.Equal(d0) {
		t.Errorf("a change in the Fork moved c's d to %v", got)
	}
	if err := fork.Commit(); err != nil {
		t.Fatal(err)
	}
	if real, got := at(afero.NewOsFs(), "d"), at(fork, "d"); !got.Equal(real) {
		t.Errorf("after Commit: the view says %v, the real directory %v", got, real)
	}
}
