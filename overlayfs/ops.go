package overlayfs

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"
)

// Stat returns the FileInfo of name, following symlinks, as os.Stat does.
func (f *Fs) Stat(name string) (fs.FileInfo, error) {
	g, abs := f.pick(name)
	return g.stat("stat", name, abs, true)
}

// Lstat returns the FileInfo of name without following a final symlink.
func (f *Fs) Lstat(name string) (fs.FileInfo, error) {
	g, abs := f.pick(name)
	return g.stat("lstat", name, abs, false)
}

// LstatIfPossible implements afero.Lstater; it always uses Lstat.
func (f *Fs) LstatIfPossible(name string) (fs.FileInfo, bool, error) {
	fi, err := f.Lstat(name)
	return fi, true, err
}

// emptyView reports whether Stat of name can go straight to the lower:
// the layer is empty, so the merged view is the lower and the kernel
// resolves names as we would. Callers hold f.mu (read or write).
func (f *layer) emptyView(name string) bool {
	if f.paths.Len() != 0 || !f.opts.outsideReads || len(name) == 0 {
		return false
	}
	_, ok := f.within(name)
	return ok
}

// stat is Stat (follow) or Lstat. A name the fast path resolves to the
// lower is stat'ed outside the lock (see lowerStat).
func (f *layer) stat(op, name, abs string, follow bool) (fs.FileInfo, error) {
	f.mu.RLock()
	if follow && f.emptyView(name) {
		f.mu.RUnlock()
		return os.Stat(name)
	}
	return f.statRLocked(op, name, abs, follow)
}

// statRLocked is stat past the empty layer's shortcut. Callers hold f.mu
// for reading; it releases it.
func (f *layer) statRLocked(op, name, abs string, follow bool) (fs.FileInfo, error) {
	host := abs
	if host == "" {
		host = name
	}
	rel, lower, fast := f.fastEntry(host)
	var seen *known
	if fast && lower {
		f.mu.RUnlock()
		fi, done, err := f.lowerStat(op, name, rel, host, follow)
		if done {
			return fi, err
		}
		f.mu.RLock()
		seen = f.lowerLink(host, fi) // a symlink to follow
	}
	defer f.mu.RUnlock()
	if fast && !lower {
		if fi, done, err := f.layerStat(op, name, rel, host, follow); done {
			return fi, err
		}
	}
	return f.statWalk(op, name, abs, follow, seen)
}

// statWalk is stat by a full resolution; seen is as for resolveName.
// Callers hold f.mu.
func (f *layer) statWalk(op, name, abs string, follow bool, seen *known) (fs.FileInfo, error) {
	l, err := f.resolveName(op, name, abs, follow, true, seen)
	if err != nil {
		return nil, err
	}
	if !l.inside {
		if !f.opts.outsideReads {
			return nil, pathErr(op, name, ErrOutsideRoot)
		}
		stat := os.Lstat
		if follow {
			stat = os.Stat
		}
		fi, err := stat(l.host)
		if err != nil {
			return nil, fixErr("", name, err)
		}
		return renameInfo(fi, infoName(name)), nil
	}
	n, err := f.final(l)
	if err != nil {
		return nil, fixErr(op, name, err)
	}
	if !n.exists() {
		return nil, pathErr(op, name, errNoEnt)
	}
	if l.dirOnly && n.kind != kindDir {
		return nil, pathErr(op, name, errNotDir)
	}
	return f.infoLocked(infoName(name), n), nil
}

// final returns the node a resolved location names.
func (f *layer) final(l loc) (node, error) {
	if l.have {
		return l.n, nil
	}
	return f.lookupAt(l.rel, l.host, l.visible)
}

// writeEntryLoc is writeLoc for operations on the last component itself.
func (f *layer) writeEntryLoc(op, name, abs string) (loc, bool, error) {
	l, err := f.resolveEntry(op, name, abs)
	return f.checkWrite(op, name, l, err)
}

// writeLoc resolves a name for a mutation. For a name outside the root it
// returns ok=false and the error under the outside policy, or nil when the
// caller should pass the operation through to os.
func (f *layer) writeLoc(op, name, abs string, follow bool) (l loc, ok bool, err error) {
	l, err = f.resolve(op, name, abs, follow)
	return f.checkWrite(op, name, l, err)
}

// checkWrite applies the outside-root policy to a resolved location.
func (f *layer) checkWrite(op, name string, l loc, err error) (loc, bool, error) {
	if err != nil {
		return l, false, err
	}
	if !l.inside {
		if !f.opts.outsideWrites {
			return l, false, pathErr(op, name, ErrOutsideRoot)
		}
		return l, false, nil
	}
	return l, true, nil
}

// Mkdir creates a directory in the layer.
func (f *Fs) Mkdir(name string, perm fs.FileMode) error {
	g, abs := f.pick(name)
	return g.mkdir(name, abs, perm)
}

func (f *layer) mkdir(name, abs string, perm fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok, err := f.writeEntryLoc("mkdir", name, abs)
	if !ok {
		if err == nil {
			err = fixErr("", name, os.Mkdir(l.host, perm))
		}
		return err
	}
	if l.last != lastNorm {
		if err := f.dirCheck(l); err != nil {
			return nameErr("mkdir", name, err)
		}
		return pathErr("mkdir", name, errExist)
	}
	n, err := f.final(l)
	if err != nil {
		return fixErr("mkdir", name, err)
	}
	if n.exists() {
		return pathErr("mkdir", name, errExist)
	}
	m := f.newMeta(perm & (fs.ModePerm | fs.ModeSticky) &^ f.creator().umask)
	f.inheritLocked(l.rel, &m, true)
	e := withAttrs(kindDir, m, "")
	e.opaque = true
	f.paths.Set(l.rel, e)
	return nil
}

// inheritLocked applies what a new entry at rel takes from a setgid
// parent directory, as Linux does: its group, and for a directory the
// setgid bit itself.
func (f *layer) inheritLocked(rel string, m *meta, isDir bool) {
	pm, ok := f.dirMetaLocked(parent(rel))
	if !ok || pm.perm&fs.ModeSetgid == 0 {
		return
	}
	m.gid = pm.gid
	if isDir {
		m.perm |= fs.ModeSetgid
	}
}

// dirMetaLocked returns the metadata of dir, the directory of the view an
// entry is being created in: its layer entry, or the lower directory's,
// which is looked up once (the lower must not change while the Fs is in
// use), so that creating many entries in one lower directory costs no
// system call each. dir is resolved (no symlink on the way), so when the
// layer has no entry there it is the lower's directory at that path.
func (f *layer) dirMetaLocked(dir string) (meta, bool) {
	if e, ok := f.paths.Get(dir); ok {
		return e.meta(), e.kind == kindDir
	}
	if v, ok := f.lowerDirs.Load(dir); ok {
		return v.(meta), true
	}
	fi, err := os.Lstat(f.host(dir))
	if err != nil || !fi.IsDir() {
		return meta{}, false
	}
	m := metaOf(fi)
	f.lowerDirs.Store(dir, m)
	return m, true
}

// MkdirAll creates a directory and its missing parents, as os.MkdirAll.
func (f *Fs) MkdirAll(path string, perm fs.FileMode) error {
	if fi, err := f.Stat(path); err == nil {
		if fi.IsDir() {
			return nil
		}
		return pathErr("mkdir", path, errNotDir)
	}
	i := len(path)
	for i > 0 && os.IsPathSeparator(path[i-1]) {
		i--
	}
	j := i
	for j > 0 && !os.IsPathSeparator(path[j-1]) {
		j--
	}
	if j > 1 {
		if err := f.MkdirAll(path[:j-1], perm); err != nil {
			return err
		}
	}
	if err := f.Mkdir(path, perm); err != nil {
		if fi, err1 := f.Lstat(path); err1 == nil && fi.IsDir() {
			return nil
		}
		return err
	}
	return nil
}

// SymlinkIfPossible implements afero.Linker: it creates newname as a
// symlink to oldname in the layer.
func (f *Fs) SymlinkIfPossible(oldname, newname string) error {
	g, abs := f.pick(newname)
	return g.symlink(oldname, newname, abs)
}

func (f *layer) symlink(oldname, newname, abs string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok, err := f.writeEntryLoc("symlink", newname, abs)
	if !ok {
		if err == nil {
			return asLinkErr("symlink", oldname, newname, os.Symlink(oldname, l.host))
		}
		return asLinkErr("symlink", oldname, newname, err)
	}
	if l.last != lastNorm {
		if err := f.dirCheck(l); err != nil {
			return asLinkErr("symlink", oldname, newname, err)
		}
		return linkErr("symlink", oldname, newname, errExist)
	}
	n, err := f.final(l)
	if err != nil {
		return asLinkErr("symlink", oldname, newname, err)
	}
	switch {
	case n.exists():
		return linkErr("symlink", oldname, newname, errExist)
	case l.dirOnly:
		return linkErr("symlink", oldname, newname, errNoEnt) // Linux: "you asked for a directory"
	}
	if oldname == "" {
		return linkErr("symlink", oldname, newname, errNoEnt)
	}
	m := f.newMeta(fs.ModePerm)
	f.inheritLocked(l.rel, &m, false)
	f.paths.Set(l.rel, withAttrs(kindSymlink, m, oldname))
	return nil
}

// ReadlinkIfPossible implements afero.LinkReader.
func (f *Fs) ReadlinkIfPossible(name string) (string, error) {
	g, abs := f.pick(name)
	return g.readlink(name, abs)
}

func (f *layer) readlink(name, abs string) (string, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, err := f.resolve("readlink", name, abs, false)
	if err != nil {
		return "", err
	}
	if !l.inside {
		if !f.opts.outsideReads {
			return "", pathErr("readlink", name, ErrOutsideRoot)
		}
		t, err := os.Readlink(l.host)
		return t, fixErr("", name, err)
	}
	n, err := f.final(l)
	if err != nil {
		return "", fixErr("readlink", name, err)
	}
	switch {
	case !n.exists():
		return "", pathErr("readlink", name, errNoEnt)
	case l.dirOnly && n.kind != kindDir:
		return "", pathErr("readlink", name, errNotDir)
	case n.kind != kindSymlink:
		return "", pathErr("readlink", name, errInval)
	}
	t, err := f.linkTarget(l.rel, n)
	return t, fixErr("readlink", name, err)
}

// Chmod changes the mode of name, following symlinks. A lower entry's
// metadata is copied up; its content is not read.
func (f *Fs) Chmod(name string, mode fs.FileMode) error {
	return f.setMeta("chmod", name, func(host string) error { return os.Chmod(host, mode) }, func(m *meta, _ bool) {
		m.perm = mode & permBits
	})
}

// Chown changes the owner of name, following symlinks; -1 keeps a value.
func (f *Fs) Chown(name string, uid, gid int) error {
	return f.setMeta("chown", name, func(host string) error { return os.Chown(host, uid, gid) }, func(m *meta, isDir bool) {
		// As Linux: a chown, even by root, even to the same owner, clears
		// the setuid bit of a non-directory, and its setgid bit when group
		// execution is on (alone it marks mandatory locking).
		if !isDir {
			m.perm &^= fs.ModeSetuid
			if m.perm&(fs.ModeSetgid|0o010) == fs.ModeSetgid|0o010 {
				m.perm &^= fs.ModeSetgid
			}
		}
		if uid != -1 {
			m.uid = uid
		}
		if gid != -1 {
			m.gid = gid
		}
	})
}

// Chtimes changes the modification time of name, following symlinks. A
// zero time leaves it unchanged, as in os. Access times are not kept.
func (f *Fs) Chtimes(name string, atime, mtime time.Time) error {
	return f.setMeta("chtimes", name, func(host string) error { return os.Chtimes(host, atime, mtime) }, func(m *meta, _ bool) {
		if !mtime.IsZero() {
			m.mtime = mtime
		}
	})
}

func (f *Fs) setMeta(op, name string, outside func(host string) error, set func(m *meta, isDir bool)) error {
	g, abs := f.pick(name)
	return g.setMeta(op, name, abs, outside, set)
}

func (f *layer) setMeta(op, name, abs string, outside func(host string) error, set func(m *meta, isDir bool)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok, err := f.writeLoc(op, name, abs, true)
	if !ok {
		if err == nil {
			err = fixErr("", name, outside(l.host))
		}
		return err
	}
	n, err := f.final(l)
	if err != nil {
		return fixErr(op, name, err)
	}
	if !n.exists() {
		return pathErr(op, name, errNoEnt)
	}
	if l.dirOnly && n.kind != kindDir {
		return pathErr(op, name, errNotDir)
	}
	e, err := f.copyUpLocked(l.rel, n)
	if err != nil {
		return fixErr(op, name, err)
	}
	if e.kind == kindFile {
		set(&f.ownBlobLocked(e.ino).meta, false)
	} else {
		var a attrs // a new one: snapshots share the old
		if e.attrs != nil {
			a = *e.attrs
		}
		set(&a.meta, e.kind == kindDir)
		e.attrs = &a
	}
	f.paths.Set(l.rel, e)
	return nil
}

// newMeta is the metadata of something created now by this process.
func (f *layer) newMeta(perm fs.FileMode) meta {
	c := f.creator()
	return meta{perm: perm, mtime: f.now(), uid: c.uid, gid: c.gid}
}

// Remove removes a file, symlink or empty directory, as os.Remove.
func (f *Fs) Remove(name string) error {
	g, abs := f.pick(name)
	return g.remove(name, abs)
}

func (f *layer) remove(name, abs string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok, err := f.writeEntryLoc("remove", name, abs)
	if !ok {
		if err == nil {
			if f.reachesRoot(l.host, false) { // an ancestor is never empty: os says ENOTEMPTY
				return pathErr("remove", name, errRootBusy)
			}
			err = fixErr("", name, os.Remove(l.host))
		}
		return err
	}
	if l.last != lastNorm {
		// unlink says EISDIR; rmdir, whose error os reports, EINVAL for
		// "." and ENOTEMPTY for "..".
		if err := f.dirCheck(l); err != nil {
			return nameErr("remove", name, err)
		}
		if l.last == lastDot {
			return pathErr("remove", name, errInval)
		}
		return pathErr("remove", name, errNotEmpty)
	}
	n, err := f.final(l)
	if err != nil {
		return fixErr("remove", name, err)
	}
	switch {
	case !n.exists():
		return pathErr("remove", name, errNoEnt)
	case l.dirOnly && n.kind != kindDir:
		return pathErr("remove", name, errNotDir)
	}
	if n.kind == kindDir {
		ents, err := f.listLocked(l.rel, n)
		if err != nil {
			return fixErr("remove", name, err)
		}
		if len(ents.names) > 0 {
			return pathErr("remove", name, errNotEmpty)
		}
	}
	if l.rel == "" {
		return pathErr("remove", name, syscall.EBUSY)
	}
	f.unlinkLocked(l.rel, l.visible, n)
	return nil
}

// RemoveAll removes name and everything below it, as os.RemoveAll: a
// missing name is not an error.
func (f *Fs) RemoveAll(name string) error {
	g, abs := f.pick(name)
	return g.removeAll(name, abs)
}

func (f *layer) removeAll(name, abs string) error {
	if name == "" {
		return nil
	}
	if name == "." || len(name) >= 2 && name[len(name)-1] == '.' && os.IsPathSeparator(name[len(name)-2]) {
		return pathErr("RemoveAll", name, errInval)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// os.RemoveAll unlinks the base name from its parent: "file/" and
	// "link/" go as "file" and "link" do.
	trimmed := name
	if t := strings.TrimRight(name, "/"); t != "" {
		trimmed, abs = t, strings.TrimRight(abs, "/")
	}
	l, ok, err := f.writeLoc("unlinkat", trimmed, abs, false)
	if !ok {
		switch {
		case err == nil && f.reachesRoot(l.host, true):
			return pathErr("unlinkat", name, errRootBusy)
		case err == nil:
			return fixErr("", name, os.RemoveAll(l.host))
		case errno(err) == errNoEnt:
			return nil
		case errno(err) != 0:
			return f.removeAllFailedLocked(name, errno(err))
		}
		return err
	}
	if l.last == lastDotDot {
		return f.removeAllDotDotLocked(name, l)
	}
	n, err := f.final(l)
	if err != nil {
		return fixErr("unlinkat", name, err)
	}
	switch {
	case !n.exists():
		return nil
	case l.rel == "":
		return pathErr("RemoveAll", name, syscall.EBUSY)
	}
	f.unlinkLocked(l.rel, l.visible, n)
	return nil
}

// removeAllDotDotLocked is os.RemoveAll of "x/..": os removes the
// directory's entries from x's parent, then cannot remove ".." itself.
func (f *layer) removeAllDotDotLocked(name string, l loc) error {
	if err := f.dirCheck(l); err != nil {
		if errno(err) == errNoEnt {
			return nil
		}
		if errno(err) != 0 {
			return f.removeAllFailedLocked(name, errno(err))
		}
		return nameErr("unlinkat", name, err)
	}
	n, err := f.final(l)
	if err != nil {
		return fixErr("unlinkat", name, err)
	}
	ents, err := f.listLocked(l.rel, n)
	if err != nil {
		return fixErr("unlinkat", name, err)
	}
	for i, name := range ents.names {
		f.unlinkLocked(join(l.rel, name), n.under, f.nodeOf(l.rel, n.under, ents, i))
	}
	return pathErr("unlinkat", name, errNotEmpty)
}

// removeAllFailedLocked gives the error os.RemoveAll gives when name cannot
// be resolved (a component is not a directory, a symlink loop): os opens
// the parent, failing there if the parent's own path is broken; else
// unlinkat in the parent fails with the same errno.
func (f *layer) removeAllFailedLocked(name string, e error) error {
	dir := strings.TrimRight(name, "/")
	if i := strings.LastIndexByte(dir, '/'); i >= 0 {
		dir = dir[:i]
		if dir == "" {
			dir = "/"
		}
	} else {
		dir = "."
	}
	l, err := f.resolve("open", dir, "", true)
	if err != nil {
		if errno(err) == errNoEnt {
			return nil
		}
		return err
	}
	if !l.inside {
		if _, err := os.Stat(l.host); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return pathErr("unlinkat", strings.TrimRight(name, "/"), e)
	}
	n, err := f.final(l)
	switch {
	case err == nil && !n.exists():
		return nil
	case err == nil && l.dirOnly && n.kind != kindDir:
		return pathErr("open", dir, errNotDir)
	case err == nil && n.kind == kindSocket:
		return pathErr("open", dir, errNoDevice)
	}
	// os names the parent and the base, without trailing slashes.
	if t := strings.TrimRight(name, "/"); t != "" {
		name = t
	}
	return pathErr("unlinkat", name, e)
}

// unlinkLocked removes rel and its subtree from the view: layer entries go,
// and a whiteout hides the lower where it has something there.
func (f *layer) unlinkLocked(rel string, visible bool, n node) {
	f.goneLocked(rel)
	f.deleteTreeLocked(rel)
	f.whiteoutLocked(rel, visible, n)
}

// whiteoutLocked hides the lower at rel if it shows something there.
func (f *layer) whiteoutLocked(rel string, visible bool, n node) {
	if !visible {
		return
	}
	low := n
	if n.layer {
		low = f.lowerNode(rel)
	}
	if !low.exists() {
		return
	}
	if low.fi != nil {
		f.dependLocked(rel, low.fi)
	}
	if low.kind == kindDir {
		f.dependBelowLocked(rel)
	}
	f.paths.Set(rel, entry{kind: kindWhiteout})
}
