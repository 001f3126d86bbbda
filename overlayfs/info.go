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

// infoName is the Name os reports for a Stat of name.
func infoName(name string) string {
	return filepath.Base(name)
}
