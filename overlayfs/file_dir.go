package overlayfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
)

// dir is a handle on a directory inside the root. Its listing is taken at
// the first read and paged from there, merged and sorted.
type dir struct {
	fs   *layer
	via  *layer // a directory outside the root: the layer of its opener (see info)
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
	if len(page.names) > 0 && !f.maySearchLocked(d.rel) {
		// AsUser: os's lstat of an entry needs search on the directory.
		return infos, pathErr("lstat", d.name+"/"+page.names[0], errAccess)
	}
	// The page's entries as they are now: the layer's children, looked up
	// in one pass beside the page (both are in name order), over the
	// lower's when it still shows through the directory.
	visible := f.lowerVisible(d.rel)
	kids, es := f.childrenLocked(d.rel)
	k := 0
	for i, name := range page.names {
		for k < len(kids) && nameCmp(kids[k], name) < 0 {
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
		if fi.IsDir() {
			// The view's link count, where the layer changed what the
			// directory holds (see dirNlinkLocked).
			if rel := join(d.rel, name); !f.bareDirLocked(rel) || (k < len(kids) && kids[k] == name) || f.movedDirLocked(rel) {
				fi = f.dirInfoLocked(fi, rel, f.nodeAtLocked(rel))
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
	switch {
	case d.fs != nil:
		return d.fs.stat("lstat", d.name+"/"+name, "", false)
	case d.via != nil:
		// A directory outside the root, opened by a name that may pass
		// through the root (a symlink in it): that name is looked up in
		// the view, as os looks it up on disk.
		return d.via.stat("lstat", d.name+"/"+name, "", false)
	}
	return os.Lstat(d.name + "/" + name)
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
	cur := d.fs.nodeAtLocked(d.rel)
	if cur.kind == kindDir {
		n = cur
	}
	if !n.layer && n.fi == nil {
		return nil, pathErr("stat", d.name, fs.ErrNotExist)
	}
	fi := d.fs.infoLocked(infoName(d.name), n)
	if cur.kind != kindDir {
		fi = unlinkedDirInfo(fi) // removed: no name links it
		if t, ok := d.fs.goneTime(&d.rel, d.slot); ok {
			fi = timedInfo{fi, t} // as it was when removed
		}
		return fi, nil
	}
	return d.fs.dirInfoLocked(fi, d.rel, n), nil
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
