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
	if !replaced {
		p.st.inserted(k)
	}
	return prev, replaced
}

// Load is Set, fastest when k sorts last.
func (p pathMap) Load(k string, e entry) (entry, bool) {
	prev, replaced := p.m.Load(strings.Clone(k), e)
	if !replaced {
		p.st.inserted(k)
	}
	return prev, replaced
}

// Delete removes the entry at k. A removal never makes a recorded state
// wrong: it only makes a directory barer than recorded.
func (p pathMap) Delete(k string) (entry, bool) { return p.m.Delete(k) }

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
//     The root ("") has only these bits.
//
// States are filled under the layer's read lock, by many goroutines (a
// state lost to a racing fill is only knowledge lost), and changed under
// its write lock by an insertion, so a state read under either lock is
// true of the entries. A removal never makes one wrong: it only makes a
// directory barer than recorded.
type dirStates struct {
	root atomic.Uint32 // the root's: names at the top cost no map lookup
	m    sync.Map      // rel -> dirState, for the other directories
}

// dirState is what is known of a directory: see dirStates.
type dirState uint8

const (
	dirClear dirState = 1 << iota
	dirKnown
	dirBare
)

// get returns dir's state.
func (s *dirStates) get(dir string) dirState {
	if dir == "" {
		return dirState(s.root.Load())
	}
	v, ok := s.m.Load(dir)
	if !ok {
		return 0
	}
	return v.(dirState)
}

// set sets dir's state.
func (s *dirStates) set(dir string, st dirState) {
	if dir == "" {
		s.root.Store(uint32(st))
		return
	}
	s.m.Store(strings.Clone(dir), st) // dir may be a slice of a whole name
}

// add adds bits to dir's state.
func (s *dirStates) add(dir string, bits dirState) {
	if st := s.get(dir); st&bits != bits {
		s.set(dir, st|bits)
	}
}

// inserted updates the states for a new layer entry at k. Callers hold
// the layer's lock for writing.
func (s *dirStates) inserted(k string) {
	if k == "" || s.get(k)&dirClear != 0 {
		s.m.Clear()
		s.root.Store(0)
		return
	}
	dir := parent(k)
	if st := s.get(dir); st&dirBare != 0 {
		s.set(dir, st&^dirBare)
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

// noEntry reports whether the layer has no entry at rel, searching the
// B-tree only when rel's directory is not known bare, and recording what
// it finds of the directory when it is not known.
// Callers hold l.mu (read or write).
func (l *layer) noEntry(rel string) bool {
	dir := parent(rel)
	s := l.paths.st
	st := s.get(dir)
	if st&dirBare != 0 {
		return true
	}
	if _, ok := l.paths.Get(rel); ok {
		return false
	}
	if st&dirKnown == 0 {
		if l.bare(dir) {
			s.add(dir, dirKnown|dirBare)
		} else {
			s.add(dir, dirKnown)
		}
	}
	return true
}

// bare reports whether the layer has no entry directly in dir. It seeks
// past each subtree under dir, so it costs a B-tree search per subtree.
func (l *layer) bare(dir string) bool {
	prefix := dir + "/"
	if dir == "" {
		prefix = ""
	}
	it := l.paths.Iter()
	for ok := it.Seek(prefix); ok; {
		k := it.Key()
		if !strings.HasPrefix(k, prefix) {
			return true
		}
		name := k[len(prefix):]
		i := strings.IndexByte(name, '/')
		switch {
		case name == "":
			ok = it.Next() // dir's own entry
		case i >= 0:
			ok = it.Seek(prefix + name[:i] + "0") // '0' follows '/': past the subtree
		default:
			return false
		}
	}
	return true
}

// fastLoc is the resolver's one fast path: a name that is the root joined
// with a clean relative path (see relpath.Valid) whose directory is a
// real lower directory chain (see lowerCache.chains) free of layer entries
// (see dirStates). Then the merged view resolves it as the lower does up
// to its last component, and the result is what walk gives, at the cost
// of two map lookups and, when follow is set, the last component's lookup
// (one lstat of the final host path, which walk makes too). ok is false
// when the fast path does not apply, or the name ends in a symlink to
// follow; the caller then walks.
// Callers hold l.mu (read or write).
func (l *layer) fastLoc(op, name, abs string, follow bool) (at loc, ok bool, err error) {
	if len(abs) < 2 || abs[0] != '/' {
		return loc{}, false, nil
	}
	rel, in := l.within(abs)
	if !in || !relpath.Valid(rel) || rel == relpath.Root || !relpath.NamesFit(rel, nameMax) {
		return loc{}, false, nil
	}
	dir := parent(rel)
	c := l.lower()
	d := c.dir(dir)
	if d == nil || !l.clearDir(dir) {
		return loc{}, false, nil
	}
	at = loc{name: name, inside: true, rel: rel, host: abs, visible: true}
	if !follow {
		return at, true, nil
	}
	var n node
	if l.noEntry(rel) {
		n, err = l.lowerIn(d, rel, abs)
	} else {
		n, err = l.lookupAt(rel, abs, true)
	}
	if err != nil {
		return loc{}, true, fixErr(op, name, err)
	}
	if n.kind == kindSymlink {
		return loc{}, false, nil
	}
	at.n, at.have = n, true
	return at, true, nil
}
