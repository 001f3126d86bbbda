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
	if err := f.fault("stat", name); err != nil {
		return nil, err
	}
	g, abs := f.pick(name)
	return g.stat("stat", name, abs, true)
}

// Lstat returns the FileInfo of name without following a final symlink.
func (f *Fs) Lstat(name string) (fs.FileInfo, error) {
	if err := f.fault("lstat", name); err != nil {
		return nil, err
	}
	g, abs := f.pick(name)
	return g.stat("lstat", name, abs, false)
}

// LstatIfPossible implements afero.Lstater; it always uses Lstat.
func (f *Fs) LstatIfPossible(name string) (fs.FileInfo, bool, error) {
	fi, err := f.Lstat(name)
	return fi, true, err
}

// stat is Stat (follow) or Lstat: a resolution, under the read lock, and
// the info of the node it ends at.
func (l *layer) stat(op, name, abs string, follow bool) (fs.FileInfo, error) {
	l.mu.RLock()
	fi, err := l.statRLocked(op, name, abs, follow)
	l.mu.RUnlock()
	return fi, err
}

// statRLocked is stat under the read lock.
func (l *layer) statRLocked(op, name, abs string, follow bool) (fs.FileInfo, error) {
	var at loc
	if err := l.resolveInto(&at, op, name, abs, howOf(follow)|hSlashFollows|hStat); err != nil {
		return nil, err
	}
	if !at.inside {
		if !l.opts.outsideReads {
			return nil, pathErr(op, name, errOutsideRead)
		}
		stat := os.Lstat
		if follow {
			stat = os.Stat
		}
		fi, err := stat(at.host)
		if err != nil {
			return nil, fixErr("", name, err)
		}
		return renameInfo(fi, infoName(name)), nil
	}
	// The node is used where the resolver put it: a copy of it would load
	// in 16-byte moves what 8-byte stores just wrote (see fastLoc).
	if !at.have {
		var err error
		if at.n, err = l.final(at); err != nil {
			return nil, fixErr(op, name, err)
		}
	}
	switch {
	case !at.n.exists():
		return nil, pathErr(op, name, errNoEnt)
	case at.dirOnly && at.n.kind != kindDir:
		return nil, pathErr(op, name, errNotDir)
	case at.n.kind == kindDir:
		return l.dirInfoLocked(l.infoLocked(infoName(name), at.n), at.rel, at.n), nil
	case !at.n.layer:
		return renameInfo(at.n.fi, infoName(name)), nil
	}
	return l.infoLocked(infoName(name), at.n), nil
}

// final returns the node a resolved location names.
func (l *layer) final(at loc) (node, error) {
	if at.have {
		return at.n, nil
	}
	// What the resolver's fast path knows of the directory settles the
	// layer's side, mostly without a search (see dirStates).
	if e, ok := l.entryAt(at.rel); ok {
		return layerNode(e, at.visible), nil
	}
	if !at.visible {
		return node{}, nil
	}
	return l.lowerLookup(at.rel, at.host)
}

// writeEntryLoc is writeLoc for operations on the last component itself.
func (l *layer) writeEntryLoc(op, name, abs string) (loc, bool, error) {
	at, err := l.resolveEntry(op, name, abs)
	return l.checkWrite(op, name, at, err)
}

// writeLoc resolves a name for a mutation. For a name outside the root it
// returns ok=false and the error under the outside policy, or nil when the
// caller should pass the operation through to os.
func (l *layer) writeLoc(op, name, abs string, follow bool) (at loc, ok bool, err error) {
	at, err = l.resolve(op, name, abs, follow)
	return l.checkWrite(op, name, at, err)
}

// checkWrite applies the outside-root policy to a resolved location.
func (l *layer) checkWrite(op, name string, at loc, err error) (loc, bool, error) {
	if err != nil {
		return at, false, err
	}
	switch {
	case at.inside:
		return at, true, nil
	case at.other != 0:
		return at, false, pathErr(op, name, errOtherRoot)
	case !l.opts.outsideWrites:
		return at, false, l.outsideErr(op, name)
	}
	return at, false, nil
}

// Mkdir creates a directory in the layer.
func (f *Fs) Mkdir(name string, perm fs.FileMode) error {
	if err := f.fault("mkdir", name); err != nil {
		return err
	}
	g, abs := f.pick(name)
	return g.mkdir(name, abs, perm)
}

func (l *layer) mkdir(name, abs string, perm fs.FileMode) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok, err := l.writeEntryLoc("mkdir", name, abs)
	if !ok {
		if err == nil {
			err = fixErr("", name, entryOutside(at.host, func(p string) error { return os.Mkdir(p, perm) }))
		}
		return err
	}
	if at.last != lastNorm {
		if err := l.dirCheck(at); err != nil {
			return nameErr("mkdir", name, err)
		}
		return pathErr("mkdir", name, errExist)
	}
	n, err := l.final(at)
	if err != nil {
		return fixErr("mkdir", name, err)
	}
	if n.exists() {
		return pathErr("mkdir", name, errExist)
	}
	if err := l.mayCreateLocked(at.rel); err != nil {
		return pathErr("mkdir", name, err)
	}
	m := l.newMeta(perm & (fs.ModePerm | fs.ModeSticky) &^ l.creator().umask)
	l.inheritLocked(at.rel, &m, true)
	e := l.withAttrs(kindDir, m, "")
	e.opaque = true
	if err := l.inodeQuotaLocked(); err != nil {
		return nameErr("mkdir", name, err)
	}
	l.setEntry(at.rel, e)
	l.dropDirTimesLocked(at.rel, true)        // of a directory once there
	l.touchDirLocked(parent(at.rel), m.mtime) // the new directory's time: no clock read
	return nil
}

// inheritLocked applies what a new entry at rel takes from a setgid
// parent directory, as Linux does: its group, and for a directory the
// setgid bit itself.
func (l *layer) inheritLocked(rel string, m *meta, isDir bool) {
	pm, ok := l.dirMetaLocked(parent(rel))
	if !ok || pm.perm&fs.ModeSetgid == 0 {
		return
	}
	m.gid = pm.gid
	if isDir {
		m.perm |= fs.ModeSetgid
	}
	l.opts.as.stripSetgid(m, isDir)
}

// dirMetaLocked returns the metadata of dir, the directory of the view an
// entry is being created in: its layer entry, or the lower directory's,
// which is looked up once (the lower must not change while the Fs is in
// use), so that creating many entries in one lower directory costs no
// system call each. dir is resolved (no symlink on the way), so when the
// layer has no entry there it is the lower's directory at that path.
func (l *layer) dirMetaLocked(dir string) (meta, bool) {
	if e, ok := l.paths.Get(dir); ok {
		return e.meta(), e.kind == kindDir
	}
	c := l.lower()
	if v, ok := c.meta.Load(dir); ok {
		return v.(meta), true
	}
	fi, err := os.Lstat(l.host(dir))
	if err != nil || !fi.IsDir() {
		return meta{}, false
	}
	m := metaOf(fi)
	c.meta.Store(dir, m)
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
	if err := f.faultLink("symlink", oldname, newname); err != nil {
		return err
	}
	g, abs := f.pick(newname)
	return g.symlink(oldname, newname, abs)
}

func (l *layer) symlink(oldname, newname, abs string) error {
	// As Linux, the target is read before newname is looked at: an empty
	// one is ENOENT, one of PATH_MAX bytes or more ENAMETOOLONG; one with
	// a NUL is no C string (os: EINVAL).
	if strings.IndexByte(oldname, 0) >= 0 {
		return linkErr("symlink", oldname, newname, errInval)
	}
	if oldname == "" {
		return linkErr("symlink", oldname, newname, errNoEnt)
	}
	if len(oldname) >= pathMax {
		return linkErr("symlink", oldname, newname, errNameTooLong)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok, err := l.writeEntryLoc("symlink", newname, abs)
	if !ok {
		if err == nil {
			return asLinkErr("symlink", oldname, newname, entryOutside(at.host, func(p string) error { return os.Symlink(oldname, p) }))
		}
		return asLinkErr("symlink", oldname, newname, err)
	}
	if err := l.newNameLocked("symlink", oldname, newname, at); err != nil {
		return err
	}
	if err := l.mayCreateLocked(at.rel); err != nil {
		return linkErr("symlink", oldname, newname, err)
	}
	m := l.newMeta(fs.ModePerm)
	l.inheritLocked(at.rel, &m, false)
	if err := l.symlinkQuotaLocked(oldname); err != nil {
		return asLinkErr("symlink", oldname, newname, err)
	}
	l.setEntry(at.rel, l.withAttrs(kindSymlink, m, oldname))
	l.touchDirLocked(parent(at.rel), m.mtime) // the new link's time: no clock read
	return nil
}

// ReadlinkIfPossible implements afero.LinkReader.
func (f *Fs) ReadlinkIfPossible(name string) (string, error) {
	if err := f.fault("readlink", name); err != nil {
		return "", err
	}
	g, abs := f.pick(name)
	return g.readlink(name, abs)
}

func (l *layer) readlink(name, abs string) (string, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	at, err := l.resolve("readlink", name, abs, false)
	if err != nil {
		return "", err
	}
	if !at.inside {
		if !l.opts.outsideReads {
			return "", pathErr("readlink", name, errOutsideRead)
		}
		t, err := os.Readlink(at.host)
		return t, fixErr("", name, err)
	}
	n, err := l.final(at)
	if err != nil {
		return "", fixErr("readlink", name, err)
	}
	switch {
	case !n.exists():
		return "", pathErr("readlink", name, errNoEnt)
	case at.dirOnly && n.kind != kindDir:
		return "", pathErr("readlink", name, errNotDir)
	case n.kind != kindSymlink:
		return "", pathErr("readlink", name, errInval)
	}
	t, err := l.linkTarget(at.rel, n)
	return t, fixErr("readlink", name, err)
}

// Chmod changes the mode of name, following symlinks. A lower entry's
// metadata is copied up; its content is not read.
func (f *Fs) Chmod(name string, mode fs.FileMode) error {
	return f.setMeta("chmod", name, ownerOnly, func(host string) error { return os.Chmod(host, mode) }, func(m *meta, _ bool) {
		m.perm = f.opts.as.chmodBits(mode, *m)
	})
}

// Chown changes the owner of name, following symlinks; -1 keeps a value.
func (f *Fs) Chown(name string, uid, gid int) error {
	return f.setMeta("chown", name, chownCheck(uid, gid), func(host string) error { return os.Chown(host, uid, gid) }, func(m *meta, isDir bool) {
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
// With both times zero it succeeds on Linux whatever name names, as
// os.Chtimes does there: the kernel does not look the name up.
func (f *Fs) Chtimes(name string, atime, mtime time.Time) error {
	if omitLooksNothingUp && atime.IsZero() && mtime.IsZero() {
		return f.fault("chtimes", name) // nothing to change, no name to check (as os)
	}
	return f.setMeta("chtimes", name, chtimesCheck(atime, mtime), func(host string) error { return os.Chtimes(host, atime, mtime) }, func(m *meta, _ bool) {
		if !mtime.IsZero() {
			m.mtime = mtime
		}
	})
}

func (f *Fs) setMeta(op, name string, check metaCheck, outside func(host string) error, set func(m *meta, isDir bool)) error {
	if err := f.fault(op, name); err != nil {
		return err
	}
	g, abs := f.pick(name)
	return g.setMeta(op, name, abs, check, outside, set)
}

// setMeta changes the metadata of name with set, once check (AsUser's)
// allows it.
func (l *layer) setMeta(op, name, abs string, check metaCheck, outside func(host string) error, set func(m *meta, isDir bool)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok, err := l.writeLoc(op, name, abs, true)
	for tries := 0; !ok && err == nil; tries++ {
		relook, oerr := metaOutside(at.host, outside)
		if !relook || tries == maxRelook {
			return fixErr(op, name, oerr)
		}
		at, ok, err = l.writeLoc(op, name, abs, true)
	}
	if !ok {
		return err
	}
	n, err := l.final(at)
	if err != nil {
		return fixErr(op, name, err)
	}
	if !n.exists() {
		return pathErr(op, name, errNoEnt)
	}
	if at.dirOnly && n.kind != kindDir {
		return pathErr(op, name, errNotDir)
	}
	if err := l.mayChangeLocked(at.rel, n, check); err != nil {
		return pathErr(op, name, err)
	}
	e, err := l.copyUpLocked(at.rel, n)
	if err != nil {
		return fixErr(op, name, err)
	}
	if e.kind == kindFile {
		set(&l.ownBlobLocked(e.ino).meta, false)
	} else {
		var a attrs // a new one: snapshots share the old
		if e.attrs != nil {
			a = *e.attrs
		}
		if t, moved := l.dirTimeLocked(at.rel); moved && op == "chtimes" {
			a.meta.mtime = t // a Chtimes leaving the mtime (UTIME_OMIT) keeps the moved one
		}
		set(&a.meta, e.kind == kindDir)
		e.attrs = &a
		l.relinkLocked(e)
		if op == "chtimes" {
			l.dropDirTimesLocked(at.rel, false) // the time set now wins
		}
	}
	l.setEntry(at.rel, e)
	return nil
}

// newMeta is the metadata of something created now by this process.
func (l *layer) newMeta(perm fs.FileMode) meta {
	c := l.creator()
	return meta{perm: perm, mtime: l.now(), uid: c.uid, gid: c.gid}
}

// Remove removes a file, symlink or empty directory, as os.Remove.
func (f *Fs) Remove(name string) error {
	if err := f.fault("remove", name); err != nil {
		return err
	}
	g, abs := f.pick(name)
	return g.remove(name, abs)
}

func (l *layer) remove(name, abs string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok, err := l.writeEntryLoc("remove", name, abs)
	if !ok {
		if err == nil {
			if l.reachesRoot(at.host, false) { // an ancestor is never empty: os says ENOTEMPTY
				return pathErr("remove", name, errRootBusy)
			}
			err = fixErr("", name, entryOutside(at.host, os.Remove))
		}
		return err
	}
	if at.last != lastNorm {
		// unlink says EISDIR; rmdir, whose error os reports, EINVAL for
		// "." and ENOTEMPTY for "..".
		if err := l.dirCheck(at); err != nil {
			return nameErr("remove", name, err)
		}
		if at.last == lastDot {
			return pathErr("remove", name, errInval)
		}
		return pathErr("remove", name, errNotEmpty)
	}
	n, err := l.final(at)
	if err != nil {
		return fixErr("remove", name, err)
	}
	switch {
	case !n.exists():
		return pathErr("remove", name, errNoEnt)
	case at.dirOnly && n.kind != kindDir:
		return pathErr("remove", name, errNotDir)
	}
	if err := l.mayDeleteLocked(at.rel, n); err != nil {
		return pathErr("remove", name, err)
	}
	if n.kind == kindDir {
		ents, err := l.listLocked(at.rel, n)
		if err != nil {
			return fixErr("remove", name, err)
		}
		if len(ents.names) > 0 {
			return pathErr("remove", name, errNotEmpty)
		}
	}
	if at.rel == "" {
		return pathErr("remove", name, syscall.EBUSY)
	}
	l.unlinkLocked(at.rel, at.visible, n)
	return nil
}

// RemoveAll removes name and everything below it, as os.RemoveAll: a
// missing name is not an error. Outside the root (with
// AllowOutsideWrites), a tree that holds a root, or a bind mount of a root
// or of one of its directories, is refused with EBUSY before anything is
// removed; finding out costs a walk of the tree's directories.
func (f *Fs) RemoveAll(name string) error {
	if err := f.fault("remove", name); err != nil {
		return err
	}
	g, abs := f.pick(name)
	if g.opts.as != nil {
		return g.removeAllAs(name, abs)
	}
	return g.removeAll(name, abs)
}

func (l *layer) removeAll(name, abs string) error {
	if name == "" {
		return nil
	}
	if name == "." || len(name) >= 2 && name[len(name)-1] == '.' && os.IsPathSeparator(name[len(name)-2]) {
		return pathErr("RemoveAll", name, errInval)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// os.RemoveAll unlinks the base name from its parent: "file/" and
	// "link/" go as "file" and "link" do.
	trimmed := name
	if t := strings.TrimRight(name, "/"); t != "" {
		trimmed, abs = t, strings.TrimRight(abs, "/")
	}
	at, ok, err := l.writeLoc("unlinkat", trimmed, abs, false)
	if !ok {
		switch {
		case err == nil && (l.reachesRoot(at.host, true) || l.treeHoldsRoot(at.host)):
			// Refused before anything is removed: the tree holds a root
			// or an alias of one (a bind mount), which os would empty.
			return pathErr("unlinkat", name, errRootBusy)
		case err == nil:
			return fixErr("", name, entryOutside(at.host, os.RemoveAll))
		case errno(err) == errNoEnt:
			return nil
		case errno(err) != 0:
			return l.removeAllFailedLocked(name, errno(err))
		}
		return err
	}
	if at.last == lastDotDot {
		return l.removeAllDotDotLocked(name, at)
	}
	n, err := l.final(at)
	if err != nil {
		return fixErr("unlinkat", name, err)
	}
	switch {
	case !n.exists():
		return nil
	case at.rel == "":
		return pathErr("RemoveAll", name, syscall.EBUSY)
	}
	l.unlinkLocked(at.rel, at.visible, n)
	return nil
}

// removeAllDotDotLocked is os.RemoveAll of "x/..": os removes the
// directory's entries from x's parent, then cannot remove ".." itself.
func (l *layer) removeAllDotDotLocked(name string, at loc) error {
	if err := l.dirCheck(at); err != nil {
		if errno(err) == errNoEnt {
			return nil
		}
		if errno(err) != 0 {
			return l.removeAllFailedLocked(name, errno(err))
		}
		return nameErr("unlinkat", name, err)
	}
	n, err := l.final(at)
	if err != nil {
		return fixErr("unlinkat", name, err)
	}
	ents, err := l.listLocked(at.rel, n)
	if err != nil {
		return fixErr("unlinkat", name, err)
	}
	for i, name := range ents.names {
		l.unlinkLocked(join(at.rel, name), n.under, l.nodeOf(at.rel, n.under, ents, i))
	}
	dir, base := splitPath(name)
	return pathErr("unlinkat", dir+"/"+base, errNotEmpty)
}

// removeAllFailedLocked gives the error os.RemoveAll gives when name cannot
// be resolved (a component is not a directory, a symlink loop): os opens
// the parent, failing there if the parent's own path is broken; else
// unlinkat in the parent fails with the same errno.
func (l *layer) removeAllFailedLocked(name string, e error) error {
	dir, base := splitPath(name)
	at, err := l.resolve("open", dir, "", true)
	if err != nil {
		if errno(err) == errNoEnt {
			return nil
		}
		return err
	}
	if !at.inside {
		if _, err := os.Stat(at.host); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return pathErr("unlinkat", dir+"/"+base, e)
	}
	n, err := l.final(at)
	switch {
	case err == nil && !n.exists():
		return nil
	case err == nil && at.dirOnly && n.kind != kindDir:
		return pathErr("open", dir, errNotDir)
	case err == nil && n.kind == kindSocket:
		return pathErr("open", dir, errNoDevice)
	}
	return pathErr("unlinkat", dir+"/"+base, e)
}

// splitPath is os.RemoveAll's split of a name into the parent it opens and
// the base it unlinks there; os names a failure parent+"/"+base ("x" is
// "./x", "x/../" is "x/.."). It is os's splitPath (os/path_unix.go).
func splitPath(name string) (dir, base string) {
	dir = "."
	for len(name) > 1 && name[0] == '/' && name[1] == '/' {
		name = name[1:]
	}
	i := len(name) - 1
	for ; i > 0 && name[i] == '/'; i-- {
		name = name[:i]
	}
	base = name
	for i--; i >= 0; i-- {
		if name[i] == '/' {
			if i == 0 {
				dir = name[:1]
			} else {
				dir = name[:i]
			}
			base = name[i+1:]
			break
		}
	}
	return dir, base
}

// unlinkLocked removes rel and its subtree from the view: layer entries go,
// and a whiteout hides the lower where it has something there.
func (l *layer) unlinkLocked(rel string, visible bool, n node) {
	gone := l.goneDirTimesLocked(rel) // before the times and the entries go
	l.dropDirTimesLocked(rel, true)
	l.touchDirLocked(parent(rel), l.now())
	walked := l.keepLinksLocked(rel, visible, n)
	l.goneLocked(rel, gone)
	dirs := l.removedDirsLocked(rel)
	l.deleteTreeLocked(rel)
	l.pinLocked(rel, dirs)
	l.whiteoutLocked(rel, visible, n, walked)
}

// whiteoutLocked hides the lower at rel if it shows something there;
// walked says the lower's subtree there is recorded already.
func (l *layer) whiteoutLocked(rel string, visible bool, n node, walked bool) {
	if !visible {
		return
	}
	low := n
	if n.layer {
		low = l.lowerNode(rel)
	}
	if !low.exists() {
		return
	}
	if low.fi != nil {
		l.dependLocked(rel, low.fi)
	}
	if low.kind == kindDir && !walked {
		l.dependBelowLocked(rel)
	}
	l.setEntry(rel, entry{kind: kindWhiteout})
}
