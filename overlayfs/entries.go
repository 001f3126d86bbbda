package overlayfs

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/cowfs/cowfs/internal/relpath"
)

// EntryType is the type of a layer entry.
type EntryType uint8

const (
	EntryFile     EntryType = iota + 1 // a regular file
	EntryDir                           // a directory
	EntrySymlink                       // a symbolic link
	EntryWhiteout                      // a deletion of what the lower has at the path
	EntryFIFO                          // a named pipe (type and metadata only)
	EntrySocket                        // a unix domain socket (type and metadata only)
)

func (t EntryType) String() string {
	switch t {
	case EntryFile:
		return "file"
	case EntryDir:
		return "dir"
	case EntrySymlink:
		return "symlink"
	case EntryWhiteout:
		return "whiteout"
	case EntryFIFO:
		return "fifo"
	case EntrySocket:
		return "socket"
	}
	return fmt.Sprintf("EntryType(%d)", uint8(t))
}

// LayerEntry is one entry of the layer as a low-level tool (package kernel,
// an archive writer) sees it: what an overlayfs upper directory holds.
type LayerEntry struct {
	Path     string      // slash-separated, relative to Root(); "." for the root directory's own metadata
	Type     EntryType   //
	Mode     fs.FileMode // permission bits plus setuid, setgid, sticky; no type bits
	ModTime  time.Time   //
	Uid, Gid int         //
	Opaque   bool        // directory: nothing of the lower at Path shows through
	Target   string      // symlink target
	Size     int64       // file size
	// LinkTo is, for a file, symlink, FIFO or socket with several names
	// (hard links, see Fs.Link), the first of them in Layer's order when
	// this is another one: the entry is that file under one more name.
	// PutEntry of an entry with LinkTo makes Path a link to the entry at
	// LinkTo (which must be in the view), ignoring the content.
	LinkTo string

	data []byte   // file content, when in memory; else a tail after host's or ext's
	host string   // file content on the lower, when not
	ext  *extFile // file content outside the lower, when not
}

// Open returns the content of a file entry, from memory or from the lower
// file it still refers to. The content is the one at the time of Layer.
func (e LayerEntry) Open() (io.ReadCloser, error) {
	if e.Type != EntryFile {
		return nil, pathErr("open", e.Path, errInval)
	}
	if e.ext != nil || e.host != "" {
		return lazyReader(e.host, e.ext, e.Size-int64(len(e.data)), e.data)
	}
	return io.NopCloser(bytes.NewReader(e.data)), nil
}

// Layer returns every layer entry, sorted by path, as a consistent
// snapshot: later changes to the Fs do not show in it. A parent of an entry
// always exists in the view but may have no entry itself (then it is the
// lower's directory, unchanged). Whiteouts exist only where the lower has
// the path. Cost: O(layer entries); content is not copied.
func (f *Fs) Layer() []LayerEntry { return f.primary().entries() }

func (l *layer) entries() []LayerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Freeze the blobs: from now on writes through f clone before changing.
	l.gen = l.fam.gen.Add(1)
	var out []LayerEntry
	var first map[uint64]string // see linkFirstLocked
	l.paths.Scan(func(k string, e entry) bool {
		if k == "" {
			if e.kind == kindDir { // the root's own metadata, first
				out = append(out, LayerEntry{Path: ".", Type: EntryDir, Mode: e.meta().perm, ModTime: e.meta().mtime, Uid: e.meta().uid, Gid: e.meta().gid})
			}
			return true
		}
		le := LayerEntry{Path: k, Opaque: e.opaque, Target: e.target(), LinkTo: l.linkFirstLocked(k, e, &first)}
		m := e.meta()
		switch e.kind {
		case kindFile:
			le.Type = EntryFile
			b := l.blobLocked(e.ino)
			if b == nil {
				return true
			}
			m, le.Size, le.data = b.meta, b.len(), b.data
			if b.external() {
				le.ext = b.ext
			} else if b.lazy() {
				le.host = l.host(b.src)
			}
		case kindDir:
			le.Type = EntryDir
		case kindSymlink:
			le.Type = EntrySymlink
		case kindWhiteout:
			le.Type = EntryWhiteout
		case kindFIFO:
			le.Type = EntryFIFO
		case kindSocket:
			le.Type = EntrySocket
		}
		le.Mode, le.ModTime, le.Uid, le.Gid = m.perm, m.mtime, m.uid, m.gid
		out = append(out, le)
		return true
	})
	return out
}

// PutEntry stacks e on top of the current view, as an overlayfs upper
// layer would: a whiteout removes the path and its subtree; an opaque
// directory replaces whatever was there with an empty directory; a
// non-opaque directory over a directory keeps its children; a file,
// symlink, FIFO or socket replaces. content is read for files. The parent must exist in the
// view as a directory (put parents first). Paths are taken literally: no
// symlink is followed. A file's content of 1 MiB or more given as an
// *os.File of a regular file of e.Size bytes is kept by reference (a
// descriptor of its own, so the file may be unlinked, but it must not be
// written any more) and read only when needed: the layer then costs what
// the file does, not its size in memory. A directory entry at "." sets the root directory's
// own metadata (it cannot be opaque).
func (f *Fs) PutEntry(e LayerEntry, content io.Reader) error {
	return f.primary().putEntry(e, content)
}

func (l *layer) putEntry(e LayerEntry, content io.Reader) error {
	rel := e.Path
	if rel == "." && e.Type == EntryDir && !e.Opaque {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.setEntry("", l.withAttrs(kindDir, meta{perm: e.Mode & permBits, mtime: e.ModTime, uid: e.Uid, gid: e.Gid}, ""))
		return nil
	}
	if !relpath.Below(rel) {
		return pathErr("put", e.Path, fs.ErrInvalid)
	}
	if e.LinkTo != "" {
		return l.putLink(e)
	}
	var data []byte
	var ext *extFile
	if e.Type == EntryFile && content != nil {
		if ext = keepExt(content, e.Size); ext == nil {
			var err error
			if data, err = readSized(content, e.Size); err != nil {
				return pathErr("put", e.Path, err)
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	pn, err := l.putParentLocked(rel)
	if err != nil {
		return err
	}
	visible := pn.under
	cur, err := l.lookup(rel, visible)
	if err != nil {
		return pathErr("put", e.Path, err)
	}
	m := meta{perm: e.Mode & permBits, mtime: e.ModTime, uid: e.Uid, gid: e.Gid}
	switch e.Type {
	case EntryWhiteout:
		if cur.exists() {
			l.unlinkLocked(rel, visible, cur)
		}
	case EntryDir:
		ne := l.withAttrs(kindDir, m, "")
		ne.opaque = true
		if cur.kind == kindDir && !e.Opaque {
			ne.opaque = cur.layer && cur.e.opaque
		} else {
			l.dependReplacedLocked(rel, visible)
			l.deleteTreeLocked(rel)
		}
		l.setEntry(rel, ne)
	case EntryFile:
		l.dependReplacedLocked(rel, visible)
		l.deleteTreeLocked(rel)
		b := &blob{meta: m, data: data}
		if ext != nil {
			b.lazySrc = &lazySrc{ext: ext, size: e.Size}
		}
		l.setEntry(rel, entry{kind: kindFile, ino: l.newBlobLocked(b)})
	case EntrySymlink:
		l.dependReplacedLocked(rel, visible)
		l.deleteTreeLocked(rel)
		l.setEntry(rel, l.withAttrs(kindSymlink, m, e.Target))
	case EntryFIFO, EntrySocket:
		k := kindFIFO
		if e.Type == EntrySocket {
			k = kindSocket
		}
		l.deleteTreeLocked(rel)
		l.setEntry(rel, l.withAttrs(k, m, ""))
	default:
		return pathErr("put", e.Path, fs.ErrInvalid)
	}
	// The time given wins, as a Chtimes's; what was replaced goes with its
	// times.
	l.dropDirTimesLocked(rel, e.Type != EntryDir || cur.kind != kindDir || e.Opaque)
	return nil
}

// nodeAtLocked returns the node at a literal root-relative path: no
// symlink is followed.
func (l *layer) nodeAtLocked(rel string) node {
	if rel == "" {
		n, _ := l.rootNode()
		return n
	}
	// An opaque directory of the layer shows nothing of the lower, whatever
	// its ancestors (which the layer only holds entries under): walking
	// them would cost O(depth) lookups per entry of a deep new tree.
	if e, ok := l.paths.Get(rel); ok && e.kind == kindDir && e.opaque {
		return node{kind: kindDir, layer: true, e: e}
	}
	pn := l.nodeAtLocked(parent(rel))
	if pn.kind != kindDir {
		return node{}
	}
	n, _ := l.lookup(rel, pn.under)
	return n
}

// readSized reads r to its end into a buffer of the expected size, so that
// a large file costs its size once, not the doublings of io.ReadAll.
func readSized(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(r)
	}
	data := make([]byte, size)
	n, err := io.ReadFull(r, data)
	switch err {
	case io.EOF, io.ErrUnexpectedEOF:
		return data[:n], nil
	case nil:
		rest, err := io.ReadAll(r) // longer than said
		return append(data, rest...), err
	}
	return nil, err
}

// putParentLocked returns the node of rel's parent for PutEntry: ENOTDIR
// when it is not a directory, ENOENT when it does not exist.
func (l *layer) putParentLocked(rel string) (node, error) {
	pn := l.nodeAtLocked(parent(rel))
	if pn.kind != kindDir {
		if pn.exists() {
			return pn, pathErr("put", rel, errNotDir)
		}
		return pn, pathErr("put", rel, errNoEnt)
	}
	return pn, nil
}
