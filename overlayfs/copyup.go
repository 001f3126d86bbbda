package overlayfs

import (
	"io/fs"
	"os"
)

// copyUpLocked returns the layer entry for a node, making one from the
// lower's metadata if needed (files stay lazy: no content is read). A
// lower character or block device is refused (errDeviceNode): what would
// change it (Chmod, Chown, Chtimes, an open for writing, a Rename of it
// or of a directory holding it) fails, and the device stays as it is.
func (l *layer) copyUpLocked(rel string, n node) (entry, error) {
	return l.copyUpForLocked(rel, n, false)
}

// copyUpForLocked is copyUpLocked; with trunc the copy is about to be
// emptied (an O_TRUNC open), so its data need not fit WithQuota's limit:
// the kernel's overlay copies none up then.
func (l *layer) copyUpForLocked(rel string, n node, trunc bool) (entry, error) {
	if n.layer {
		return n.e, nil
	}
	if n.fi == nil {
		var err error
		if n, err = l.lookup(rel, true); err != nil {
			return entry{}, err
		}
	}
	if n.fi.Mode()&fs.ModeDevice != 0 {
		// Not a lazy regular file: the layer cannot hold a device node.
		return entry{}, pathErr("copyup", rel, errDeviceNode)
	}
	if _, nlink := lowerLinkID(n.fi); nlink > 1 {
		return l.copyUpLinkedLocked(rel, n, trunc)
	}
	return l.copyUpOneLocked(rel, n, trunc)
}

// copyUpOneLocked is copyUpLocked of a lower node n (its Lstat known)
// that is not linked to other names, or the first of them.
func (l *layer) copyUpOneLocked(rel string, n node, trunc bool) (entry, error) {
	if err := l.copyUpQuotaLocked(rel, n.kind, n.fi.Size(), trunc); err != nil {
		return entry{}, err
	}
	m := metaOf(n.fi)
	var e entry
	switch n.kind {
	case kindFile:
		e = entry{kind: kindFile, ino: l.newBlobLocked(&blob{meta: m, lazySrc: &lazySrc{src: rel, size: n.fi.Size()}})}
		l.dependLocked(rel, n.fi)
		// Read handles open on the lower file read this identity from now
		// on (a metadata change, a truncation, a rename of it show).
		if l.copied == nil {
			l.copied, l.copyIno = make(map[string]uint64), make(map[uint64]bool)
		}
		l.copied[rel] = e.ino
		l.copyIno[e.ino] = true
		l.copies.Add(1)
	case kindSymlink:
		t, err := os.Readlink(l.host(rel))
		if err != nil {
			return entry{}, err
		}
		e = l.withAttrs(kindSymlink, m, t)
	default:
		e = l.withAttrs(n.kind, m, "")
	}
	return e, nil
}

// load reads lazy content from the lower, into a buffer with room for
// spare more bytes, followed by the tail appended since. b must be owned by
// the caller.
func (b *blob) load(f *layer, spare int) error {
	if !b.lazy() {
		return nil
	}
	var data []byte
	var err error
	spare += len(b.data)
	if b.external() {
		data, err = b.loadExt(spare)
	} else {
		data, err = readFileSized(f.host(b.src), b.size, spare)
	}
	if err != nil {
		return err
	}
	b.data, b.lazySrc = append(data, b.data...), nil
	return nil
}
