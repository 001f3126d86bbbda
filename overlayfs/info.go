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
// view has n, with the view's link count (see dirNlinkLocked) and
// modification time (see dirtimes.go).
func (l *layer) dirInfoLocked(fi fs.FileInfo, rel string, n node) fs.FileInfo {
	k, ok := l.dirNlinkLocked(rel, n)
	t, moved := l.dirTimeLocked(rel)
	if ours, isOurs := fi.(*fileInfo); isOurs {
		if ok {
			ours.nlink = k
		}
		if moved {
			ours.mtime = t
		}
		return ours
	}
	if ok {
		fi = nlinkInfo(fi, k)
	}
	if moved {
		fi = timedInfo{fi, t}
	}
	return fi
}

// timedInfo reports a lower directory's FileInfo with the time of the
// layer's last change in it.
type timedInfo struct {
	fs.FileInfo
	mtime time.Time
}

func (fi timedInfo) ModTime() time.Time { return fi.mtime }

// Sys is the lower's, with that time where it is a *syscall.Stat_t.
func (fi timedInfo) Sys() any { return timedSys(fi.FileInfo.Sys(), fi.mtime) }

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
// otherwise (btrfs: 1).
//
// Where the lower shows through rel, the count starts from the lower
// directory's own and each layer entry directly in rel corrects it (a
// directory where the lower had none, or none where it had one): the
// cost is a look at the layer's children and, for each, the lower's
// listing of rel if cached or else an lstat. A Stat of a big lower
// directory with one new file in it lists nothing. Where the lower does
// not count subdirectories, it is a merged listing.
func (l *layer) dirNlinkLocked(rel string, n node) (uint32, bool) {
	if n.kind != kindDir {
		return 0, false
	}
	lowerFi := n.fi
	if n.layer && n.under {
		if fi, err := lstatHost(l.host(rel)); err == nil && fi.IsDir() {
			lowerFi = fi
		}
	}
	_, base := lowerLinkID(lowerFi)
	switch {
	case !n.layer && (base < 2 || l.bareDirLocked(rel)):
		return 0, false
	case n.under && lowerFi != nil && base >= 2:
		return l.correctedNlinkLocked(rel, base), true
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

// correctedNlinkLocked is the view's link count of rel, a directory the
// lower shows through whose lower count is base (see dirNlinkLocked).
func (l *layer) correctedNlinkLocked(rel string, base uint64) uint32 {
	k := int64(base)
	names, es := l.childrenLocked(rel)
	var listed *map[string]struct{}
	if d := l.lower().dir(rel); d != nil {
		listed = d.names.Load()
	}
	for i, e := range es {
		maybe := listed == nil // the lower may have something at that name
		if !maybe {
			_, maybe = (*listed)[names[i]]
		}
		was := false // a directory in the lower at that name
		if maybe {
			fi, err := lstatHost(l.host(join(rel, names[i])))
			was = err == nil && fi.IsDir()
		}
		switch is := e.kind == kindDir; {
		case is && !was:
			k++
		case was && !is:
			k--
		}
	}
	return uint32(max(k, 2))
}

// infoName is the Name os reports for a Stat of name.
func infoName(name string) string {
	return filepath.Base(name)
}
