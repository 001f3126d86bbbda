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
	m := metaOf(n.fi)
	var e entry
	switch n.kind {
	case kindFile:
		e = entry{kind: kindFile, ino: f.newBlobLocked(&blob{meta: m, lazySrc: &lazySrc{src: rel, size: n.fi.Size()}})}
		f.dependLocked(rel, n.fi)
		// Read handles open on the lower file read this identity from now
		// on (a metadata change, a truncation, a rename of it show).
		if f.copied == nil {
			f.copied, f.copyIno = make(map[string]uint64), make(map[uint64]bool)
		}
		f.copied[rel] = e.ino
		f.copyIno[e.ino] = true
		f.copies.Add(1)
	case kindSymlink:
		t, err := os.Readlink(f.host(rel))
		if err != nil {
			return entry{}, err
		}
		e = withAttrs(kindSymlink, m, t)
	default:
		e = withAttrs(n.kind, m, "")
	}
	return e, nil
}

// load reads lazy content from the lower, into a buffer with room for
// spare more bytes. b must be owned by the caller.
func (b *blob) load(f *layer, spare int) error {
	if !b.lazy() {
		return nil
	}
	var data []byte
	var err error
	if b.external() {
		data, err = b.loadExt(spare)
	} else {
		data, err = readFileSized(f.host(b.src), b.size, spare)
	}
	if err != nil {
		return err
	}
	b.data, b.lazySrc = data, nil
	return nil
}
