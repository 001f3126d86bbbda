package overlayfs

import "github.com/tidwall/btree"

// Snapshot is a frozen copy of a layer. Taking and restoring one is O(1):
// the layer is a copy-on-write B-tree and file contents are shared until
// written.
type Snapshot struct {
	fam   *family
	paths *btree.Map[string, entry]
	blobs *btree.Map[uint64, *blob]
	deps  *btree.Map[string, dep]
	subs  []*Snapshot // of the extra roots
}

// Snapshot returns the current state of the layer in O(1).
func (f *Fs) Snapshot() *Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &Snapshot{fam: f.fam, paths: f.paths.Copy(), blobs: f.blobs.Copy(), deps: f.deps.Copy()}
	f.gen = f.fam.gen.Add(1)
	for _, g := range f.subs {
		s.subs = append(s.subs, g.Snapshot())
	}
	return s
}

// Restore makes the layer what it was when s was taken, in O(1). s may come
// from f or from any Fs forked from the same New (a snapshot of another
// overlay is restored by copying its contents, in O(layer)).
//
// Open handles keep working: a handle on a file that exists in the
// restored layer reads and writes that file's restored content; a handle on
// a file the restored layer does not have works on a private copy of what
// it last saw, like a handle on an unlinked file.
func (f *Fs) Restore(s *Snapshot) {
	for i, g := range f.subs {
		if i < len(s.subs) {
			g.Restore(s.subs[i])
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths, f.blobs, f.deps = newPathMap(s.paths.Copy()), s.blobs.Copy(), s.deps.Copy()
	if s.fam != f.fam {
		// Identities and generations of another family may collide with ours.
		old := f.blobs
		f.blobs = btree.NewMap[uint64, *blob](32)
		f.gen = f.fam.gen.Add(1)
		remap := make(map[uint64]uint64)
		old.Scan(func(ino uint64, b *blob) bool {
			remap[ino] = f.newBlobLocked(b.clone(f.gen))
			return true
		})
		var keys []string
		var ents []entry
		f.paths.Scan(func(k string, e entry) bool {
			if e.kind == kindFile {
				e.ino = remap[e.ino]
				keys, ents = append(keys, k), append(ents, e)
			}
			return true
		})
		for i, k := range keys {
			f.paths.Set(k, ents[i])
		}
	}
	f.gen = f.fam.gen.Add(1)
	f.hmu.Lock()
	clear(f.orphan)
	f.hmu.Unlock()
}

// Fork returns an independent overlay of the same root whose layer starts
// as a copy of f's, in O(1). Writes through one are invisible to the other.
func (f *Fs) Fork() *Fs {
	f.mu.Lock()
	defer f.mu.Unlock()
	nf := &Fs{
		root:    f.root,
		opts:    f.opts,
		umask:   f.umask,
		uid:     f.uid,
		gid:     f.gid,
		fam:     f.fam,
		paths:   newPathMap(f.paths.Copy()),
		blobs:   f.blobs.Copy(),
		deps:    f.deps.Copy(),
		gen:     f.fam.gen.Add(1),
		copied:  make(map[string]uint64),
		copyIno: make(map[uint64]bool),
		opened:  make(map[uint64]int),
		orphan:  make(map[uint64]bool),
	}
	f.gen = f.fam.gen.Add(1)
	for _, g := range f.subs {
		sub := g.Fork()
		sub.fam = nf.fam
		nf.subs = append(nf.subs, sub)
	}
	return nf
}
