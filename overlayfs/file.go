package overlayfs

import (
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
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
//
// Every method but Close takes the layer's lock for writing (see lock),
// which guards off, detach and last: a handle has no lock of its own, so
// a Write takes one lock, not two, and Close none. A Close racing another
// method lets that method finish, as os lets a write in progress finish.
type file struct {
	fs     *layer
	name   string
	ino    uint64
	count  *handleCount // ino's open handles, this one among them
	closed atomic.Bool  // set once, by Close
	acc    uint8        // os's access mode: flag & (O_WRONLY|O_RDWR)
	appnd  bool         // O_APPEND
	detach bool         // last is private: the layer no longer has ino
	sticky bool         // keeps ino's open count at zero when closed (see release)

	off  int64
	last *blob // the content last seen; kept if the identity is dropped
}

// opened sets what a new handle (see hold) keeps of its name and os's
// open flags, and returns it.
func (h *file) opened(name string, flag int) *file {
	h.name = name
	h.acc, h.appnd = uint8(flag&(os.O_WRONLY|os.O_RDWR)), flag&os.O_APPEND != 0
	return h
}

// readable and writable follow Linux: the access mode O_WRONLY|O_RDWR
// (3) opens for neither reading nor writing (EBADF), though the open asks
// for both permissions.
func (h *file) readable() bool { return int(h.acc) == os.O_RDONLY || int(h.acc) == os.O_RDWR }
func (h *file) writable() bool { return int(h.acc) == os.O_WRONLY || int(h.acc) == os.O_RDWR }
func (h *file) appends() bool  { return h.appnd }

// content returns the blob to read (write=false) or change (write=true).
// Content still on the lower is read into a buffer with room for spare
// more bytes: what the caller is about to write. Callers hold
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
// is gone. Callers hold h.fs.mu.
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

// lock takes the file system's lock for writing, checking the handle.
func (h *file) lock(op string) error {
	if h.closed.Load() {
		return pathErr(op, h.name, os.ErrClosed)
	}
	h.fs.mu.Lock()
	return nil
}

func (h *file) unlock() { h.fs.mu.Unlock() }

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
	if off > math.MaxInt64-int64(len(p)) {
		return 0, pathErr("read", h.name, errInval) // as Linux: the end overflows
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
	if len(p) > 0 && !h.appends() {
		if err := h.growErr(h.off, len(p)); err != nil {
			return 0, pathErr("write", h.name, err)
		}
	}
	var full error
	if h.fs.counting() { // a call less without WithQuota
		p, full = h.quotaWrite(p, h.off, h.appends()) // what fits
	}
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
// and reports done. Callers hold h.fs.mu.
func (h *file) writeContent(p []byte, off int64, appnd bool) (b *blob, done bool, err error) {
	if b, err = h.current(true); err != nil {
		return nil, false, err
	}
	h.last = b
	if len(p) > 0 {
		h.fs.opts.as.killPrivs(&b.meta) // AsUser
	}
	if b.lazy() && len(p) > 0 && (appnd || off == b.len()) {
		b.data = append(b.data, p...)
		b.mtime = h.fs.now()
		return b, true, nil
	}
	if !b.lazy() {
		return b, false, nil // loaded: a call less
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
	if err := h.growErr(off, len(p)); err != nil {
		return 0, pathErr("write", h.name, err)
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
	if err := h.growErr(size, 0); err != nil {
		return pathErr("truncate", h.name, err)
	}
	b, err := h.content(true, 0)
	if err != nil {
		return fixErr("truncate", h.name, err)
	}
	h.quotaResize(b.len(), size)
	h.fs.opts.as.killPrivs(&b.meta) // AsUser
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
	if h.closed.Swap(true) {
		return pathErr("close", h.name, os.ErrClosed)
	}
	if h.fs.counting() {
		h.fs.siteClosed(h)
	}
	h.fs.release(h.ino, h.count, h.sticky)
	return nil
}

// growErr is the error of n bytes at off (a truncation: n is 0): EINVAL
// where the end overflows, as Linux checks first; EFBIG past the largest
// a layer file grows (see maxFileSize).
func (h *file) growErr(off int64, n int) error {
	switch {
	case off > math.MaxInt64-int64(n):
		return errInval
	case off > h.fs.opts.maxFile-int64(n):
		return errFileTooBig
	}
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
	if h.closed.Load() {
		return pathErr("readdirent", h.name, errFileClosing)
	}
	return pathErr("readdirent", h.name, errNotDir)
}
