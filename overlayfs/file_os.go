package overlayfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
)

// osFile is a real file opened read-only from the lower, or any real file
// outside the root. Errors carry the caller's name; directory listings are
// sorted (and merged with the layer when fs is set).
type osFile struct {
	*os.File
	name string
	fs   *layer       // set for files inside the root
	via  *layer       // set for files outside it: the layer its opener's names are resolved in
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
	h := f.hold(ino, false).opened(o.name, os.O_RDONLY)
	h.off = off
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
		switch {
		case n.kind != kindDir:
			lfi = unlinkedInfo(renameInfo(fi, infoName(o.name))) // removed: no name links it
			if t, ok := f.goneTime(&o.at, o.slot); ok {
				lfi = timedInfo{lfi, t} // as it was when removed
			}
		case n.layer:
			lfi = f.dirInfoLocked(f.infoLocked(infoName(o.name), n), o.at, n)
		default:
			lfi = f.dirInfoLocked(renameInfo(fi, infoName(o.name)), o.at, n) // what the layer did in it counts
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
	d := &dir{name: o.name, lower: o.File, via: o.via}
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
