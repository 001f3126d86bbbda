package overlayfs

import (
	"io/fs"
	"time"
)

// kind is the type of a path in the layer or the merged view.
type kind uint8

const (
	kindNone kind = iota // does not exist
	kindFile
	kindDir
	kindSymlink
	kindWhiteout
	kindFIFO   // a named pipe: type and metadata only
	kindSocket // a unix socket: type and metadata only
)

// special reports whether k is a FIFO or a socket: entries that hold no
// content, are never read, and which git cannot express.
func (k kind) special() bool { return k == kindFIFO || k == kindSocket }

// meta is the metadata of a directory, symlink, FIFO, socket or file.
type meta struct {
	perm  fs.FileMode // permission bits plus setuid, setgid, sticky
	mtime time.Time
	uid   int
	gid   int
}

// entry is a layer entry. A file's metadata and content live in its blob,
// found by identity (ino), so that handles follow a file through renames
// and snapshots share content; directories, symlinks, FIFOs and sockets
// carry their meta in attrs. The entry is small (24 bytes) because the
// B-tree holds it by value, and most entries are files.
type entry struct {
	kind   kind
	opaque bool   // directory: the lower at this path is hidden
	ino    uint64 // file
	attrs  *attrs // not a file: never changed once set (snapshots share it)
}

// attrs is what an entry other than a file or a whiteout carries.
type attrs struct {
	meta
	target string // symlink
	id     uint64 // identity (inode number) in the family's space of file identities; kept by metadata changes
}

// withAttrs returns an entry of kind k with metadata m and symlink target,
// and a new identity.
func (l *layer) withAttrs(k kind, m meta, target string) entry {
	return entry{kind: k, attrs: &attrs{meta: m, target: target, id: l.fam.ino.Add(1)}}
}

// meta returns the metadata of an entry that is not a file (zero for files,
// whose metadata is in their blob, and for whiteouts).
func (e entry) meta() meta {
	if e.attrs == nil {
		return meta{}
	}
	return e.attrs.meta
}

// target returns a symlink entry's target.
func (e entry) target() string {
	if e.attrs == nil {
		return ""
	}
	return e.attrs.target
}

// node is what a path is in the merged view.
//
// Its size is a multiple of 16 bytes, as loc's is: the compiler copies
// such a value in whole 16-byte moves, where a tail of 8 bytes costs an
// overlapping move that stalls the load after it (a Stat copies its loc
// and node a few times; about 3% of its cost).
type node struct {
	e     entry       //
	fi    fs.FileInfo //
	kind  kind
	layer bool // e is valid; otherwise fi is the lower's Lstat
	under bool // a directory through which the lower is visible
}

func (n node) exists() bool { return n.kind != kindNone }

func kindOfMode(m fs.FileMode) kind {
	switch {
	case m.IsDir():
		return kindDir
	case m&fs.ModeSymlink != 0:
		return kindSymlink
	case m&fs.ModeNamedPipe != 0:
		return kindFIFO
	case m&fs.ModeSocket != 0:
		return kindSocket
	default:
		return kindFile
	}
}

// typeOfKind returns the type bits of an entry of kind k: kindOfMode's
// inverse.
func typeOfKind(k kind) fs.FileMode {
	switch k {
	case kindDir:
		return fs.ModeDir
	case kindSymlink:
		return fs.ModeSymlink
	case kindFIFO:
		return fs.ModeNamedPipe
	case kindSocket:
		return fs.ModeSocket
	}
	return 0
}

// permBits are the mode bits chmod sets.
const permBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// metaOf returns the metadata of a lower file.
func metaOf(fi fs.FileInfo) meta {
	m := meta{perm: fi.Mode() & permBits, mtime: fi.ModTime()}
	m.uid, m.gid = owner(fi)
	return m
}
