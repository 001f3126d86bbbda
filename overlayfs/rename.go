package overlayfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Rename renames oldname to newname with POSIX rules, for lower and layer
// files and directories alike. A lower directory is moved by listing its
// subtree into the layer; file contents are not read (they stay lazy
// references to the lower). Cost: O(size of the moved subtree).
func (f *Fs) Rename(oldname, newname string) error {
	if ro, rn := f.route(oldname), f.route(newname); ro != rn {
		return linkErr("rename", oldname, newname, errXDev)
	} else if ro != nil {
		return ro.Rename(oldname, newname)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.renameCheckLocked(oldname, newname); err != nil {
		return err
	}
	// The kernel resolves the old name's parent (for "x/." x itself),
	// then the new name's.
	lo, err := f.resolveEntry("rename", oldname)
	if err == nil && lo.last != lastNorm {
		err = f.parentCheckLocked(lo)
	}
	if err != nil {
		return asLinkErr("rename", oldname, newname, err)
	}
	ln, err := f.resolveEntry("rename", newname)
	if err == nil && ln.last != lastNorm {
		err = f.parentCheckLocked(ln)
	}
	if err != nil {
		return asLinkErr("rename", oldname, newname, err)
	}
	if !lo.inside || !ln.inside {
		switch {
		case !f.opts.outsideWrites:
			return linkErr("rename", oldname, newname, ErrOutsideRoot)
		case lo.inside != ln.inside:
			// The kernel resolves both parents before it compares mounts.
			for _, l := range []loc{lo, ln} {
				if err := f.parentCheckLocked(l); err != nil {
					return asLinkErr("rename", oldname, newname, err)
				}
			}
			return linkErr("rename", oldname, newname, errXDev)
		}
		return asLinkErr("rename", oldname, newname, os.Rename(lo.host, ln.host))
	}
	// Both parents resolved: the kernel refuses "." and "..".
	if lo.last != lastNorm || ln.last != lastNorm || lo.rel == "" || ln.rel == "" {
		return linkErr("rename", oldname, newname, syscall.EBUSY)
	}
	no, err := f.final(lo)
	if err != nil {
		return asLinkErr("rename", oldname, newname, err)
	}
	nn, err := f.final(ln)
	if err != nil {
		return asLinkErr("rename", oldname, newname, err)
	}
	switch {
	case !no.exists():
		return linkErr("rename", oldname, newname, errNoEnt)
	case no.kind != kindDir && (lo.slash || ln.slash):
		return linkErr("rename", oldname, newname, errNotDir)
	case no.kind == kindDir && strings.HasPrefix(ln.rel, lo.rel+"/"):
		return linkErr("rename", oldname, newname, errInval)
	case nn.exists() && strings.HasPrefix(lo.rel, ln.rel+"/"):
		return linkErr("rename", oldname, newname, errNotEmpty)
	case lo.rel == ln.rel:
		return nil
	case no.kind == kindDir && nn.exists() && nn.kind != kindDir:
		return linkErr("rename", oldname, newname, errNotDir)
	case no.kind != kindDir && nn.kind == kindDir:
		return linkErr("rename", oldname, newname, errIsDir)
	case no.kind == kindDir && nn.kind == kindDir:
		ents, err := f.listLocked(ln.rel, nn)
		if err != nil {
			return asLinkErr("rename", oldname, newname, err)
		}
		if len(ents.names) > 0 {
			return linkErr("rename", oldname, newname, errNotEmpty)
		}
	}
	moved, err := f.subtreeLocked(lo.rel, no)
	if err != nil {
		return asLinkErr("rename", oldname, newname, err)
	}
	// Take the source out without dropping the contents being moved.
	var keys []string
	f.eachBelow(lo.rel, true, func(k string, _ entry) bool { keys = append(keys, k); return true })
	for _, k := range keys {
		f.paths.Delete(k)
	}
	f.whiteoutLocked(lo.rel, lo.visible, no)
	if nn.exists() {
		f.unlinkLocked(ln.rel, ln.visible, nn)
	}
	for _, m := range moved {
		f.paths.Set(join(ln.rel, m.sub), m.e)
	}
	if no.kind == kindDir {
		f.movedLocked(lo.rel, ln.rel)
	}
	return nil
}

// renameCheckLocked is os.Rename's own check, made before the system call:
// an existing directory (as Lstat sees newname) is refused as the target
// with EEXIST, unless it is oldname itself; a bad oldname is named first.
func (f *Fs) renameCheckLocked(oldname, newname string) error {
	ln, err := f.resolve("rename", newname, false)
	if err != nil {
		return nil
	}
	newFi, newNode, ok := f.lstatLoc(ln)
	if !ok || !(newNode.kind == kindDir || newFi != nil && newFi.IsDir()) {
		return nil
	}
	lo, err := f.resolve("rename", oldname, false)
	if err != nil {
		return asLinkErr("rename", oldname, newname, err)
	}
	oldFi, oldNode, ok := f.lstatLoc(lo)
	switch {
	case !ok && lo.inside:
		return linkErr("rename", oldname, newname, errNoEnt)
	case !ok:
		_, err := os.Lstat(lo.host)
		return asLinkErr("rename", oldname, newname, err)
	case lo.inside && lo.dirOnly && oldNode.kind != kindDir:
		return linkErr("rename", oldname, newname, errNotDir)
	}
	same := lo.inside && ln.inside && lo.rel == ln.rel ||
		!lo.inside && !ln.inside && os.SameFile(oldFi, newFi)
	if newname == oldname || !same {
		return linkErr("rename", oldname, newname, errExist)
	}
	return nil
}

// lstatLoc is what Lstat finds at a resolved name: the node inside the
// root, the FileInfo outside it; ok is false when nothing is there.
func (f *Fs) lstatLoc(l loc) (fs.FileInfo, node, bool) {
	if !l.inside {
		fi, err := os.Lstat(l.host)
		return fi, node{}, err == nil
	}
	n, err := f.final(l)
	return nil, n, err == nil && n.exists()
}

// parentCheckLocked returns the error of resolving the directory in which
// the last component of l is looked up ("x" itself for "x/." or "x/.."),
// or nil.
func (f *Fs) parentCheckLocked(l loc) error {
	if l.inside {
		if l.last != lastNorm {
			return f.dirCheck(l)
		}
		return nil // resolveEntry resolved the parent
	}
	dir := filepath.Dir(l.host)
	if l.last != lastNorm {
		dir = l.host
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return err
	case !fi.IsDir():
		return errNotDir
	}
	return nil
}

type movedEntry struct {
	sub string // path below the moved root ("" for the root itself)
	e   entry
}

// subtreeLocked returns the merged view of rel and everything below it as
// layer entries, parents first. Directories become opaque: the moved tree
// is exactly what is listed, nothing of the lower at the new place shows.
func (f *Fs) subtreeLocked(rel string, n node) ([]movedEntry, error) {
	var out []movedEntry
	var add func(sub, rel string, n node) error
	add = func(sub, rel string, n node) error {
		e, err := f.copyUpLocked(rel, n)
		if err != nil {
			return err
		}
		if e.kind == kindDir {
			e.opaque = true
		}
		out = append(out, movedEntry{sub, e})
		if n.kind != kindDir {
			return nil
		}
		ents, err := f.listLocked(rel, n)
		if err != nil {
			return err
		}
		for i, name := range ents.names {
			if err := add(join(sub, name), join(rel, name), f.nodeOf(rel, n.under, ents, i)); err != nil {
				return err
			}
		}
		return nil
	}
	err := add("", rel, n)
	return out, err
}
