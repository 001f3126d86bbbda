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
	if err := f.faultLink("rename", oldname, newname); err != nil {
		return err
	}
	g, absOld := f.pick(oldname)
	h, absNew := f.pick(newname)
	if g != h {
		return linkErr("rename", oldname, newname, errXDev)
	}
	return g.rename(oldname, newname, absOld, absNew)
}

func (l *layer) rename(oldname, newname, absOld, absNew string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.renameCheckLocked(oldname, newname, absOld, absNew); err != nil {
		return err
	}
	// The kernel resolves the old name's parent (for "x/." x itself),
	// then the new name's.
	lo, err := l.renameLocLocked(oldname, absOld)
	if err != nil {
		return asLinkErr("rename", oldname, newname, err)
	}
	ln, err := l.renameLocLocked(newname, absNew)
	if err != nil {
		return asLinkErr("rename", oldname, newname, err)
	}
	if !lo.inside || !ln.inside {
		return asLinkErr("rename", oldname, newname, l.renameOutsideLocked(lo, ln))
	}
	// Both parents resolved: the kernel refuses "." and "..".
	if lo.last != lastNorm || ln.last != lastNorm {
		return linkErr("rename", oldname, newname, syscall.EBUSY)
	}
	if lo.rel == "" || ln.rel == "" {
		return asLinkErr("rename", oldname, newname, l.renameRootLocked(lo, ln))
	}
	no, err := l.final(lo)
	if err != nil {
		return asLinkErr("rename", oldname, newname, err)
	}
	nn, err := l.final(ln)
	if err != nil {
		return asLinkErr("rename", oldname, newname, err)
	}
	same, err := l.renameRuleLocked(lo, ln, no, nn)
	if err != nil || same {
		return asLinkErr("rename", oldname, newname, err)
	}
	return asLinkErr("rename", oldname, newname, l.moveLocked(lo, ln, no, nn))
}

// renameRootLocked is the error of a rename of the root by its own name
// or onto it, in rename(2)'s order: the root onto itself does nothing, the
// root into its subtree is EINVAL, a name onto the root (its ancestor)
// ENOTEMPTY once that name is found; the root moves nowhere else (EBUSY,
// as a mount point).
func (l *layer) renameRootLocked(lo, ln loc) error {
	switch {
	case lo.rel == "" && ln.rel == "":
		return nil
	case lo.rel == "":
		return errInval
	}
	no, err := l.final(lo)
	switch {
	case err != nil:
		return err
	case !no.exists():
		return errNoEnt
	case no.kind != kindDir && (lo.slash || ln.slash):
		return errNotDir
	}
	return errNotEmpty
}

// renameLocLocked resolves one name of a rename: its parent, or for "x/."
// and "x/.." the directory x, must resolve.
func (l *layer) renameLocLocked(name, abs string) (loc, error) {
	at, err := l.resolveEntry("rename", name, abs)
	if err == nil && at.last != lastNorm {
		err = l.parentCheckLocked(at)
	}
	return at, err
}

// renameOutsideLocked renames where one name or both lie outside the root:
// refused under the default policy, EXDEV across the root's edge, else
// passed through to os.
func (l *layer) renameOutsideLocked(lo, ln loc) error {
	switch {
	case !l.opts.outsideWrites:
		return ErrOutsideRoot
	case lo.inside != ln.inside:
		// The kernel resolves both parents before it compares mounts.
		for _, at := range []loc{lo, ln} {
			if err := l.parentCheckLocked(at); err != nil {
				return err
			}
		}
		return errXDev
	case lo.other != 0 || ln.other != 0:
		return errOtherRoot
	case l.reachesRoot(lo.host, true) || l.treeHoldsRoot(lo.host):
		// As a target, a root or a directory holding one is refused
		// already: os.Rename never replaces a directory (EEXIST). A tree
		// holding an alias of a root is refused too.
		return errRootBusy
	}
	return entryOutside(lo.host, func(from string) error {
		return entryOutside(ln.host, func(to string) error { return os.Rename(from, to) })
	})
}

// renameRuleLocked applies POSIX's rules to moving node no at lo onto ln,
// where nn is (or nothing is): the error the kernel gives, or same when
// both names are one entry, which rename leaves alone.
func (l *layer) renameRuleLocked(lo, ln loc, no, nn node) (same bool, err error) {
	switch {
	case !no.exists():
		return false, errNoEnt
	case no.kind != kindDir && (lo.slash || ln.slash):
		return false, errNotDir
	case no.kind == kindDir && strings.HasPrefix(ln.rel, lo.rel+"/"):
		return false, errInval // a directory into its own subtree
	case nn.exists() && strings.HasPrefix(lo.rel, ln.rel+"/"):
		return false, errNotEmpty // onto an ancestor
	case lo.rel == ln.rel || l.sameLinkedLocked(lo.rel, no, ln.rel, nn):
		return true, nil
	}
	if err := l.mayRenameLocked(lo, ln, no, nn); err != nil {
		return false, err
	}
	switch {
	case no.kind == kindDir && nn.exists() && nn.kind != kindDir:
		return false, errNotDir
	case no.kind != kindDir && nn.kind == kindDir:
		return false, errIsDir
	}
	if err := l.mayMoveDirLocked(lo, ln, no); err != nil {
		return false, err
	}
	if no.kind == kindDir && nn.kind == kindDir {
		return false, l.emptyDirLocked(ln.rel, nn)
	}
	return false, nil
}

// emptyDirLocked returns ENOTEMPTY unless the directory n at rel, which a
// rename replaces, is empty in the view.
func (l *layer) emptyDirLocked(rel string, n node) error {
	ents, err := l.listLocked(rel, n)
	if err != nil {
		return err
	}
	if len(ents.names) > 0 {
		return errNotEmpty
	}
	return nil
}

// moveLocked moves the view of no at lo, subtree and all, to ln, replacing
// nn. The moved entries are copied up (file contents stay lazy); open
// directory handles follow.
func (l *layer) moveLocked(lo, ln loc, no, nn node) error {
	moved, err := l.subtreeLocked(lo.rel, no)
	if err != nil {
		return err
	}
	// Take the source out without dropping the contents being moved.
	var keys []string
	l.eachBelow(lo.rel, true, func(k string, _ entry) bool { keys = append(keys, k); return true })
	for _, k := range keys {
		l.deleteEntry(k)
	}
	l.whiteoutLocked(lo.rel, lo.visible, no, false)
	if nn.exists() {
		l.unlinkLocked(ln.rel, ln.visible, nn)
	}
	l.sitesMovedLocked(lo.rel, ln.rel)
	for _, m := range moved {
		l.setEntry(join(ln.rel, m.sub), m.e)
	}
	if no.kind == kindDir {
		l.movedLocked(lo.rel, ln.rel)
	}
	return nil
}

// renameCheckLocked is os.Rename's own check, made before the system call:
// an existing directory (as Lstat sees newname) is refused as the target
// with EEXIST, unless it is oldname itself; a bad oldname is named first.
func (l *layer) renameCheckLocked(oldname, newname, absOld, absNew string) error {
	ln, err := l.resolve("rename", newname, absNew, false)
	if err != nil {
		return nil
	}
	newFi, newNode, ok := l.lstatLoc(ln)
	if !ok || !(newNode.kind == kindDir || newFi != nil && newFi.IsDir()) {
		return nil
	}
	lo, err := l.resolve("rename", oldname, absOld, false)
	if err != nil {
		return asLinkErr("rename", oldname, newname, err)
	}
	oldFi, oldNode, ok := l.lstatLoc(lo)
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
func (l *layer) lstatLoc(at loc) (fs.FileInfo, node, bool) {
	if !at.inside {
		fi, err := os.Lstat(at.host)
		return fi, node{}, err == nil
	}
	n, err := l.final(at)
	return nil, n, err == nil && n.exists()
}

// parentCheckLocked returns the error of resolving the directory in which
// the last component of l is looked up ("x" itself for "x/." or "x/.."),
// or nil.
func (l *layer) parentCheckLocked(at loc) error {
	if at.inside {
		if at.last != lastNorm {
			return l.dirCheck(at)
		}
		return nil // resolveEntry resolved the parent
	}
	dir := filepath.Dir(at.host)
	if at.last != lastNorm {
		dir = at.host
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
func (l *layer) subtreeLocked(rel string, n node) ([]movedEntry, error) {
	var out []movedEntry
	var add func(sub, rel string, n node) error
	add = func(sub, rel string, n node) error {
		e, err := l.copyUpLocked(rel, n)
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
		ents, err := l.listLocked(rel, n)
		if err != nil {
			return err
		}
		for i, name := range ents.names {
			if err := add(join(sub, name), join(rel, name), l.nodeOf(rel, n.under, ents, i)); err != nil {
				return err
			}
		}
		return nil
	}
	err := add("", rel, n)
	return out, err
}
