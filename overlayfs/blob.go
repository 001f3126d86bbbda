package overlayfs

// blob is a layer file: its metadata and content. A lazy blob's content is
// still elsewhere (see lazySrc): renames and metadata copy-ups never read
// it. A loaded blob holds no lazySrc, so that it takes 96 bytes.
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
	size int64    // size of src
	ext  *extFile // instead of src
}

// lazy reports whether b's content is still elsewhere, not in data.
func (b *blob) lazy() bool { return b.lazySrc != nil }

func (b *blob) len() int64 {
	if b.lazy() {
		return b.size
	}
	return int64(len(b.data))
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
	if !b.lazy() {
		nb.data = append([]byte(nil), b.data...)
	}
	return &nb
}

// dropBlobLocked forgets the content of an unlinked file, or marks it as an
// orphan while handles still use it.
func (f *layer) dropBlobLocked(ino uint64) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	// A read handle opened on the lower file before its copy-up reads this
	// content once it exists, even after an unlink, as with one inode.
	if f.opened[ino] > 0 || f.copyIno[ino] {
		if f.orphan == nil {
			f.orphan = make(map[uint64]bool)
		}
		f.orphan[ino] = true
		return
	}
	f.blobs.Delete(ino)
}
