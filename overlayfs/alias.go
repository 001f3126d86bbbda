package overlayfs

import (
	"path/filepath"
	"sync"
)

// A root can be reached under another name than its canonical path: a bind
// mount of it, of a directory holding it or of one of its directories, or
// any alias that resolving symlinks does not undo. The outside walk (see
// layer.outside) tells such a name by the identity of the directories it
// meets, which its own lstat of each component gives at no extra cost:
//
//   - a directory with a root's device and inode is that root;
//   - a directory where a mount of a root's file system begins (its mount
//     differs from its parent's, its device is the root's) lies in the
//     root when its path within the file system, read from the mount
//     table, lies under the root's: only then is the table read.
//
// A name that reaches its own layer's root this way continues in the merged
// view, as the canonical name would; one that reaches another root of the
// Fs is that root's (see Fs.pick), or, reached through a name inside this
// root, read from the real file system and never written (errOtherRoot).
// Identities are read on Linux (statx; subdirectory aliases need the mount
// IDs of Linux 5.8); elsewhere roots are told by name alone.

// hostKind is what an outside walk needs to know of a component's type.
type hostKind uint8

const (
	hostOther hostKind = iota
	hostDir
	hostSymlink
)

// dirID identifies a directory on the real file system: its device and
// inode, and the mount it was reached through (0 where not known).
type dirID struct{ dev, ino, mnt uint64 }

// rootIDs are the identities of "/" and of each root (in the order of
// shared.roots; a zero inode where it could not be read).
type rootIDs struct {
	slash dirID
	roots []dirID
}

// aliases holds the roots' identities, read at the first outside walk
// that needs them, so that New pays nothing for them.
type aliases struct {
	once sync.Once
	ids  *rootIDs
}

// rootIDs returns the identities of "/" and of the roots.
func (sh *shared) rootIDs() *rootIDs {
	sh.alias.once.Do(func() {
		ids := &rootIDs{}
		ids.slash, _ = statID("/")
		for _, r := range sh.roots {
			id, _ := statID(r)
			ids.roots = append(ids.roots, id)
		}
		sh.alias.ids = ids
	})
	return sh.alias.ids
}

// hostLevel is one directory of an outside walk's current path: the mount
// it was reached through and the root it lies in (an index in
// shared.roots, or -1).
type hostLevel struct {
	mnt uint64
	in  int
}

// slashLevel is the level of "/", where every outside walk starts.
func (ids *rootIDs) slashLevel() hostLevel { return hostLevel{mnt: ids.slash.mnt, in: -1} }

// enter returns the level of the directory cur, with identity id, entered
// from the directory at level parent; in is the root cur lies in and rel
// where, when cur is where the walk enters that root (-1 otherwise, or
// when the walk was in it already).
func (sh *shared) enter(ids *rootIDs, parent hostLevel, cur string, id dirID) (lv hostLevel, in int, rel string) {
	lv = hostLevel{mnt: id.mnt, in: parent.in}
	if lv.in >= 0 {
		return lv, -1, ""
	}
	lv.in, rel = sh.rootAt(ids, cur, id, parent.mnt)
	return lv, lv.in, rel
}

// rootAt returns the root the directory cur (a path without symlinks,
// with identity id, entered from a directory on mount parentMnt) lies in
// and where in it, or -1. It reads the mount table only where cur begins
// a mount of a root's file system other than the root's own mount.
func (sh *shared) rootAt(ids *rootIDs, cur string, id dirID, parentMnt uint64) (int, string) {
	var table []byte
	for i, r := range ids.roots {
		if rel, ok := relUnder(sh.roots[i], cur); ok {
			return i, rel // by name (where identities are not known)
		}
		switch {
		case r.ino == 0 || id.dev != r.dev:
			continue
		case id.ino == r.ino:
			return i, ""
		case id.mnt == 0 || parentMnt == 0 || id.mnt == parentMnt || id.mnt == r.mnt:
			// Not where a mount begins, or the root's own mount: within
			// one mount, a path enters the root only through the root.
			continue
		}
		if table == nil {
			table = mountTable()
		}
		if rel, ok := aliasRel(table, cur, id.mnt, sh.roots[i], r.mnt); ok {
			return i, rel
		}
	}
	return -1, ""
}

// aliasRel returns where cur, a directory at the top of mount mnt, lies
// in root (on mount rootMnt of the same file system), comparing both paths
// within the file system.
func aliasRel(table []byte, cur string, mnt uint64, root string, rootMnt uint64) (string, bool) {
	curFS, ok := fsPath(table, cur, mnt)
	if !ok {
		return "", false
	}
	rootFS, ok := fsPath(table, root, rootMnt)
	if !ok {
		return "", false
	}
	return relUnder(rootFS, curFS)
}

// fsPath returns the path of p, which lies on mount mnt, within that
// mount's file system.
func fsPath(table []byte, p string, mnt uint64) (string, bool) {
	root, point, ok := mountOf(table, mnt)
	if !ok {
		return "", false
	}
	rest, ok := relUnder(point, p)
	switch {
	case !ok:
		return "", false
	case rest == "":
		return root, true
	}
	return filepath.Join(root, rest), true
}

// relUnder reports whether the clean absolute path p lies at or under the
// clean absolute directory dir, and returns the rest ("" for dir itself).
func relUnder(dir, p string) (string, bool) {
	switch {
	case dir == "/":
		return p[1:], true
	case p == dir:
		return "", true
	case len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir:
		return p[len(dir)+1:], true
	}
	return "", false
}
