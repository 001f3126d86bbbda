package overlayfs

import (
	"io/fs"
	"os"
	"strings"
	"sync/atomic"

	"github.com/spf13/afero"
)

// writeFlags are the flags that make an open a mutation. O_APPEND alone
// does not: a read-only handle with O_APPEND only refuses writes.
const writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC

// Open opens name for reading, as os.Open.
func (f *Fs) Open(name string) (afero.File, error) {
	return f.OpenFile(name, os.O_RDONLY, 0)
}

// Create creates or truncates name, as os.Create.
func (f *Fs) Create(name string) (afero.File, error) {
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// OpenFile opens name with os's flags. Opening a lower file for writing puts
// a lazy copy in the layer (its bytes are read when first needed; O_TRUNC
// never reads them, and an append at the end does not need them). Handles on one layer file share it:
// every handle sees every write.
//
// A handle opened read-only on a lower file reads the lower directly, as
// the kernel's overlayfs does; writes made later through other handles are
// not seen by it.
//
// FIFOs and sockets are kept as entries without content: a unix socket
// fails to open with ENXIO, as on os; a lower FIFO the layer has not
// touched opens read-only on the lower (blocking for a writer, as os
// does); any other open of a FIFO fails with ErrSpecialFile.
func (f *Fs) OpenFile(name string, flag int, perm fs.FileMode) (afero.File, error) {
	if err := f.fault("open", name); err != nil {
		return nil, err
	}
	g, abs := f.pick(name)
	h, err := g.openFile(name, abs, flag, perm)
	return f.faulty(h, name, err)
}

func (l *layer) openFile(name, abs string, flag int, perm fs.FileMode) (afero.File, error) {
	if flag&oDirectory != 0 && flag&os.O_CREATE != 0 {
		return nil, pathErr("open", name, errInval) // as Linux since 6.4
	}
	if flag&writeFlags == 0 {
		return l.openRead(name, abs, flag)
	}
	// Unlocked without defer: openWriteLocked's many returns would make
	// the defer a slow one, a tenth of an overwrite's open.
	l.mu.Lock()
	h, err := l.openWriteLocked(name, abs, flag, perm)
	l.mu.Unlock()
	return h, err
}

// openOutsideLocked opens at, which writeLoc found outside the root
// (with its error resolving, refusing), for an outside write (see
// outside_linux.go): a symlink found where the resolution saw none is
// resolved again, followed, and that resolution decides. It returns the
// handle, or an error, or neither and where the name leads now, inside.
func (l *layer) openOutsideLocked(name, abs string, flag int, perm fs.FileMode, at loc, err error) (afero.File, loc, error) {
	for tries := 0; err == nil; tries++ {
		fh, relook, oerr := openOutside(at.host, flag, perm)
		if !relook || tries == maxRelook {
			if oerr != nil {
				return nil, at, fixErr("", name, oerr)
			}
			return &osFile{File: fh, name: name, flag: flag, via: l}, at, nil
		}
		if t, rerr := os.Readlink(at.host); rerr == nil && flag&os.O_CREATE != 0 {
			if err := createThroughDirTarget(at.host, t); err != nil {
				// A symlink whose target names a directory, to create
				// through (seed 3996): EISDIR, as inside the root.
				return nil, at, nameErr("open", name, err)
			}
		}
		var ok bool
		if at, ok, err = l.writeLoc("open", name, abs, true); ok {
			return nil, at, err
		}
	}
	return nil, at, err
}

// createThroughDirTarget returns the kernel's error for a create through
// an outside symlink at host whose target names a directory: one ending
// in a name and a slash (EISDIR once the walk reached that name: its
// directory part is walked first, where it may fail) or in "." or ".."
// (EISDIR where the whole target is a directory). It returns nil for
// other targets.
func createThroughDirTarget(host, target string) error {
	t := strings.TrimRight(target, "/")
	i := strings.LastIndexByte(t, '/')
	var p string // what must be a directory
	switch base := t[i+1:]; {
	case slashAfterName(target):
		p = t[:i+1]
	case base == "." || base == "..":
		p = t + "/"
	default:
		return nil
	}
	if p == "" {
		return errIsDir // the link's own directory
	}
	if !strings.HasPrefix(p, "/") {
		p = host[:strings.LastIndexByte(host, '/')+1] + p
	}
	if _, err := os.Stat(p); err != nil {
		return err // ENOENT, ENOTDIR, ELOOP on the way
	}
	return errIsDir
}

// openWriteLocked is openFile for an open that may change the layer.
func (l *layer) openWriteLocked(name, abs string, flag int, perm fs.FileMode) (afero.File, error) {
	excl := flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL
	var at loc
	var ok bool
	var err error
	if flag&os.O_CREATE != 0 {
		// As Linux: with O_CREAT, the last component is looked at before
		// any final symlink is followed; a name ending in a slash, "." or
		// ".." cannot be created.
		at, ok, err = l.writeEntryLoc("open", name, abs)
		if ok && (at.slash || at.last != lastNorm) {
			if at.last != lastNorm {
				if err := l.dirCheck(at); err != nil {
					return nil, nameErr("open", name, err)
				}
				if excl {
					return nil, pathErr("open", name, errExist)
				}
			}
			return nil, pathErr("open", name, errIsDir)
		}
		if ok && !excl {
			// Following the last component changes nothing unless it is
			// a symlink: look it up once rather than resolve again.
			if n, ferr := l.final(at); ferr == nil && n.kind != kindSymlink {
				at.n, at.have = n, true
			} else if ferr == nil && flag&oNoFollow != 0 {
				return nil, pathErr("open", name, errLoop) // O_NOFOLLOW: a final symlink is not followed
			} else if at, ok, err = l.writeLoc("open", name, abs, true); errno(err) == errLoop && at.dirOnly {
				// As Linux: a create through final symlinks stops with
				// EISDIR at a target ending in a slash, before it
				// follows that target's last component (which loops).
				return nil, pathErr("open", name, errIsDir)
			}
		}
	} else {
		at, ok, err = l.writeLoc("open", name, abs, flag&oNoFollow == 0)
	}
	if !ok {
		h, inside, err := l.openOutsideLocked(name, abs, flag, perm, at, err)
		if h != nil || err != nil {
			return h, err
		}
		at = inside
	}
	if at.dirOnly && flag&os.O_CREATE != 0 {
		// A symlink whose target ends in a slash, to create through.
		return nil, pathErr("open", name, errIsDir)
	}
	n := at.n // found above, in the common case: not passed by value again
	if !at.have {
		if n, err = l.final(at); err != nil {
			return nil, fixErr("open", name, err)
		}
	}
	if err := l.openWriteErrLocked(at, n, flag, excl); err != nil {
		return nil, pathErr("open", name, err)
	}
	return l.openNodeLocked(name, at.rel, n, flag, perm)
}

// openWriteErrLocked returns the error, in the kernel's order, of an open
// for writing at at, where the view has n (nil: open it).
func (l *layer) openWriteErrLocked(at loc, n node, flag int, excl bool) error {
	switch {
	case n.exists() && excl:
		return errExist
	case !n.exists() && flag&os.O_CREATE == 0:
		return errNoEnt
	case n.kind == kindDir:
		return errIsDir
	case at.dirOnly || flag&oDirectory != 0:
		return errNotDir
	case n.kind == kindSymlink: // O_NOFOLLOW
		return errLoop
	case !l.mayOpenLocked(at.rel, n, flag):
		return errAccess
	case n.kind == kindSocket:
		return errNoDevice
	case n.kind == kindFIFO:
		return ErrSpecialFile
	}
	return nil
}

// openNodeLocked opens for writing the file at rel, where the view has n,
// a regular file or nothing (to create): see fileLocked.
func (l *layer) openNodeLocked(name, rel string, n node, flag int, perm fs.FileMode) (afero.File, error) {
	if n.layer && n.kind == kindFile {
		return l.reopenLocked(name, rel, n.e.ino, flag), nil
	}
	made := l.fam.ino.Load() // the identities after it are this open's
	ino, b, err := l.fileLocked(rel, n, flag, perm)
	if err != nil {
		return nil, fixErr("open", name, err)
	}
	return l.handle(name, rel, ino, flag, b, n.layer, ino > made), nil
}

// reopenLocked opens for writing, by rel, the layer file ino (fileLocked
// of a layer file: no copy-up). Its count, found first, holds the content
// the last handle on it saw: when the layer owns that blob it is the
// layer's blob of ino (see file.current), found without a search.
func (l *layer) reopenLocked(name, rel string, ino uint64, flag int) *file {
	h := l.hold(ino, false).opened(name, flag)
	b := h.count.last
	if b == nil || b.gen != l.gen {
		b = l.blobLocked(ino)
	}
	if flag&os.O_TRUNC != 0 {
		b = l.truncLocked(ino, b)
	}
	h.count.last, h.last, h.sticky = b, b, true
	if l.counting() {
		l.siteOpened(h, rel)
	}
	return h
}

// handle returns a new handle, opened at rel, on the layer file ino, whose
// content is b; sticky when the file was in the layer before the open (see
// release); fresh when the open made ino (see hold).
func (l *layer) handle(name, rel string, ino uint64, flag int, b *blob, sticky, fresh bool) *file {
	h := l.hold(ino, fresh).opened(name, flag)
	h.last, h.sticky = b, sticky
	if l.counting() {
		l.siteOpened(h, rel)
	}
	return h
}

// fileLocked returns the identity and content of the file an open for
// writing gets at rel, where the view has n: a new file, or n copied up
// (lazily) and, with O_TRUNC, emptied.
func (l *layer) fileLocked(rel string, n node, flag int, perm fs.FileMode) (uint64, *blob, error) {
	if !n.exists() {
		m := l.newMeta(perm & permBits &^ l.creator().umask)
		l.inheritLocked(rel, &m, false)
		if err := l.inodeQuotaLocked(); err != nil {
			return 0, nil, err
		}
		b := &blob{meta: m}
		ino := l.newBlobLocked(b)
		l.paths.Set(rel, entry{kind: kindFile, ino: ino})
		l.touchDirLocked(parent(rel), m.mtime) // the new file's time: no clock read
		return ino, b, nil
	}
	e, err := l.copyUpForLocked(rel, n, flag&os.O_TRUNC != 0) // WithQuota: O_TRUNC copies no data up
	if err != nil {
		return 0, nil, err
	}
	if !n.layer {
		l.paths.Set(rel, e)
	}
	if flag&os.O_TRUNC != 0 {
		return e.ino, l.truncLocked(e.ino, l.blobLocked(e.ino)), nil
	}
	return e.ino, l.blobLocked(e.ino), nil
}

// truncLocked empties the content b of ino for an open with O_TRUNC,
// which never reads the old bytes. A blob only this layer holds (its gen is
// the layer's: no snapshot, fork or frozen reader shares it) keeps its
// buffer, so writing the file again copies into memory already there; a
// shared one is replaced, its content not copied. Handles on ino read the
// blob of the layer, so none still sees the old bytes, as with one inode.
func (l *layer) truncLocked(ino uint64, b *blob) *blob {
	if l.counting() { // a call less without WithQuota
		l.resizeQuotaLocked(ino, b.len(), 0)
	}
	if b.gen != l.gen {
		b = &blob{meta: b.meta, gen: l.gen}
		l.blobs.Set(ino, b)
	}
	b.data, b.lazySrc = b.data[:0], nil
	b.mtime = l.now()
	l.opts.as.killPrivs(&b.meta) // AsUser
	return b
}

// openRead opens name read-only. A lower file is opened directly with
// O_NOFOLLOW, under the read lock, so the common case costs one system
// call more than nothing.
func (l *layer) openRead(name, abs string, flag int) (afero.File, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	at, err := l.resolve("open", name, abs, false)
	if err != nil {
		return nil, err
	}
	if !at.inside {
		return l.openReadOutside("", name, at.host, flag)
	}
	if !at.have && !at.dirOnly {
		if at.visible && l.opts.as == nil && l.noEntry(at.rel) { // AsUser: checked below
			fh, err := openLower(l.hostOf(at), flag|oNoFollow)
			if err == nil {
				return l.lowerHandle(fh, name, at.rel, flag), nil
			}
			if !symlinkToFollow(err, flag) {
				return nil, fixErr("open", name, err)
			}
		}
	}
	// A symlink, a directory, a layer entry or a trailing slash.
	if at, err = l.resolve("open", name, abs, flag&oNoFollow == 0); err != nil {
		return nil, err
	}
	if !at.inside {
		return l.openReadOutside("open", name, at.host, flag)
	}
	n, err := l.final(at)
	if err != nil {
		return nil, fixErr("open", name, err)
	}
	switch {
	case !n.exists():
		return nil, pathErr("open", name, errNoEnt)
	case (at.dirOnly || flag&oDirectory != 0) && n.kind != kindDir:
		return nil, pathErr("open", name, errNotDir)
	case n.kind == kindSymlink: // O_NOFOLLOW
		return nil, pathErr("open", name, errLoop)
	case !l.mayOpenLocked(at.rel, n, flag):
		return nil, pathErr("open", name, errAccess)
	case n.kind == kindDir:
		d := &dir{fs: l, name: name, rel: at.rel, n: n, appnd: flag&os.O_APPEND != 0}
		d.slot = l.bind(&d.rel)
		return d, nil
	case n.kind == kindSocket:
		return nil, pathErr("open", name, errNoDevice)
	case n.kind == kindFIFO && n.layer:
		return nil, pathErr("open", name, ErrSpecialFile)
	case n.layer:
		return l.handle(name, at.rel, n.e.ino, flag, l.blobLocked(n.e.ino), true, false), nil
	}
	fh, err := openLower(l.hostOf(at), flag)
	if err != nil {
		return nil, fixErr("open", name, err)
	}
	return l.lowerHandle(fh, name, at.rel, flag), nil
}

// openReadOutside opens host, outside the root, for reading (fixErr's op
// is op).
func (l *layer) openReadOutside(op, name, host string, flag int) (afero.File, error) {
	if !l.opts.outsideReads {
		return nil, pathErr("open", name, outsideErr(flag))
	}
	fh, err := os.OpenFile(host, flag, 0)
	if err != nil {
		return nil, fixErr(op, name, err)
	}
	return &osFile{File: fh, name: name, flag: flag, via: l}, nil
}

// symlinkToFollow reports whether err, of an open with O_NOFOLLOW added to
// flag, says the last component is a symlink to follow: ELOOP (ENOTDIR
// with O_DIRECTORY), unless the caller's flag holds O_NOFOLLOW itself.
func symlinkToFollow(err error, flag int) bool {
	if flag&oNoFollow != 0 {
		return false
	}
	e := errno(err)
	return e == errLoop || (e == errNotDir && flag&oDirectory != 0)
}

// lowerHandle wraps a handle opened on the lower at rel.
func (l *layer) lowerHandle(fh *os.File, name, rel string, flag int) *osFile {
	o := l.boundHandle(name, rel, flag)
	o.File = fh
	return o
}

// boundHandle returns a lower handle at rel, not yet opened, bound so that
// renames and removals from now on move it. Callers hold l.mu.
func (l *layer) boundHandle(name, rel string, flag int) *osFile {
	o := &osFile{name: name, fs: l, rel: rel, at: rel, flag: flag}
	o.seen.Store(l.copies.Load())
	o.slot = l.bind(&o.at)
	return o
}

// handleCount is the number of open handles on one file identity of a
// layer. A handle holds its count, so that its Close looks nothing up.
//
// Its last blob is a version a snapshot or fork may share once the layer's
// gen moves: it is held until the next open for writing replaces it or the
// count goes with the file (one version per file rewritten, at most).
type handleCount struct {
	n    atomic.Int32
	last *blob // the content a handle opened on ino last saw (see reopenLocked), under l.mu
}

// countedFile is a handle allocated with the count of its file, for the
// handle on a file the open made: a creation costs one allocation, not
// two. Its count goes at its Close unless another handle was opened on the
// file meanwhile; then the count, kept at zero, holds the closed handle
// (and the content it last saw) until the file goes. Other counts are
// allocated alone: a count kept at zero holds no handle.
type countedFile struct {
	file
	count handleCount
}

// hold returns a new handle on the file identity ino, counted among its
// open handles; fresh says that ino has none (the open made it), so that
// its count is not looked for.
func (l *layer) hold(ino uint64, fresh bool) *file {
	var c *handleCount
	var h *file
	l.hmu.Lock()
	if !fresh {
		c = l.opened[ino]
	}
	if c != nil {
		h = new(file)
	} else {
		if fresh {
			cf := new(countedFile)
			h, c = &cf.file, &cf.count
		} else {
			h, c = new(file), new(handleCount)
		}
		if l.opened == nil {
			l.opened = make(map[uint64]*handleCount)
		}
		l.opened[ino] = c
	}
	c.n.Add(1)
	l.hmu.Unlock()
	h.fs, h.ino, h.count = l, ino, c
	return h
}

// release ends a handle on ino, counted in c; the content of a file
// unlinked while open goes with its last handle. Ending a handle on a file
// that is still there changes nothing else: it takes no lock unless it is
// the last and either not sticky or some file is an orphan.
//
// The last sticky handle on a file leaves its count in opened at zero, so
// that the next open of a file written again and again makes no count and
// its close deletes none; the count goes with the file (dropBlobLocked),
// or with the tree a Restore leaves behind, or with a Reset.
//
// Without the lock, the last handle's release and dropBlobLocked agree as
// two flags do: dropBlobLocked adds to l.orphans before it reads a count,
// release subtracts from the count before it reads l.orphans. So when
// dropBlobLocked saw this handle open and made ino an orphan, release sees
// an orphan and takes the lock; when release sees none, dropBlobLocked saw
// the count at zero and dropped the content itself.
func (l *layer) release(ino uint64, c *handleCount, sticky bool) {
	if c.n.Add(-1) > 0 || sticky && l.orphans.Load() == 0 {
		return
	}
	l.hmu.Lock()
	if !sticky && c.n.Load() == 0 && l.opened[ino] == c {
		// Not there when the layer was reset or restored since the
		// handle was made, and its counts with it.
		delete(l.opened, ino)
	}
	_, orphan := l.orphan[ino]
	l.hmu.Unlock()
	if !orphan {
		return
	}
	l.mu.Lock()
	l.hmu.Lock()
	// Looked at again under both locks: the file may have been opened again,
	// or the layer restored, in between. A read handle opened on the lower
	// before the copy-up may still come to read this identity (copyIno):
	// the orphan stays until then. Its space goes now, as in tmpfs.
	if counted, ok := l.orphan[ino]; ok && l.openCountLocked(ino) == 0 {
		if counted {
			l.dropFileQuotaLocked(ino)
			l.orphan[ino] = false
		}
		if !l.copyIno[ino] {
			delete(l.orphan, ino)
			delete(l.opened, ino)
			l.blobs.Delete(ino)
		}
		l.orphans.Store(int32(len(l.orphan)))
	}
	l.hmu.Unlock()
	l.mu.Unlock()
}

// openCountLocked returns the number of open handles on ino. Callers hold
// l.hmu.
func (l *layer) openCountLocked(ino uint64) int32 {
	if c := l.opened[ino]; c != nil {
		return c.n.Load()
	}
	return 0
}
