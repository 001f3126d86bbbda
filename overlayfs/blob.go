package overlayfs

import (
	"bytes"
	"io"
	"os"
)

// blob is a layer file: its metadata and content. A lazy blob's content is
// still elsewhere (see lazySrc): renames and metadata copy-ups never read
// it. A lazy blob's data is a tail appended after that content (appends at
// the end need not read it); a loaded blob's data is all of it, and it
// holds no lazySrc, so that it takes 96 bytes.
type blob struct {
	meta
	gen  uint64
	data []byte
	*lazySrc
}

// lazySrc is where the content of a lazy blob is: the lower file src, or
// with ext, a file outside the lower (see extFile). It is never changed
// once set (clones share it).
type lazySrc struct {
	src  string   // root-relative lower path
	size int64    // size of src (without the blob's tail)
	ext  *extFile // instead of src
}

// lazyReader streams lazy content: the first size bytes of the file at host
// (or of ext), then tail. Without a tail it is the file itself, so that a
// copy can find the file and skip its holes.
func lazyReader(host string, ext *extFile, size int64, tail []byte) (io.ReadCloser, error) {
	if ext != nil && len(tail) == 0 {
		return ext.section(size), nil
	}
	var fh *os.File
	if ext != nil {
		fh = ext.f
	} else {
		var err error
		if fh, err = os.Open(host); err != nil || len(tail) == 0 {
			return fh, err
		}
	}
	r := io.MultiReader(io.NewSectionReader(fh, 0, size), bytes.NewReader(tail))
	if ext != nil {
		return io.NopCloser(r), nil
	}
	return readCloser{r, fh}, nil
}

// readCloser is a reader closed through another value.
type readCloser struct {
	io.Reader
	io.Closer
}

// lazy reports whether b's content is still elsewhere, not in data.
func (b *blob) lazy() bool { return b.lazySrc != nil }

func (b *blob) len() int64 {
	if b.lazy() {
		return b.size + int64(len(b.data))
	}
	return int64(len(b.data))
}

// newBlobLocked registers content for a new file identity.
func (l *layer) newBlobLocked(b *blob) uint64 {
	ino := l.fam.ino.Add(1)
	b.gen = l.gen
	l.blobs.Set(ino, b)
	l.newFileQuotaLocked(b.len())
	return ino
}

// blobLocked returns the content of ino for reading.
func (l *layer) blobLocked(ino uint64) *blob {
	b, _ := l.blobs.Get(ino)
	return b
}

// ownBlobLocked returns the blob of ino for changing, cloning it first if a
// snapshot or a fork shares it. It returns nil if ino is gone.
func (l *layer) ownBlobLocked(ino uint64) *blob {
	b, ok := l.blobs.Get(ino)
	if !ok {
		return nil
	}
	if b.gen != l.gen {
		b = b.clone(l.gen)
		l.blobs.Set(ino, b)
	}
	return b
}

// clone returns a private copy of b with generation gen.
func (b *blob) clone(gen uint64) *blob {
	nb := *b
	nb.gen = gen
	nb.data = append([]byte(nil), b.data...) // a lazy blob's tail too
	return &nb
}

// dropBlobLocked forgets the content of an unlinked file, or marks it as an
// orphan while handles still use it.
func (l *layer) dropBlobLocked(ino uint64) {
	if l.unlinkNameLocked(ino) {
		l.unlinkedQuotaLocked() // as tmpfs, each name of a file is an inode
		return                  // the file keeps other names
	}
	l.hmu.Lock()
	defer l.hmu.Unlock()
	// Announced before the count is read: see release.
	l.orphans.Add(1)
	defer func() { l.orphans.Store(int32(len(l.orphan))) }()
	open := l.openCountLocked(ino) > 0
	if !open {
		l.dropFileQuotaLocked(ino) // else at the last close, as tmpfs (see release)
	}
	// A read handle opened on the lower file before its copy-up reads this
	// content once it exists, even after an unlink, as with one inode.
	if open || l.copyIno[ino] {
		if l.orphan == nil {
			l.orphan = make(map[uint64]bool)
		}
		l.orphan[ino] = open && l.counting()
		return
	}
	delete(l.opened, ino) // a count kept at zero (see release)
	l.blobs.Delete(ino)
}
