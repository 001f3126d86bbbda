//go:build linux

package overlayfs_test

// Operation classes of the random differential beyond names, handles and
// modes: hard links (with writes, renames, metadata and handles through
// their names), symlink targets of every form (absolute ones into and out
// of the root, mapped per side), and directory times. Each is validated
// os against os by TestRandomOracleSelfCheck.

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// randAbsTargets are symlink targets naming places absolutely or oddly:
// "$ROOT" stands for the side's root, "$DIR" for the directory holding
// it (each side has its own); long ones reach PATH_MAX (a target of 4,095
// bytes is allowed, one of 4,096 is ENAMETOOLONG) or NAME_MAX.
var randAbsTargets = []string{
	"$ROOT/a", "$ROOT/d", "$ROOT/d/", "$ROOT", "$ROOT/", "$ROOT/d/../a", "$ROOT/l", "$ROOT/new", "$ROOT/nope/x",
	"$ROOT/ld/b", "$ROOT/../root/d", "$ROOT/self", "$DIR/outside.txt", "$DIR/outdir", "$DIR/outdir/o", "$DIR/nothing",
	"", "a//b", "d//b", "d/.", "d/..", "d//", "./", "d/./c", "a/", "a/.", "dir/sub/top/d",
	strings.Repeat("./", 2046) + "a",            // 4,093 bytes, resolves to a
	strings.Repeat("d/../", 818) + "d/b",        // 4,093 bytes, through d 818 times
	strings.Repeat("./", 2047) + "ab",           // 4,096 bytes: ENAMETOOLONG
	strings.Repeat("n", 256),                    // a component longer than NAME_MAX
	strings.Repeat("n", 255),                    // as long as a component may be
	"$ROOT/" + strings.Repeat("./", 2000) + "d", // long through the root's real path
}

// mapTarget puts the side's root and its parent into a target.
func (e *env) mapTarget(target string) string {
	if rest, ok := strings.CutPrefix(target, "$ROOT"); ok {
		return e.root + rest
	}
	if rest, ok := strings.CutPrefix(target, "$DIR"); ok {
		return filepath.Dir(e.root) + rest
	}
	return target
}

// unmapTarget is mapTarget's inverse, for what Readlink returns.
func (e *env) unmapTarget(target string) string { return unmapTarget(target, e.root) }

// shortDesc abbreviates a long name or target in an op's description.
func shortDesc(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%s...(%d bytes)", s[:24], len(s))
	}
	return s
}

// symlinkMapped is Symlink with a target from randAbsTargets, mapped to
// the side; the link is then read back, and stat'ed through.
func symlinkMapped(target, rel string) op {
	return op{fmt.Sprintf("Symlink(%q, %q); Readlink; Stat", shortDesc(target), rel), func(e *env) string {
		err := e.fs.SymlinkIfPossible(e.mapTarget(target), e.p(rel))
		// The error names the target as given, each side's own.
		s := strings.ReplaceAll(e.res(err, ""), filepath.Dir(e.root), "$DIR")
		if err != nil {
			return s
		}
		got, rerr := e.fs.ReadlinkIfPossible(e.p(rel))
		fi, serr := e.fs.Stat(e.p(rel))
		return s + fmt.Sprintf("; readlink=%s %q; stat=%s %s", describeErr(rerr, e.root), shortDesc(e.unmapTarget(got)), describeErr(serr, e.root), info(fi))
	}}
}

// readlinkMapped is Readlink with the side's root and its parent taken
// out of the target.
func readlinkMapped(rel string) op {
	return op{fmt.Sprintf("Readlink(%q)", rel), func(e *env) string {
		s, err := e.fs.ReadlinkIfPossible(e.p(rel))
		return e.res(err, "target=%q", shortDesc(e.unmapTarget(s)))
	}}
}

// rootLinkProbe makes a symlink to "/" (or another absolute place outside
// both sides, the same on each), reads through it, and removes it again
// in the same step: no later op may write through it to the real file
// system.
func rootLinkProbe(target, rel, through string) op {
	return op{fmt.Sprintf("Symlink(%q, %q); Lstat, Stat, Readlink, Lstat(%q); Remove", target, rel, through), func(e *env) string {
		err := e.fs.SymlinkIfPossible(target, e.p(rel))
		s := e.res(err, "")
		if err != nil {
			return s
		}
		lfi, _, lerr := e.fs.LstatIfPossible(e.p(rel))
		fi, serr := e.fs.Stat(e.p(rel))
		tgt, rerr := e.fs.ReadlinkIfPossible(e.p(rel))
		tfi, _, terr := e.fs.LstatIfPossible(e.p(rel + "/" + through))
		mode := func(fi fs.FileInfo) string {
			if fi == nil {
				return "nil"
			}
			return fi.Mode().String()
		}
		s += fmt.Sprintf("; lstat=%s %s; stat=%s %s; readlink=%s %q; through=%s %s; remove=%s",
			describeErr(lerr, e.root), info(lfi), describeErr(serr, e.root), mode(fi), describeErr(rerr, e.root), tgt,
			describeErr(terr, e.root), mode(tfi), describeErr(e.fs.Remove(e.p(rel)), e.root))
		return s
	}}
}

// linkWriteRead links old to new, appends data through old and reads
// new back, then Lstats both (their link counts).
func linkWriteRead(oldRel, newRel, data string) op {
	l := hardLink(oldRel, newRel)
	return op{l.desc + fmt.Sprintf("; append %q to the old; read the new; Lstat both", data), func(e *env) string {
		s := l.run(e)
		if !strings.HasPrefix(s, "err=nil") {
			return s
		}
		if fi, err := e.fs.Stat(e.p(oldRel)); err != nil || !fi.Mode().IsRegular() {
			return s + "; not a regular file: " + describeErr(err, e.root) // a FIFO would block
		}
		f, err := e.fs.OpenFile(e.p(oldRel), os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, err = f.Write([]byte(data))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		s += "; append=" + describeErr(err, e.root)
		var data []byte
		g, err := e.fs.Open(e.p(newRel))
		if err == nil {
			data, err = io.ReadAll(g)
			g.Close()
		}
		s += fmt.Sprintf("; read=%s %q", describeErr(err, e.root), data)
		for _, n := range []string{oldRel, newRel} {
			fi, _, err := e.fs.LstatIfPossible(e.p(n))
			s += fmt.Sprintf("; lstat %s=%s %s", n, describeErr(err, e.root), info(fi))
		}
		return s
	}}
}

// dirTime renders the time class of rel's modification time, by Lstat
// and by Stat, for a directory (others: their type).
func dirTime(rel string) op {
	return op{fmt.Sprintf("dir time of %q", rel), func(e *env) string {
		var out []string
		for _, follow := range []bool{false, true} {
			var fi fs.FileInfo
			var err error
			if follow {
				fi, err = e.fs.Stat(e.p(rel))
			} else {
				fi, _, err = e.fs.LstatIfPossible(e.p(rel))
			}
			switch {
			case err != nil:
				out = append(out, describeErr(err, e.root))
			case fi.IsDir():
				out = append(out, "dir mtime="+timeClass(fi.ModTime()))
			default:
				out = append(out, fi.Mode().Type().String())
			}
		}
		return "lstat: " + out[0] + "; stat: " + out[1]
	}}
}

// dirTimesOf renders the time class of every directory in tree (a walk of
// root through fsys) that is a directory in other too (the trees'
// comparison reports the rest), keyed as the tree is.
func dirTimesOf(fsys target, root string, tree, other map[string]entry) map[string]string {
	m := map[string]string{}
	for k, e := range tree {
		if !e.mode.IsDir() || !other[k].mode.IsDir() {
			continue
		}
		p := root
		if k != "." {
			p = root + "/" + k
		}
		fi, _, err := fsys.LstatIfPossible(p)
		if err != nil {
			m[k] = "lstat: " + errClass(err)
			continue
		}
		m[k] = timeClass(fi.ModTime())
	}
	return m
}

// diffDirTimes reports every directory whose time class differs.
func diffDirTimes(want, got map[string]string) []error {
	var errs []error
	for _, k := range sortedKeys(want, got) {
		if w, g := want[k], got[k]; w != g {
			errs = append(errs, fmt.Errorf("dir time: %s: want %s, got %s", k, w, g))
		}
	}
	return errs
}

// linkRename links old to new, then renames one name over the other
// (POSIX: names of one file, so nothing happens, and both stay) and
// Lstats both.
func linkRename(oldRel, newRel string, back bool) op {
	l := hardLink(oldRel, newRel)
	from, to := oldRel, newRel
	if back {
		from, to = newRel, oldRel
	}
	r := rename(from, to)
	return op{l.desc + "; " + r.desc + "; Lstat both", func(e *env) string {
		s := l.run(e)
		if !strings.HasPrefix(s, "err=nil") {
			return s // only names of one file (never a directory holding the root)
		}
		s += "; " + r.run(e)
		for _, n := range []string{oldRel, newRel} {
			fi, _, err := e.fs.LstatIfPossible(e.p(n))
			s += fmt.Sprintf("; lstat %s=%s %s", n, describeErr(err, e.root), info(fi))
		}
		return s
	}}
}

// linkMeta links old to new, changes the mode and times through one name
// and reads them through the other, then removes the first name and
// Lstats the second (its link count).
func linkMeta(oldRel, newRel string, mode fs.FileMode, mt time.Time) op {
	l := hardLink(oldRel, newRel)
	return op{l.desc + fmt.Sprintf("; Chmod(old, %v); Chtimes(new, %v); Lstat both; Remove(old); Lstat(new)", mode, mt), func(e *env) string {
		s := l.run(e)
		if !strings.HasPrefix(s, "err=nil") {
			return s
		}
		s += "; chmod=" + describeErr(e.fs.Chmod(e.p(oldRel), mode), e.root)
		s += "; chtimes=" + describeErr(e.fs.Chtimes(e.p(newRel), mt, mt), e.root)
		for _, n := range []string{oldRel, newRel} {
			fi, _, err := e.fs.LstatIfPossible(e.p(n))
			s += fmt.Sprintf("; lstat %s=%s %s", n, describeErr(err, e.root), info(fi))
			if err == nil && !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
				s += " mtime=" + fi.ModTime().UTC().Format(time.RFC3339Nano)
			}
		}
		s += "; remove=" + describeErr(e.fs.Remove(e.p(oldRel)), e.root)
		fi, _, err := e.fs.LstatIfPossible(e.p(newRel))
		return s + fmt.Sprintf("; lstat new=%s %s", describeErr(err, e.root), info(fi))
	}}
}

// handleLink opens old (read-only, or read-write), links it to new,
// writes through new (truncating or appending) and reads through the
// handle opened before: one file, whichever name and handle.
func handleLink(slot int, oldRel, newRel string, rw, trunc bool, data string) op {
	flag, newFlag := os.O_RDONLY, os.O_WRONLY|os.O_APPEND
	if rw {
		flag = os.O_RDWR
	}
	if trunc {
		newFlag = os.O_WRONLY | os.O_TRUNC
	}
	o, l := openFile(slot, oldRel, flag, 0), hardLink(oldRel, newRel)
	return op{fmt.Sprintf("%s; %s; write %q through the new (%s); read #%d from 0; Stat #%d", o.desc, l.desc, data, flagString(newFlag), slot, slot), func(e *env) string {
		if fi, err := e.fs.Stat(e.p(oldRel)); err != nil || !fi.Mode().IsRegular() {
			return "not a regular file: " + describeErr(err, e.root) // a FIFO would block
		}
		s := o.run(e)
		if !strings.HasPrefix(s, "err=nil") {
			return s
		}
		ls := l.run(e)
		s += "; " + ls
		if !strings.HasPrefix(ls, "err=nil") {
			return s
		}
		f, err := e.fs.OpenFile(e.p(newRel), newFlag, 0)
		if err == nil {
			_, err = f.Write([]byte(data))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		s += "; write=" + describeErr(err, e.root)
		h := e.handles[slot]
		buf := make([]byte, 64)
		n, err := h.ReadAt(buf, 0)
		s += fmt.Sprintf("; read=%s %q", describeErr(err, e.root), buf[:max(n, 0)])
		fi, err := h.Stat()
		return s + fmt.Sprintf("; stat=%s %s", describeErr(err, e.root), info(fi))
	}}
}
