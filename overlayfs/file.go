package overlayfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/spf13/afero"
)

var (
	_ afero.File      = (*file)(nil)
	_ afero.File      = (*dir)(nil)
	_ afero.File      = (*osFile)(nil)
	_ fs.ReadDirFile  = (*file)(nil)
	_ fs.ReadDirFile  = (*dir)(nil)
	_ fs.ReadDirFile  = (*osFile)(nil)
	_ io.StringWriter = (*file)(nil)
	_ io.ReaderFrom   = (*file)(nil)
	_ io.ReaderFrom   = (*dir)(nil)
	_ io.ReaderFrom   = (*osFile)(nil)
	_ io.WriterTo     = (*file)(nil)
	_ io.WriterTo     = (*dir)(nil)
	_ io.WriterTo     = (*osFile)(nil)
)

// file is a handle on a layer file. It refers to the file's identity, so it
// follows the file through renames and keeps working after an unlink.
// Its fields fit 64 bytes, a size class below 80: a handle is made per open.
type file struct {
	fs   *layer
	name string
	ino  uint64
	flag int32 // os's open flags (they fit 32 bits)

	closed bool
	detach bool // last is private: the layer no longer has ino

	mu   sync.Mutex // guards off, closed, last
	off  int64
	last *blob // the content last seen; kept if the identity is dropped
}

func (h *file) readable() bool { return int(h.flag)&(os.O_WRONLY|os.O_RDWR) != os.O_WRONLY }
func (h *file) writable() bool { return int(h.flag)&(os.O_WRONLY|os.O_RDWR) != 0 }
func (h *file) appends() bool  { return int(h.flag)&os.O_APPEND != 0 }

// content returns the blob to read (write=false) or change (write=true).
// Content still on the lower is read into a buffer with room for spare
// more bytes: what the caller is about to write. Callers hold h.mu and
// h.fs.mu.
func (h *file) content(write bool, spare int) (*blob, error) {
	f := h.fs
	b, err := h.current(write)
	if err != nil {
		return nil, err
	}
	if b.lazy() {
		if !h.detach && !write {
			b = f.ownBlobLocked(h.ino)
		}
		if err := b.load(f, spare); err != nil {
			return nil, err
		}
	}
	h.last = b
	return b, nil
}

// current returns the blob of the handle's file as it is (perhaps lazy):
// the layer's, owned if write, or the handle's private copy once the file
// is gone. Callers hold h.mu and h.fs.mu.
func (h *file) current(write bool) (*blob, error) {
	f := h.fs
	if b := h.last; b != nil && !h.detach && b.gen == f.gen {
		// Owned by the layer: it is the layer's blob of ino, found
		// without a search. Every change that could make it not so
		// (a snapshot, fork, restore, reset) moves f.gen, and the layer
		// forgets an identity only when no handle holds it.
		return b, nil
	}
	var b *blob
	if !h.detach {
		if write {
			b = f.ownBlobLocked(h.ino)
		} else {
			b = f.blobLocked(h.ino)
		}
		if b == nil && h.last != nil {
			h.last, h.detach = h.last.clone(0), true
		}
	}
	if h.detach {
		b = h.last
	}
	if b == nil {
		return nil, pathErr("read", h.name, fs.ErrNotExist)
	}
	return b, nil
}

// lock takes the handle and the file system locks, checking the handle.
func (h *file) lock(op string) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return pathErr(op, h.name, os.ErrClosed)
	}
	h.fs.mu.Lock()
	return nil
}

func (h *file) unlock() {
	h.fs.mu.Unlock()
	h.mu.Unlock()
}

func (h *file) Name() string { return h.name }

func (h *file) Read(p []byte) (int, error) {
	if err := h.lock("read"); err != nil {
		return 0, err
	}
	defer h.unlock()
	if len(p) == 0 {
		return 0, nil // as os: no system call, no error
	}
	n, err := h.readLocked(p, h.off)
	h.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil // a short Read is not the end; the next one says so
	}
	return n, err
}

// readLocked reads at off: io.EOF when p is not filled, as ReadAt says.
func (h *file) readLocked(p []byte, off int64) (int, error) {
	if !h.readable() {
		return 0, pathErr("read", h.name, errBadFd)
	}
	b, err := h.content(false, 0)
	if err != nil {
		return 0, fixErr("read", h.name, err)
	}
	if off >= int64(len(b.data)) {
		return 0, io.EOF
	}
	n := copy(p, b.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (h *file) ReadAt(p []byte, off int64) (int, error) {
	// os checks in this order: the offset, an empty buffer, then the handle.
	if off < 0 {
		return 0, pathErr("readat", h.name, errNegativeOffset)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := h.lock("read"); err != nil {
		return 0, err
	}
	defer h.unlock()
	return h.readLocked(p, off)
}

func (h *file) Write(p []byte) (int, error) {
	if err := h.lock("write"); err != nil {
		return 0, err
	}
	defer h.unlock()
	if !h.writable() {
		return 0, pathErr("write", h.name, errBadFd)
	}
	p, full := h.quotaWrite(p, h.off, h.appends()) // WithQuota: what fits
	if len(p) == 0 && full != nil {
		return 0, full
	}
	b, done, err := h.writeContent(p, h.off, h.appends())
	switch {
	case err != nil:
		return 0, fixErr("write", h.name, err)
	case done:
		h.off = b.len()
		return len(p), full
	}
	if h.appends() && len(p) > 0 {
		h.off = int64(len(b.data)) // write(2) of nothing does not move to the end
	}
	h.off = h.fs.writeAt(b, p, h.off)
	return len(p), full
}

// writeContent returns the content to write p into at off, owned and
// loaded; or, when the write lands at the end (appnd, or off is the size)
// of content still lazy, appends p to its tail without reading the rest
// and reports done. Callers hold h.mu and h.fs.mu.
func (h *file) writeContent(p []byte, off int64, appnd bool) (b *blob, done bool, err error) {
	if b, err = h.current(true); err != nil {
		return nil, false, err
	}
	h.last = b
	if b.lazy() && len(p) > 0 && (appnd || off == b.len()) {
		b.data = append(b.data, p...)
		b.mtime = h.fs.now()
		return b, true, nil
	}
	return b, false, b.load(h.fs, len(p))
}

func (h *file) WriteAt(p []byte, off int64) (int, error) {
	// os checks in this order: append mode, the offset, then the handle.
	if h.appends() {
		return 0, errWriteAtInAppendMode
	}
	if off < 0 {
		return 0, pathErr("writeat", h.name, errNegativeOffset)
	}
	if len(p) == 0 {
		return 0, nil // os does no system call for nothing
	}
	if err := h.lock("write"); err != nil {
		return 0, err
	}
	defer h.unlock()
	if !h.writable() {
		return 0, pathErr("write", h.name, errBadFd)
	}
	p, full := h.quotaWrite(p, off, false) // WithQuota: what fits
	if len(p) == 0 {
		return 0, full
	}
	b, done, err := h.writeContent(p, off, false)
	if err != nil {
		return 0, fixErr("write", h.name, err)
	}
	if !done {
		h.fs.writeAt(b, p, off)
	}
	if full != nil {
		// As os.File.WriteAt: the bytes are written, but it drops the
		// count of a pwrite cut short by an error.
		return 0, full
	}
	return len(p), nil
}

func (h *file) WriteString(s string) (int, error) { return h.Write([]byte(s)) }

// writeAt writes p at off in an owned, loaded blob, zero-filling any gap,
// and returns the offset after it.
func (l *layer) writeAt(b *blob, p []byte, off int64) int64 {
	if len(p) == 0 {
		return off // writing nothing past the end makes no hole
	}
	end := off + int64(len(p))
	if end > int64(len(b.data)) {
		if off > int64(len(b.data)) {
			b.resize(off) // the hole reads as zeros
		}
		b.data = append(b.data[:off], p...)
	} else {
		copy(b.data[off:], p)
	}
	b.mtime = l.now()
	return end
}

func (h *file) Seek(offset int64, whence int) (int64, error) {
	if err := h.lock("seek"); err != nil {
		return 0, err
	}
	defer h.unlock()
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = h.off + offset
	case io.SeekEnd:
		b, err := h.current(false) // the size is known without the content
		if err != nil {
			return 0, fixErr("seek", h.name, err)
		}
		abs = b.len() + offset
	default:
		return 0, pathErr("seek", h.name, errInval)
	}
	if abs < 0 {
		return 0, pathErr("seek", h.name, errInval)
	}
	h.off = abs
	return abs, nil
}

func (h *file) Truncate(size int64) error {
	if err := h.lock("truncate"); err != nil {
		return err
	}
	defer h.unlock()
	if size < 0 || !h.writable() {
		return pathErr("truncate", h.name, errInval)
	}
	b, err := h.content(true, 0)
	if err != nil {
		return fixErr("truncate", h.name, err)
	}
	h.quotaResize(b.len(), size)
	b.resize(size)
	b.mtime = h.fs.now()
	return nil
}

func (h *file) Stat() (fs.FileInfo, error) {
	if err := h.lock("stat"); err != nil {
		return nil, err
	}
	defer h.unlock()
	b := h.last
	if !h.detach {
		if cur := h.fs.blobLocked(h.ino); cur != nil {
			b = cur
		}
	}
	if b == nil {
		return nil, pathErr("stat", h.name, fs.ErrNotExist)
	}
	return &fileInfo{name: infoName(h.name), size: b.len(), mode: b.perm, mtime: b.mtime, uid: b.uid, gid: b.gid,
		ino: inodeOf(h.ino), nlink: h.fs.handleNlinkLocked(h)}, nil
}

func (h *file) Sync() error {
	if err := h.lock("sync"); err != nil {
		return err
	}
	h.unlock()
	return nil
}

func (h *file) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return pathErr("close", h.name, os.ErrClosed)
	}
	h.closed = true
	h.fs.release(h.ino)
	return nil
}

// resize sets the length of loaded content; growth reads as zeros.
func (b *blob) resize(size int64) {
	old := int64(len(b.data))
	if size <= old {
		b.data = b.data[:size]
		return
	}
	b.data = slices.Grow(b.data, int(size-old))[:size]
	clear(b.data[old:])
}

func (h *file) Readdir(int) ([]fs.FileInfo, error) {
	return []fs.FileInfo{}, h.notDir()
}

func (h *file) Readdirnames(int) ([]string, error) {
	return []string{}, h.notDir()
}

func (h *file) ReadDir(int) ([]fs.DirEntry, error) {
	return nil, h.notDir()
}

func (h *file) notDir() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return pathErr("readdirent", h.name, errFileClosing)
	}
	return pathErr("readdirent", h.name, errNotDir)
}

// dir is a handle on a directory inside the root. Its listing is taken at
// the first read and paged from there, merged and sorted.
type dir struct {
	fs   *layer
	name string
	rel  string // bound (see layer.bind)
	slot int32  // rel's slot in the layer's bindings
	n    node

	appnd bool // opened with O_APPEND: WriteAt refuses first, as os

	// lower is the open lower directory of a handle opened on it (owned
	// by that handle), listed instead of opening it again while the
	// handle is still at lowerRel.
	lower    *os.File
	lowerRel string

	mu     sync.Mutex
	ents   listing
	read   bool
	pos    int
	off    int64 // what Seek reports; only a seek to 0 rewinds the listing
	closed bool
}

func (d *dir) Name() string { return d.name }

// next returns up to n entries (all remaining for n <= 0), listing the
// directory in the given mode at the first read.
func (d *dir) next(n int, mode listMode) (listing, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return listing{}, pathErr("readdirent", d.name, errFileClosing)
	}
	if !d.read || d.pos == len(d.ents.names) {
		ents, err := d.list(mode)
		if err != nil {
			return listing{}, err
		}
		if !d.read {
			d.ents, d.read = ents, true
		}
	}
	end := len(d.ents.names)
	if n > 0 {
		if d.pos == end {
			return listing{}, io.EOF
		}
		end = min(d.pos+n, end)
	}
	page := d.ents.page(d.pos, end)
	d.pos = end
	return page, nil
}

// list checks that the handle's directory is still there, as getdents on
// Linux does (a directory removed since it was opened lists nothing more,
// with ENOENT), and takes its listing unless it has one. Callers hold d.mu.
func (d *dir) list(mode listMode) (listing, error) {
	if d.fs == nil {
		if d.read {
			return listing{}, nil
		}
		ents, err := readLower(d.lower, mode, listing{}, nil)
		return ents, fixErr("readdirent", d.name, err)
	}
	f := d.fs
	f.mu.RLock()
	defer f.mu.RUnlock()
	var n node
	lower := d.lower
	if _, inLayer := f.paths.Get(d.rel); lower != nil && d.rel == d.lowerRel && !inLayer && f.lowerVisible(d.rel) {
		// The lower directory this handle has open, still shown: the
		// lower does not change, so it is still a directory.
		n = node{kind: kindDir, under: true}
	} else {
		n = f.nodeAtLocked(d.rel)
		if d.rel != d.lowerRel {
			lower = nil // moved since opened: the lower of where it is now
		}
	}
	switch {
	case n.kind != kindDir:
		return listing{}, pathErr("readdirent", d.name, errNoEnt)
	case d.read:
		return listing{}, nil
	}
	ents, err := f.listDirLocked(d.rel, n, mode, lower)
	return ents, fixErr("readdirent", d.name, err)
}

func (d *dir) Readdir(n int) ([]fs.FileInfo, error) {
	// Readdir(-1) takes the lower's infos with the listing, as os's
	// Readdir takes them (an lstat relative to the open directory); pages
	// of a listing are looked up when they are returned, as os does.
	mode := listInfos
	if n > 0 {
		mode = listTypes
	}
	page, err := d.next(n, mode)
	infos := make([]fs.FileInfo, 0, len(page.names))
	if d.fs == nil {
		for i, name := range page.names {
			fi := page.infoAt(i)
			if fi == nil {
				var ierr error
				if fi, ierr = os.Lstat(d.lower.Name() + "/" + name); errors.Is(ierr, fs.ErrNotExist) {
					continue // vanished since listed, as os skips it
				} else if ierr != nil {
					return infos, ierr
				}
			}
			infos = append(infos, fi)
		}
		return infos, err
	}
	f := d.fs
	f.mu.RLock()
	defer f.mu.RUnlock()
	if d.rel == goneRel {
		return infos, err // every entry vanished with the directory
	}
	// The page's entries as they are now: the layer's children, looked up
	// in one pass beside the page (both are in name order), over the
	// lower's when it still shows through the directory.
	visible := f.lowerVisible(d.rel)
	kids, es := f.childrenLocked(d.rel)
	k := 0
	for i, name := range page.names {
		for k < len(kids) && kids[k] < name {
			k++
		}
		var fi fs.FileInfo
		switch {
		case k < len(kids) && kids[k] == name:
			if es[k].kind == kindWhiteout {
				continue // removed since listed
			}
			fi = f.infoLocked(name, node{kind: es[k].kind, layer: true, e: es[k]})
		case !visible:
			continue // the lower is hidden since listed
		case page.infoAt(i) != nil:
			fi = page.infoAt(i) // taken with the listing, by this call
		default:
			var ierr error
			fi, ierr = os.Lstat(f.host(join(d.rel, name)))
			switch {
			case errors.Is(ierr, fs.ErrNotExist):
				continue // vanished since listed, as os skips it
			case ierr != nil:
				return infos, ierr
			}
		}
		infos = append(infos, fi)
	}
	return infos, err
}

// info returns the FileInfo of a listed entry as os's DirEntry.Info finds
// it: by an Lstat of the handle's name joined with the entry's, now (so
// relative to the working directory of now, as os does), outside the root
// too. (Readdir's infos are lstats relative to the open directory, as
// os's.)
func (d *dir) info(name string) (fs.FileInfo, error) {
	if d.fs == nil {
		return os.Lstat(d.name + "/" + name)
	}
	return d.fs.stat("lstat", d.name+"/"+name, "", false)
}

// Readdirnames returns the listing's own names: pages are capped, and the
// handle never changes a listing once taken.
func (d *dir) Readdirnames(n int) ([]string, error) {
	page, err := d.next(n, listNames)
	if page.names == nil {
		page.names = []string{}
	}
	return page.names, err
}

func (d *dir) ReadDir(n int) ([]fs.DirEntry, error) {
	page, err := d.next(n, listTypes)
	var out []fs.DirEntry
	for i, name := range page.names {
		typ, ok := page.typeAt(i)
		if !ok {
			// Listed by name by an earlier Readdirnames: the type as
			// os's ReadDir finds one getdents does not give.
			fi, err := d.info(name)
			if err != nil {
				continue // vanished since listed
			}
			typ = fi.Mode().Type()
		}
		out = append(out, dirEntry{name, typ, d})
	}
	return out, err
}

func (d *dir) Stat() (fs.FileInfo, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, pathErr("stat", d.name, os.ErrClosed)
	}
	d.fs.mu.RLock()
	defer d.fs.mu.RUnlock()
	// The directory as it is now, wherever it went; once removed, as it
	// was last seen (as fstat of a removed directory).
	n := d.n
	if cur := d.fs.nodeAtLocked(d.rel); cur.kind == kindDir {
		n = cur
	}
	if !n.layer && n.fi == nil {
		return nil, pathErr("stat", d.name, fs.ErrNotExist)
	}
	return d.fs.infoLocked(infoName(d.name), n), nil
}

func (d *dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return pathErr("close", d.name, os.ErrClosed)
	}
	d.closed = true
	if d.fs != nil {
		d.fs.unbind(&d.rel, d.slot)
	}
	return nil
}

// Seek to the start rewinds the listing, as on os. Other offsets are
// accepted and reported back, as the kernel does for directories, but do
// not move the listing.
func (d *dir) Seek(offset int64, whence int) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, pathErr("seek", d.name, os.ErrClosed)
	}
	abs := offset
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		abs += d.off
	default:
		return 0, pathErr("seek", d.name, errInval)
	}
	if abs < 0 {
		return 0, pathErr("seek", d.name, errInval)
	}
	if abs == 0 {
		d.read, d.ents, d.pos = false, listing{}, 0
	}
	d.off = abs
	return abs, nil
}

func (d *dir) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, d.fail("read", nil)
	}
	return 0, d.fail("read", errIsDir)
}

func (d *dir) ReadAt(p []byte, off int64) (int, error) {
	switch {
	case off < 0:
		return 0, pathErr("readat", d.name, errNegativeOffset)
	case len(p) == 0:
		return 0, nil
	}
	return 0, d.fail("read", errIsDir)
}

func (d *dir) Write([]byte) (int, error) { return 0, d.fail("write", errBadFd) }

func (d *dir) WriteAt(p []byte, off int64) (int, error) {
	switch {
	case d.appnd:
		return 0, errWriteAtInAppendMode
	case off < 0:
		return 0, pathErr("writeat", d.name, errNegativeOffset)
	case len(p) == 0:
		return 0, nil
	}
	return 0, d.fail("write", errBadFd)
}

func (d *dir) WriteString(s string) (int, error) { return d.Write([]byte(s)) }
func (d *dir) Truncate(int64) error              { return d.fail("truncate", errInval) }
func (d *dir) Sync() error                       { return d.fail("sync", nil) }

func (d *dir) fail(op string, err error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return pathErr(op, d.name, os.ErrClosed)
	}
	if err == nil {
		return nil
	}
	return pathErr(op, d.name, err)
}

// osFile is a real file opened read-only from the lower, or any real file
// outside the root. Errors carry the caller's name; directory listings are
// sorted (and merged with the layer when fs is set).
type osFile struct {
	*os.File
	name string
	fs   *layer       // set for files inside the root
	rel  string       // root-relative path, inside the root
	seen atomic.Int64 // fs.copies when last checked
	flag int          // the open flags
	at   string       // where the handle is now, inside the root (bound: follows renames)
	slot int32        // at's slot in the layer's bindings

	mu  sync.Mutex
	d   *dir                 // listing state, once listed
	cow atomic.Pointer[file] // the layer copy of this lower file, once written elsewhere (set under mu)
}

// layer returns the handle to read through once another handle has copied
// this lower file up, so that every handle sees every write. The check
// costs one atomic load until some copy-up happens.
func (o *osFile) layer() *file {
	if o.fs == nil {
		return nil
	}
	if h := o.cow.Load(); h != nil || o.fs.copies.Load() == o.seen.Load() {
		return h
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if h := o.cow.Load(); h != nil {
		return h
	}
	f := o.fs
	f.mu.RLock()
	o.seen.Store(f.copies.Load())
	ino, ok := f.copied[o.rel]
	if ok && f.blobLocked(ino) == nil {
		ok = false
	}
	f.mu.RUnlock()
	if !ok {
		return nil
	}
	off, err := o.File.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil
	}
	f.hold(ino)
	h := &file{fs: f, name: o.name, ino: ino, flag: int32(os.O_RDONLY), off: off}
	o.cow.Store(h)
	return h
}

func (o *osFile) dir() (*dir, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.d == nil {
		d, err := o.asDir()
		if err != nil {
			return nil, err
		}
		o.d = d
	}
	return o.d, nil
}

func (o *osFile) Readdir(n int) ([]fs.FileInfo, error) {
	d, err := o.dir()
	if err != nil {
		return []fs.FileInfo{}, err
	}
	return d.Readdir(n)
}

func (o *osFile) Readdirnames(n int) ([]string, error) {
	d, err := o.dir()
	if err != nil {
		return []string{}, err
	}
	return d.Readdirnames(n)
}

func (o *osFile) ReadDir(n int) ([]fs.DirEntry, error) {
	d, err := o.dir()
	if err != nil {
		return nil, err
	}
	return d.ReadDir(n)
}

func (o *osFile) Name() string { return o.name }

func (o *osFile) Stat() (fs.FileInfo, error) {
	if h := o.layer(); h != nil {
		return h.Stat()
	}
	fi, err := o.File.Stat()
	if err != nil {
		return nil, fixErr("", o.name, err)
	}
	if o.fs != nil && fi.IsDir() {
		// A lower directory whose metadata the layer changed since.
		f := o.fs
		f.mu.RLock()
		n := f.nodeAtLocked(o.at)
		var lfi fs.FileInfo
		if n.layer && n.kind == kindDir {
			lfi = f.infoLocked(infoName(o.name), n)
		}
		f.mu.RUnlock()
		if lfi != nil {
			return lfi, nil
		}
	}
	if o.fs != nil && !fi.IsDir() && o.fs.goneHandle(o) {
		fi = unlinkedInfo(fi)
	}
	return renameInfo(fi, infoName(o.name)), nil
}

func (o *osFile) Read(p []byte) (int, error) {
	if h := o.layer(); h != nil {
		return h.Read(p)
	}
	n, err := o.File.Read(p)
	if err != nil && err != io.EOF {
		err = fixErr("", o.name, err)
	}
	return n, err
}

func (o *osFile) ReadAt(p []byte, off int64) (int, error) {
	if h := o.layer(); h != nil {
		return h.ReadAt(p, off)
	}
	n, err := o.File.ReadAt(p, off)
	if err != nil && err != io.EOF {
		if off < 0 {
			return n, pathErr("readat", o.name, errNegativeOffset)
		}
		err = fixErr("", o.name, err)
	}
	return n, err
}

func (o *osFile) Write(p []byte) (int, error) {
	n, err := o.File.Write(p)
	return n, fixErr("", o.name, err)
}

func (o *osFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := o.File.WriteAt(p, off)
	var pe *fs.PathError
	if off < 0 && errors.As(err, &pe) && pe.Op == "writeat" {
		return n, pathErr("writeat", o.name, errNegativeOffset)
	}
	return n, fixErr("", o.name, err) // os's append-mode error passes as it is
}

func (o *osFile) WriteString(s string) (int, error) { return o.Write([]byte(s)) }

func (o *osFile) Seek(offset int64, whence int) (int64, error) {
	if h := o.layer(); h != nil {
		return h.Seek(offset, whence)
	}
	if offset == 0 && whence == io.SeekStart {
		o.mu.Lock()
		o.d = nil
		o.mu.Unlock()
	}
	n, err := o.File.Seek(offset, whence)
	return n, fixErr("", o.name, err)
}

func (o *osFile) Truncate(size int64) error { return fixErr("", o.name, o.File.Truncate(size)) }
func (o *osFile) Sync() error               { return fixErr("", o.name, o.File.Sync()) }
func (o *osFile) Close() error {
	err := fixErr("", o.name, o.File.Close())
	if o.fs != nil && err == nil {
		o.fs.unbind(&o.at, o.slot)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.d != nil && err == nil {
		o.d.Close()
	}
	if h := o.cow.Load(); h != nil && err == nil {
		h.Close()
	}
	return err
}

// asDir makes the listing state of a directory opened on the lower (the
// fast path opens a directory so when nothing marks it in the layer). The
// listing is taken at the first read, from this handle's descriptor while
// the directory is where it was opened, merged with the layer there.
func (o *osFile) asDir() (*dir, error) {
	fi, err := o.File.Stat()
	if errors.Is(err, os.ErrClosed) {
		return nil, pathErr("readdirent", o.name, errFileClosing)
	}
	if err != nil {
		return nil, fixErr("readdirent", o.name, err)
	}
	if !fi.IsDir() {
		return nil, pathErr("readdirent", o.name, errNotDir)
	}
	d := &dir{name: o.name, lower: o.File}
	if o.fs != nil {
		// Bound under the lock it read o.at under: a rename in between
		// would move o.at and not d.rel.
		o.fs.mu.RLock()
		d.fs, d.rel, d.lowerRel = o.fs, o.at, o.rel
		d.slot = o.fs.bind(&d.rel)
		o.fs.mu.RUnlock()
	}
	return d, nil
}

// io.Copy between handles does what it does between *os.File handles on
// Linux (os's File.ReadFrom and File.WriteTo, zero_copy_linux.go and
// internal/poll's CopyFileRange). Unless the destination appends, its
// ReadFrom tries copy_file_range when the reader is a handle (or a
// *io.LimitedReader of one, whose limit it honours: a limit of 0 copies
// nothing and reads nothing). That fails before a byte is read: with
// ErrClosed when either handle is closed, EISDIR when either is a
// directory, EBADF when the source cannot be read or the destination
// cannot be written; where either end is not a regular file (a FIFO, a
// device) it falls back to a plain copy. The plain copy, what every other
// case does, fails at the first read or write that fails.

// copyEnd is a handle as one end of a copy: what copy_file_range looks
// at.
type copyEnd interface {
	copyState() (closed bool, mode fs.FileMode, readable, writable, appends bool)
}

// copySource is a handle as the source of a copy: only its Read shows (as
// os's fileWithoutWriteTo), and what copy_file_range looks at.
type copySource struct {
	io.Reader
	end copyEnd
}

func (s copySource) copyState() (bool, fs.FileMode, bool, bool, bool) { return s.end.copyState() }

// copyRange returns what copy_file_range decides for a copy from r into
// dst: handled with the error it gives (nil for a limit of 0), or not
// handled, where the plain copy gives what copy_file_range would.
func copyRange(dst copyEnd, r io.Reader) (handled bool, err error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if lr.N <= 0 {
			return true, nil
		}
		r = lr.R
	}
	src, ok := r.(copyEnd)
	if !ok {
		return false, nil
	}
	sclosed, smode, sreadable, _, _ := src.copyState()
	dclosed, dmode, _, dwritable, _ := dst.copyState()
	switch {
	case dclosed || sclosed:
		return true, os.ErrClosed
	case smode.IsDir() || dmode.IsDir():
		return true, os.NewSyscallError("copy_file_range", errIsDir)
	case !smode.IsRegular() || !dmode.IsRegular():
		return false, nil
	case !sreadable || !dwritable:
		return true, os.NewSyscallError("copy_file_range", errBadFd)
	}
	return false, nil
}

// readFrom is ReadFrom of the handle dst (written through w, named name).
func readFrom(dst copyEnd, w io.Writer, name string, r io.Reader) (int64, error) {
	if _, _, _, _, appnd := dst.copyState(); !appnd {
		if handled, err := copyRange(dst, r); handled {
			if err != nil {
				return 0, pathErr("write", name, err)
			}
			return 0, nil
		}
	}
	return io.Copy(plainWriter{w}, r)
}

// writeTo is WriteTo of the handle src (read through r).
func writeTo(src copyEnd, r io.Reader, w io.Writer) (int64, error) {
	return io.Copy(w, copySource{Reader: plainReader{r}, end: src})
}

// plainWriter hides a handle's ReadFrom from io.Copy.
type plainWriter struct{ io.Writer }

// plainReader hides a handle's WriteTo from io.Copy.
type plainReader struct{ io.Reader }

func (h *file) copyState() (bool, fs.FileMode, bool, bool, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed, 0, h.readable(), h.writable(), h.appends()
}

// ReadFrom implements io.ReaderFrom as *os.File does.
func (h *file) ReadFrom(r io.Reader) (int64, error) { return readFrom(h, h, h.name, r) }

// WriteTo implements io.WriterTo as *os.File does.
func (h *file) WriteTo(w io.Writer) (int64, error) { return writeTo(h, h, w) }

func (d *dir) copyState() (bool, fs.FileMode, bool, bool, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed, fs.ModeDir, true, false, d.appnd
}

// ReadFrom implements io.ReaderFrom as *os.File does on a directory.
func (d *dir) ReadFrom(r io.Reader) (int64, error) { return readFrom(d, d, d.name, r) }

// WriteTo implements io.WriterTo as *os.File does on a directory.
func (d *dir) WriteTo(w io.Writer) (int64, error) { return writeTo(d, d, w) }

func (o *osFile) copyState() (bool, fs.FileMode, bool, bool, bool) {
	fi, err := o.File.Stat()
	var mode fs.FileMode
	if err == nil {
		mode = fi.Mode().Type()
	}
	acc := o.flag & (os.O_WRONLY | os.O_RDWR)
	return errors.Is(err, os.ErrClosed), mode, acc != os.O_WRONLY, acc != 0, o.flag&os.O_APPEND != 0
}

// ReadFrom implements io.ReaderFrom as *os.File does.
func (o *osFile) ReadFrom(r io.Reader) (int64, error) { return readFrom(o, o, o.name, r) }

// WriteTo implements io.WriterTo, reading through the handle's own Read
// (which follows a copy-up made elsewhere).
func (o *osFile) WriteTo(w io.Writer) (int64, error) { return writeTo(o, o, w) }
