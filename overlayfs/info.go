package overlayfs

import (
	"io/fs"
	"path/filepath"
	"time"
)

// fileInfo describes a layer entry. Stat results are snapshots: later
// changes to the file do not show through an info already returned.
type fileInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
	uid   int
	gid   int
	ino   uint64 // identity: see inodeOf
	nlink uint32 // names (a directory reports 2)
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.size }
func (fi *fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi *fileInfo) ModTime() time.Time { return fi.mtime }
func (fi *fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *fileInfo) Sys() any           { return sysStat(fi) }

// renamedInfo reports a lower FileInfo under the name the caller used.
type renamedInfo struct {
	fs.FileInfo
	name string
}

func (fi renamedInfo) Name() string { return fi.name }

// infoLocked returns the FileInfo of a node under the given name.
func (l *layer) infoLocked(name string, n node) fs.FileInfo {
	if !n.layer {
		return renameInfo(n.fi, name)
	}
	e := n.e
	m := e.meta()
	var b *blob
	if e.kind == kindFile {
		if b = l.blobLocked(e.ino); b != nil {
			m = b.meta
		}
	}
	fi := &fileInfo{name: name, mode: m.perm | typeOfKind(e.kind), mtime: m.mtime, uid: m.uid, gid: m.gid}
	fi.ino, fi.nlink = l.inodeLocked(e)
	switch e.kind {
	case kindDir:
		fi.size = 4096
	case kindSymlink:
		fi.size = int64(len(e.target()))
	case kindFile:
		if b != nil {
			fi.size = b.len()
		}
	}
	return fi
}

// dirInfoLocked returns fi, the FileInfo of the directory rel where the
// view has n, with the view's link count (see dirNlinkLocked).
func (l *layer) dirInfoLocked(fi fs.FileInfo, rel string, n node) fs.FileInfo {
	k, ok := l.dirNlinkLocked(rel, n)
	if !ok {
		return fi
	}
	if ours, isOurs := fi.(*fileInfo); isOurs {
		ours.nlink = k
		return ours
	}
	return nlinkInfo(fi, k)
}

// unlinkedDirInfo is fi, a directory's, with the link count of a removed
// one: 0.
func unlinkedDirInfo(fi fs.FileInfo) fs.FileInfo {
	if ours, isOurs := fi.(*fileInfo); isOurs {
		ours.nlink = 0
		return ours
	}
	return unlinkedInfo(fi)
}

// dirNlinkLocked returns the link count of the directory rel where the
// view has n, as Linux's disk file systems and tmpfs count it: 2 plus its
// subdirectories (the ".." of each). It reports false where the count is
// the one fi already holds: a lower directory with no layer entry
// directly in it (its lower count), or one whose file system counts
// otherwise (btrfs: 1). Cost: for those, a look at what is known of the
// directory's layer entries (see dirStates); else a merged listing of
// rel with types.
func (l *layer) dirNlinkLocked(rel string, n node) (uint32, bool) {
	if n.kind != kindDir {
		return 0, false
	}
	if !n.layer {
		if _, k := lowerLinkID(n.fi); k < 2 || l.bareDirLocked(rel) {
			return 0, false
		}
	}
	ls, err := l.listLocked(rel, n)
	if err != nil {
		return 0, false
	}
	k := uint32(2)
	for _, t := range ls.types {
		if t.IsDir() {
			k++
		}
	}
	return k, true
}

// infoName is the Name os reports for a Stat of name.
func infoName(name string) string {
	return filepath.Base(name)
}
