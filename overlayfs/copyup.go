package overlayfs

import "os"

// copyUpLocked returns the layer entry for a node, making one from the
// lower's metadata if needed (files stay lazy: no content is read).
func (f *layer) copyUpLocked(rel string, n node) (entry, error) {
	if n.layer {
		return n.e, nil
	}
	if n.fi == nil {
		var err error
		if n, err = f.lookup(rel, true); err != nil {
			return entry{}, err
		}
	}
	e := entry{kind: n.kind, meta: metaOf(n.fi)}
	switch n.kind {
	case kindFile:
		e.ino = f.newBlobLocked(&blob{meta: e.meta, lazy: true, src: rel, size: n.fi.Size()})
		e.meta = meta{}
		f.dependLocked(rel, n.fi)
		// Read handles open on the lower file read this identity from now
		// on (a metadata change, a truncation, a rename of it show).
		f.copied[rel] = e.ino
		f.copyIno[e.ino] = true
		f.copies.Add(1)
	case kindSymlink:
		t, err := os.Readlink(f.host(rel))
		if err != nil {
			return entry{}, err
		}
		e.target = t
	}
	return e, nil
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
