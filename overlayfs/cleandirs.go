package overlayfs

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cowfs/cowfs/internal/relpath"
	"github.com/tidwall/btree"
)

// pathMap is a layer's entries: a copy-on-write B-tree from root-relative
// slash path to entry, and what the resolver's fast path knows of the
// directories they leave free (see dirStates). Every change of the entries
// goes through Set, Load and Delete here, which keep the states right;
// the B-tree itself is not reachable from outside.
type pathMap struct {
	m  *btree.Map[string, entry]
	st *dirStates
}

// newPathMap wraps entries with no directory state known. A new tree
// (Reset, Restore, Fork) starts so, which keeps cloning O(1).
func newPathMap(m *btree.Map[string, entry]) pathMap {
	return pathMap{m: m, st: new(dirStates)}
}

// Get returns the entry at k.
func (p pathMap) Get(k string) (entry, bool) { return p.m.Get(k) }

// Len returns the number of entries.
func (p pathMap) Len() int { return p.m.Len() }

// Copy returns a copy-on-write clone of the entries, in O(1).
func (p pathMap) Copy() *btree.Map[string, entry] { return p.m.Copy() }

// Scan calls fn for every entry in path order, until it returns false.
func (p pathMap) Scan(fn func(k string, e entry) bool) { p.m.Scan(fn) }

// Ascend calls fn for every entry from pivot on, in path order, until it
// returns false.
func (p pathMap) Ascend(pivot string, fn func(k string, e entry) bool) { p.m.Ascend(pivot, fn) }

// Iter returns a read-only iterator over the entries.
func (p pathMap) Iter() btree.MapIter[string, entry] { return p.m.Iter() }

// Set sets the entry at k. The key is stored as a copy of its own: k is
// often a slice of the caller's whole name (the resolver's fast path cuts
// it from the absolute name), which the layer would otherwise keep alive
// for as long as the entry lives.
func (p pathMap) Set(k string, e entry) (entry, bool) {
	prev, replaced := p.m.Set(strings.Clone(k), e)
	if replaced {
		p.st.replaced(k, e)
	} else {
		p.st.inserted(k, e)
	}
	return prev, replaced
}

// Load is Set, fastest when k sorts last.
func (p pathMap) Load(k string, e entry) (entry, bool) {
	prev, replaced := p.m.Load(strings.Clone(k), e)
	if replaced {
		p.st.replaced(k, e)
	} else {
		p.st.inserted(k, e)
	}
	return prev, replaced
}

// Delete removes the entry at k. A removal leaves the other states right:
// it only makes a directory barer than recorded.
func (p pathMap) Delete(k string) (entry, bool) {
	prev, ok := p.m.Delete(k)
	if ok {
		p.st.deleted(k)
	}
	return prev, ok
}

// dirStates records, per root-relative directory D, what the layer's
// entries leave free there:
//
//   - dirClear: the layer has no entry at D nor at any ancestor of D
//     below the root, so through D (when it is a real lower directory:
//     see lowerCache.chains) the merged view is the lower's. The clear
//     directories are closed under parent: a new entry at an ancestor of
//     one is itself clear, and inserting it forgets every state.
//   - dirKnown: whether the layer has an entry directly in D is known,
//     and dirBare says it has none: then D/c needs no look at the layer.
//     Where D has entries, the slot's kids, when set, are those entries
//     by name, kept as the B-tree's by every Set and Delete: the entry at
//     D/c, or its absence, needs no search of the B-tree. The root ("")
//     has only these bits.
//
// States are filled under the layer's read lock, by many goroutines, by
// adding bits atomically (a set of kids is made whole before it is
// stored), and changed under its write lock by a change of the entries,
// so a state read under either lock is true of the entries. A removal
// never makes a state bit wrong: it only makes a directory barer than
// recorded.
type dirStates struct {
	root dirSlot                 // the root's: names at the top cost no map lookup
	m    sync.Map                // rel -> *dirSlot, for the other directories
	last atomic.Pointer[dirSlot] // the slot last found in m: a run of names in one directory costs no hashing
}

// dirSlot holds the state of one directory, until an insertion forgets
// them all.
type dirSlot struct {
	dir  string
	st   atomic.Uint32                    // a dirState
	kids atomic.Pointer[map[string]entry] // with dirKnown and not dirBare: the entries directly in dir by name, when at most maxKids
}

// maxKids is the most entries a directory's set of kids is made for:
// past it a look at the layer is a B-tree search.
const maxKids = 1024

// dirState is what is known of a directory: see dirStates.
type dirState uint8

const (
	dirClear dirState = 1 << iota
	dirKnown
	dirBare
)

// find returns dir's slot, or nil.
func (s *dirStates) find(dir string) *dirSlot {
	if dir == "" {
		return &s.root
	}
	if d := s.last.Load(); d != nil && d.dir == dir {
		return d
	}
	v, ok := s.m.Load(dir)
	if !ok {
		return nil
	}
	d := v.(*dirSlot)
	s.last.Store(d)
	return d
}

// get returns dir's state.
func (s *dirStates) get(dir string) dirState {
	if d := s.find(dir); d != nil {
		return dirState(d.st.Load())
	}
	return 0
}

// slot returns dir's slot, made if need be.
func (s *dirStates) slot(dir string) *dirSlot {
	if d := s.find(dir); d != nil {
		return d
	}
	v, _ := s.m.LoadOrStore(dir, &dirSlot{dir: strings.Clone(dir)}) // dir may be a slice of a whole name
	return v.(*dirSlot)
}

// add adds bits to dir's state.
func (s *dirStates) add(dir string, bits dirState) {
	s.slot(dir).st.Or(uint32(bits))
}

// inserted updates the states for a new layer entry e at k. Callers hold
// the layer's lock for writing.
func (s *dirStates) inserted(k string, e entry) {
	if k == "" || s.get(k)&dirClear != 0 {
		s.m.Clear()
		s.last.Store(nil)
		s.root.st.Store(0)
		return
	}
	d := s.find(parent(k))
	if d == nil {
		return
	}
	st := dirState(d.st.Load())
	if st&dirKnown == 0 {
		return
	}
	kids := d.kids.Load()
	switch {
	case st&dirBare != 0:
		d.kids.Store(&map[string]entry{base(k): e})
		d.st.Store(uint32(st &^ dirBare))
	case kids != nil && len(*kids) < maxKids:
		(*kids)[base(k)] = e // no reader holds the lock: no one reads it now
	case kids != nil:
		d.kids.Store(nil) // full: a B-tree search from now on
	}
}

// replaced updates the states for the layer entry at k, replaced by e.
// Callers hold the layer's lock for writing.
func (s *dirStates) replaced(k string, e entry) {
	if k == "" {
		return
	}
	if d := s.find(parent(k)); d != nil {
		if kids := d.kids.Load(); kids != nil {
			(*kids)[base(k)] = e
		}
	}
}

// deleted updates the states for the layer entry at k, removed. Callers
// hold the layer's lock for writing.
func (s *dirStates) deleted(k string) {
	if k == "" {
		return
	}
	if d := s.find(parent(k)); d != nil {
		if kids := d.kids.Load(); kids != nil {
			delete(*kids, base(k))
		}
	}
}

// clearDir reports whether the layer has no entry at dir nor at an
// ancestor, recording it (and its ancestors) when it finds so.
// Callers hold l.mu (read or write).
func (l *layer) clearDir(dir string) bool {
	s := l.paths.st
	if dir == "" || s.get(dir)&dirClear != 0 {
		return true
	}
	for p := dir; p != ""; p = parent(p) {
		if s.get(p)&dirClear != 0 {
			break
		}
		if _, ok := l.paths.Get(p); ok {
			return false
		}
	}
	for p := dir; p != "" && s.get(p)&dirClear == 0; p = parent(p) {
		s.add(p, dirClear)
	}
	return true
}

// noEntry reports whether the layer has no entry at rel (see entryAt).
// Callers hold l.mu (read or write).
func (l *layer) noEntry(rel string) bool {
	_, ok := l.entryAt(rel)
	return !ok
}

// bareDirLocked reports whether the layer has no entry directly in the
// directory dir. Callers hold l.mu (read or write).
func (l *layer) bareDirLocked(dir string) bool {
	d := l.paths.st.slot(dir)
	st := dirState(d.st.Load())
	if st&dirKnown == 0 {
		st = l.learn(d)
	}
	return st&dirBare != 0
}

// entryAt returns the layer's entry at rel, searching the B-tree only
// when what is known of rel's directory does not settle it, and learning
// what it can of the directory when nothing is known.
// Callers hold l.mu (read or write).
func (l *layer) entryAt(rel string) (entry, bool) {
	if rel == "" {
		return l.paths.Get(rel)
	}
	return l.entryIn(rel, strings.LastIndexByte(rel, '/'))
}

// entryIn is entryAt of a path other than the root whose last slash is at
// i (-1: none), which the caller found already.
func (l *layer) entryIn(rel string, i int) (entry, bool) {
	dir := ""
	if i >= 0 {
		dir = rel[:i]
	}
	d := l.paths.st.slot(dir)
	st := dirState(d.st.Load())
	if st&dirKnown == 0 {
		st = l.learn(d)
	}
	if st&dirBare != 0 {
		return entry{}, false
	}
	if kids := d.kids.Load(); kids != nil {
		e, ok := (*kids)[rel[i+1:]]
		return e, ok
	}
	return l.paths.Get(rel)
}

// learn records whether the layer has entries directly in d's directory
// and, up to maxKids of them, the entries, and returns its new state. It
// visits each entry directly in the directory and seeks past each subtree
// under it: a B-tree step per entry, a search per subtree.
// Callers hold l.mu (read or write).
func (l *layer) learn(d *dirSlot) dirState {
	prefix := d.dir + "/"
	if d.dir == "" {
		prefix = ""
	}
	var kids map[string]entry // made at the first: a bare directory costs no map
	it := l.paths.Iter()
	for ok := it.Seek(prefix); ok && len(kids) <= maxKids; {
		k := it.Key()
		if !strings.HasPrefix(k, prefix) {
			break
		}
		name := k[len(prefix):]
		i := strings.IndexByte(name, '/')
		switch {
		case name == "":
			ok = it.Next() // the directory's own entry
		case i >= 0:
			ok = it.Seek(prefix + name[:i] + "0") // '0' follows '/': past the subtree
		default:
			if kids == nil {
				kids = map[string]entry{}
			}
			kids[name] = it.Value()
			ok = it.Next()
		}
	}
	bits := dirKnown
	switch {
	case len(kids) == 0:
		bits |= dirBare
	case len(kids) <= maxKids:
		d.kids.Store(&kids) // before the state says known
	}
	return dirState(d.st.Or(uint32(bits)) | uint32(bits))
}

// fastLoc is the resolver's one fast path: a name that is the root joined
// with a clean relative path (see relpath.Valid) whose directory is a
// real lower directory chain (see lowerCache.chains) free of layer entries
// (see dirStates). Then the merged view resolves it as the lower does up
// to its last component, and the result is what walk gives, at the cost
// of two map lookups and, when following or for a Stat (hStat), the last
// component's lookup (a layer entry from its directory's kids, or one
// lstat of the final host path, which walk makes too). It fills *at and
// returns ok; ok is false when the fast path does not apply, or the name
// ends in a symlink to follow; the caller then walks.
// Callers hold l.mu (read or write).
func (l *layer) fastLoc(at *loc, op, name, abs string, h how) (ok bool, err error) {
	if len(abs) < 2 || abs[0] != '/' {
		return false, nil
	}
	rel, in := l.within(abs)
	if !in || !relpath.Below(rel) || !relpath.NamesFit(rel, nameMax) {
		return false, nil
	}
	slash := strings.LastIndexByte(rel, '/')
	dir := ""
	if slash >= 0 {
		dir = rel[:slash]
	}
	c := l.lower()
	d := c.dir(dir)
	if d == nil || !l.clearDir(dir) {
		return false, nil
	}
	// Field by field: a loc built whole and then moved would be loaded in
	// 16-byte moves from the 8-byte stores that built it, a stalled store
	// forward each (about 2% of a Stat). at is zero (see resolveInto).
	at.name, at.rel, at.host = name, rel, abs
	at.inside, at.visible = true, true
	if h&(hFollow|hStat) == 0 {
		return true, nil
	}
	if e, ok := l.entryIn(rel, slash); ok {
		at.n = layerNode(e, true)
	} else {
		fi, err := l.lowerStat(d, rel, abs, h&hStat != 0)
		switch {
		case err != nil:
			*at = loc{}
			return true, fixErr(op, name, err)
		case fi != nil:
			at.n.kind = kindOfMode(fi.Mode())
			at.n.fi, at.n.under = fi, at.n.kind == kindDir
		}
	}
	switch {
	case at.n.kind == kindSymlink && h&hFollow != 0:
		return false, nil
	case at.n.kind == kindDir && !at.n.layer:
		c.sawChain(rel) // a real lower directory in a chain: one too
	}
	at.have = true
	return true, nil
}
