package overlayfs

import (
	"maps"
	"time"

	"github.com/tidwall/btree"
)

// Snapshot is a frozen copy of a layer. Taking and restoring one is O(1):
// the layer is a copy-on-write B-tree and file contents are shared until
// written.
type Snapshot struct {
	fam    *family
	layers []*savedLayer // one per root, as Fs.layers
}

// savedLayer is a frozen copy of one root's layer.
type savedLayer struct {
	paths *btree.Map[string, entry]
	blobs *btree.Map[uint64, *blob]
	deps  *btree.Map[string, dep]
	links *btree.Map[uint64, uint32] // linkState.names
	dirs  *btree.Map[string, time.Time]
	q     quotaState
}

// Snapshot returns the current state of the layer in O(1).
func (f *Fs) Snapshot() *Snapshot {
	s := &Snapshot{fam: f.fam}
	for _, g := range f.layers {
		s.layers = append(s.layers, g.snapshot())
	}
	return s
}

func (l *layer) snapshot() *savedLayer {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &savedLayer{paths: l.paths.Copy(), blobs: l.blobs.Copy(), deps: l.deps.Copy(), q: l.savedQuotaLocked(), links: copyNames(l.links.names), dirs: copyDirTimes(l.dirs)}
	l.gen = l.fam.gen.Add(1)
	return s
}

// Restore makes the layer what it was when s was taken, in O(1) plus a
// step per file open through a handle. s may come from f or from any Fs
// forked from the same New (a snapshot of another overlay is restored by
// copying its contents, in O(layer)).
//
// Open handles keep working: a handle on a file that exists in the
// restored layer reads and writes that file's restored content; a handle on
// a file the restored layer does not have works on a private copy of what
// it last saw, like a handle on an unlinked file.
func (f *Fs) Restore(s *Snapshot) {
	for i, g := range f.layers {
		if i < len(s.layers) {
			g.restore(s.layers[i], s.fam)
		}
	}
}

// restore makes the layer s, saved in the family fam.
func (l *layer) restore(s *savedLayer, fam *family) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fam.lowerChanged()
	l.paths = newPathMap(s.paths.Copy())
	l.blobs, l.deps, l.links.names, l.dirs = s.blobs.Copy(), s.deps.Copy(), copyNames(s.links), copyDirTimes(s.dirs)
	if fam != l.fam {
		// Identities and generations of another family may collide with ours.
		old := l.blobs
		l.blobs = btree.NewMap[uint64, *blob](32)
		l.gen = l.fam.gen.Add(1)
		remap := make(map[uint64]uint64)
		old.Scan(func(ino uint64, b *blob) bool {
			remap[ino] = l.newBlobLocked(b.clone(l.gen))
			return true
		})
		var keys []string
		var ents []entry
		l.paths.Scan(func(k string, e entry) bool {
			if e.kind == kindFile {
				e.ino = remap[e.ino]
				keys, ents = append(keys, k), append(ents, e)
			}
			return true
		})
		for i, k := range keys {
			l.paths.Set(k, ents[i])
		}
		l.links.names = remapLinks(l.links.names, remap)
		l.q = s.q.remapped(remap)
	} else {
		l.q = s.q.saved()
	}
	l.gen = l.fam.gen.Add(1)
	l.hmu.Lock()
	clear(l.orphan)
	l.orphans.Store(0)
	clear(l.sites) // the restored count has none of their removed directories
	// Counts kept at zero (see release) are for files of the tree left
	// behind: each is dropped once. The pass visits the identities with
	// open handles too, so Restore costs O(1) plus one step per open file;
	// theirs forget the content they last saw (the tree left behind's).
	maps.DeleteFunc(l.opened, func(_ uint64, c *handleCount) bool {
		c.last = nil
		return c.n.Load() == 0
	})
	l.hmu.Unlock()
}

// Fork returns an independent overlay of the same root whose layer starts
// as a copy of f's, in O(1). Writes through one are invisible to the other.
func (f *Fs) Fork() *Fs {
	nf := &Fs{shared: f.shared}
	for _, g := range f.layers {
		nf.layers = append(nf.layers, g.fork())
	}
	return nf
}

func (l *layer) fork() *layer {
	l.mu.Lock()
	defer l.mu.Unlock()
	nf := &layer{
		shared: l.shared,
		root:   l.root,
		blobs:  l.blobs.Copy(),
		deps:   l.deps.Copy(),
		gen:    l.fam.gen.Add(1),
		links:  linkState{names: copyNames(l.links.names)},
		dirs:   copyDirTimes(l.dirs),
		q:      l.savedQuotaLocked(),
	}
	nf.paths = newPathMap(l.paths.Copy())
	l.gen = l.fam.gen.Add(1)
	return nf
}
