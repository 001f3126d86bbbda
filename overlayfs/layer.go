package overlayfs

import (
	"errors"
	"io/fs"
	"os"
	"strings"
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
// carry their meta.
type entry struct {
	kind kind
	meta
	opaque bool   // directory: the lower at this path is hidden
	target string // symlink
	ino    uint64 // file
}

// blob is a layer file: its metadata and content. A lazy blob's content is
// still the lower file src: renames and metadata copy-ups never read it;
// or, with ext, a file outside the lower (see extFile).
type blob struct {
	meta
	gen  uint64
	data []byte
	lazy bool
	src  string   // root-relative lower path, while lazy
	size int64    // size of src, while lazy
	ext  *extFile // instead of src, while lazy
}

func (b *blob) len() int64 {
	if b.lazy {
		return b.size
	}
	return int64(len(b.data))
}

// node is what a path is in the merged view.
type node struct {
	kind  kind
	layer bool        // e is valid; otherwise fi is the lower's Lstat
	e     entry       //
	fi    fs.FileInfo //
	under bool        // a directory through which the lower is visible
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

// lookup returns the merged-view node at rel without following a final
// symlink. visible says whether the lower shows through rel's parent.
// Callers hold f.mu.
func (f *layer) lookup(rel string, visible bool) (node, error) {
	return f.lookupAt(rel, "", visible)
}

// lookupAt is lookup with rel's host path, when the caller has it at hand
// ("" for f.host(rel)).
func (f *layer) lookupAt(rel, host string, visible bool) (node, error) {
	if e, ok := f.paths.Get(rel); ok {
		if e.kind == kindWhiteout {
			return node{}, nil
		}
		return node{kind: e.kind, layer: true, e: e, under: visible && e.kind == kindDir && !e.opaque}, nil
	}
	if !visible {
		return node{}, nil
	}
	if names, ok := f.names.Load(parent(rel)); ok {
		if _, ok := names.(map[string]struct{})[base(rel)]; !ok {
			return node{}, nil
		}
	}
	return f.lowerLookup(rel, host)
}

// lowerLookup returns the lower's node at rel, a path the layer has no
// entry at and whose parent shows the lower; host is rel's host path, or
// "" for f.host(rel).
func (f *layer) lowerLookup(rel, host string) (node, error) {
	fi, err := f.lowerInfo(rel, host)
	if fi == nil {
		return node{}, err
	}
	k := kindOfMode(fi.Mode())
	return node{kind: k, fi: fi, under: k == kindDir}, nil
}

// lowerInfo is the lstat of the lower at rel (host as for lowerLookup):
// nil when nothing is there. It remembers what it learns of the lower.
func (f *layer) lowerInfo(rel, host string) (fs.FileInfo, error) {
	if host == "" {
		host = f.host(rel)
	}
	fi, err := os.Lstat(host)
	if err != nil {
		if isMissing(err) {
			f.cacheNames(parent(rel))
			return nil, nil
		}
		return nil, err
	}
	if fi.IsDir() {
		f.sawDir(rel)
	}
	return fi, nil
}

// sawDir records that the lower has a real directory at rel. It needs no
// lock: the lower does not change while the Fs is in use.
func (f *layer) sawDir(rel string) {
	if _, ok := f.dirs.Load(rel); !ok {
		f.dirs.Store(rel, struct{}{})
	}
}

// cacheNames remembers the names in the lower directory dir, once it is
// known to be a real directory.
func (f *layer) cacheNames(dir string) {
	if _, ok := f.names.Load(dir); ok {
		return
	}
	if _, ok := f.dirs.Load(dir); !ok && dir != "" {
		return
	}
	d, err := os.Open(f.host(dir))
	if err != nil {
		return
	}
	list, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return
	}
	names := make(map[string]struct{}, len(list))
	for _, n := range list {
		names[n] = struct{}{}
	}
	f.names.Store(dir, names)
}

// isMissing reports whether a lower lookup error means "nothing there".
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errno(err) == errNotDir
}

// lowerNode returns the lower's node at rel ignoring the layer, or kindNone.
func (f *layer) lowerNode(rel string) node {
	fi, err := os.Lstat(f.host(rel))
	if err != nil {
		return node{}
	}
	return node{kind: kindOfMode(fi.Mode()), fi: fi, under: fi.IsDir()}
}

// lowerVisible reports whether the lower shows through at rel: no ancestor
// (nor rel itself) is opaque, a whiteout, or a non-directory in the layer.
// Callers hold f.mu.
func (f *layer) lowerVisible(rel string) bool {
	for p := rel; ; {
		if e, ok := f.paths.Get(p); ok {
			if e.kind != kindDir || e.opaque {
				return false
			}
		}
		if p == "" {
			return true
		}
		p = parent(p)
	}
}

// permBits are the mode bits chmod sets.
const permBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// metaOf returns the metadata of a lower file.
func metaOf(fi fs.FileInfo) meta {
	m := meta{perm: fi.Mode() & permBits, mtime: fi.ModTime()}
	m.uid, m.gid = owner(fi)
	return m
}

// newBlobLocked registers content for a new file identity.
func (f *layer) newBlobLocked(b *blob) uint64 {
	ino := f.fam.ino.Add(1)
	b.gen = f.gen
	f.blobs.Set(ino, b)
	return ino
}

// blobLocked returns the content of ino for reading.
func (f *layer) blobLocked(ino uint64) *blob {
	b, _ := f.blobs.Get(ino)
	return b
}

// ownBlobLocked returns the blob of ino for changing, cloning it first if a
// snapshot or a fork shares it. It returns nil if ino is gone.
func (f *layer) ownBlobLocked(ino uint64) *blob {
	b, ok := f.blobs.Get(ino)
	if !ok {
		return nil
	}
	if b.gen != f.gen {
		b = b.clone(f.gen)
		f.blobs.Set(ino, b)
	}
	return b
}

// clone returns a private copy of b with generation gen.
func (b *blob) clone(gen uint64) *blob {
	nb := *b
	nb.gen = gen
	if !b.lazy {
		nb.data = append([]byte(nil), b.data...)
	}
	return &nb
}

// load reads lazy content from the lower. b must be owned by the caller.
func (b *blob) load(f *layer) error {
	if !b.lazy {
		return nil
	}
	var data []byte
	var err error
	if b.external() {
		data, err = b.loadExt()
	} else {
		data, err = readFileSized(f.host(b.src), b.size)
	}
	if err != nil {
		return err
	}
	b.data, b.lazy, b.src, b.size, b.ext = data, false, "", 0, nil
	return nil
}

// dropBlobLocked forgets the content of an unlinked file, or marks it as an
// orphan while handles still use it.
func (f *layer) dropBlobLocked(ino uint64) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	// A read handle opened on the lower file before its copy-up reads this
	// content once it exists, even after an unlink, as with one inode.
	if f.opened[ino] > 0 || f.copyIno[ino] {
		f.orphan[ino] = true
		return
	}
	f.blobs.Delete(ino)
}

// deleteTreeLocked removes the layer entries at and below rel.
func (f *layer) deleteTreeLocked(rel string) {
	var keys []string
	f.eachBelow(rel, true, func(k string, e entry) bool {
		keys = append(keys, k)
		return true
	})
	for _, k := range keys {
		if e, ok := f.paths.Delete(k); ok && e.kind == kindFile {
			f.dropBlobLocked(e.ino)
		}
	}
}

// eachBelow calls fn for layer entries strictly below rel (and rel itself if
// self), in path order.
func (f *layer) eachBelow(rel string, self bool, fn func(k string, e entry) bool) {
	prefix := rel + "/"
	if rel == "" {
		prefix = ""
	}
	if self {
		if e, ok := f.paths.Get(rel); ok && rel != "" {
			if !fn(rel, e) {
				return
			}
		}
	}
	f.paths.Ascend(prefix, func(k string, e entry) bool {
		if !strings.HasPrefix(k, prefix) {
			return false
		}
		if k == "" {
			return true
		}
		return fn(k, e)
	})
}

// parent returns the parent of a root-relative path ("" for top level).
func parent(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

// join joins a root-relative directory and a name.
func join(dir, name string) string {
	if name == "" {
		return dir
	}
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// base returns the last element of a root-relative path.
func base(rel string) string {
	return rel[strings.LastIndexByte(rel, '/')+1:]
}

// goneRel is the rel of a directory handle whose directory was removed: no
// path holds a NUL, so it names nothing.
const goneRel = "\x00"

// bind registers where an open directory handle is, so that the handle
// follows its directory through renames and knows its removal, as a
// handle on an inode does. Callers hold f.mu (read or write); the string
// changes under f.mu held for writing.
func (f *layer) bind(rel *string) {
	f.hmu.Lock()
	if f.bound == nil { // a fork or a snapshot's view
		f.bound = make(map[*string]struct{})
	}
	f.bound[rel] = struct{}{}
	f.hmu.Unlock()
}

// unbind forgets a directory handle.
func (f *layer) unbind(rel *string) {
	f.hmu.Lock()
	delete(f.bound, rel)
	f.hmu.Unlock()
}

// movedLocked moves the bound handles at and below from to the same place
// below to. Callers hold f.mu for writing.
func (f *layer) movedLocked(from, to string) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	for p := range f.bound {
		if *p == from || strings.HasPrefix(*p, from+"/") {
			*p = to + (*p)[len(from):]
		}
	}
}

// goneLocked marks the bound handles at and below rel as removed.
// Callers hold f.mu for writing.
func (f *layer) goneLocked(rel string) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	for p := range f.bound {
		if *p == rel || strings.HasPrefix(*p, rel+"/") || rel == "" {
			*p = goneRel
		}
	}
}
