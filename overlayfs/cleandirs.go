package overlayfs

import (
	"hash/maphash"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/spf13/afero"
	"github.com/tidwall/btree"
)

// pathMap is a layer's entries: a copy-on-write B-tree from root-relative
// slash path to entry, with the set of clean directories that the
// resolver's fast path trusts (see fastLoc) and the index of layer files
// at clean names (see cleanDirs.files). Every insertion of a new path goes
// through Set or Load here, which forget the clean directories when the
// new path is one of them; every change of an entry goes through Set, Load
// or Delete, which keep the index right. Removing or replacing an entry
// never makes a clean directory dirty: a clean directory and its ancestors
// have no entry to remove or replace.
type pathMap struct {
	*btree.Map[string, entry]
	clean *cleanDirs
}

// newPathMap wraps entries with an empty set of clean directories and an
// empty index. A new tree (Reset, Restore, Fork) starts with no directory
// known clean, so cloning stays O(1).
func newPathMap(m *btree.Map[string, entry]) pathMap {
	p := pathMap{Map: m, clean: &cleanDirs{seed: maphash.MakeSeed()}}
	p.clean.full.Store(m.Len() != 0)
	return p
}

// Set sets the entry at k. The key is stored as a copy of its own: k is
// often a slice of the caller's whole name (the resolver's fast path cuts
// it from the absolute name), which the layer would otherwise keep alive
// for as long as the entry lives.
func (p pathMap) Set(k string, e entry) (entry, bool) {
	prev, replaced := p.Map.Set(strings.Clone(k), e)
	p.changed(k, replaced)
	return prev, replaced
}

// Load is Set, fastest when k sorts last.
func (p pathMap) Load(k string, e entry) (entry, bool) {
	prev, replaced := p.Map.Load(strings.Clone(k), e)
	p.changed(k, replaced)
	return prev, replaced
}

// Delete removes the entry at k.
func (p pathMap) Delete(k string) (entry, bool) {
	prev, ok := p.Map.Delete(k)
	if ok {
		p.clean.unindex(k)
	}
	return prev, ok
}

// changed keeps the states and the index right after Set or Load put an
// entry at k, which was there before if replaced: a replaced entry leaves
// the index (the next open for writing puts it back).
func (p pathMap) changed(k string, replaced bool) {
	if replaced {
		p.clean.unindex(k)
	} else {
		p.clean.inserted(k)
	}
}

// cleanDirs records directories the resolver may pass without walking
// them, as a state per root-relative directory D:
//
//   - dirClean: D and every ancestor of D below the root has no layer entry
//     and is a real lower directory (known from the cache of real lower
//     directories, so not a symlink). Through such a D the merged view is
//     the lower's: D/c is the layer entry at D/c if there is one, else
//     the lower's D/c. The clean directories are closed under parent, so
//     a new layer entry at any ancestor of one is itself clean, and
//     inserting it forgets them all.
//   - dirKnown: whether the layer has an entry directly in D is known, and
//     dirBare says it has none: then D/c needs no look at the layer. The
//     root ("") has only these bits. Where D has entries, the slot's
//     kids, when set, is a filter of their names: a name it does not hold
//     needs no look at the layer either. A new entry in D clears dirBare
//     and starts kids with its name, or adds its name to kids (and where
//     kids is full, clears dirKnown, so that the next look makes a bigger
//     one).
//
// Removing or replacing an entry never makes a recorded state wrong: a
// clean directory and its ancestors have no entry to remove or replace,
// and a removal only makes a directory barer than recorded.
//
// States are filled under the Fs's read lock, from many goroutines, by
// adding bits atomically (or), so no fill loses another's; bits are only
// taken away on insertion, under its write lock, and only after what the
// insertion adds to kids, so that a reader without the lock (lowerOnly)
// that sees a state sees the kids that go with it. The lower must not change
// while the Fs is in use, so otherwise only Commit (which changes the
// lower) forgets them.
//
// files indexes layer files by name for an open for writing (see
// indexedFile): a rel is put there, under the write lock, when a file the
// layer had already is opened for writing by a name found clean (see
// fastRel). Then the name root+"/"+rel resolves to that entry for as long
// as its directory stays clean, that is until clear, which empties the
// index too; and the entry is the one there for as long as it is in the
// index: Set, Load and Delete take a replaced or removed entry out. With
// the file's identity the index keeps its content as last seen, which is
// the layer's while its gen is the layer's (see file.current). Only files
// opened for writing twice are there, so a layer of files written once
// holds no byte more. It is read and written under the write lock only.
type cleanDirs struct {
	root  dirSlot                 // the root's: names at the top cost no map lookup
	m     sync.Map                // rel -> *dirSlot, for the other directories
	last  atomic.Pointer[dirSlot] // the slot last found in m: a run of names in one directory costs no map lookup
	files map[string]fileRef      // clean rel -> its layer file; made at the first use
	full  atomic.Bool             // the entries have not been empty since this was made
	seed  maphash.Seed            // of the kids filters' hashes
	epoch atomic.Uint64           // clears so far (see find)
}

// fileRef is a layer file in the index of files: its identity and its
// content as last seen.
type fileRef struct {
	ino uint64
	b   *blob
}

// dirSlot holds the state of one directory. A slot stays in m until
// clear, which forgets last too.
type dirSlot struct {
	dir   string
	epoch uint64 // the cleanDirs' epoch when made
	st    atomic.Uint32
	kids  atomic.Pointer[kidSet] // see cleanDirs
}

// dirState is what is known of a directory: see cleanDirs.
type dirState uint8

const (
	dirClean dirState = 1 << iota
	dirKnown
	dirBare
)

// find returns dir's slot, or nil, and keeps it at hand in last. A reader
// without the lock may put there a slot that a clear racing with it has
// just dropped: a slot is taken from last only while no clear came after
// its making (its epoch).
func (c *cleanDirs) find(dir string) *dirSlot {
	if dir == "" {
		return &c.root
	}
	if s := c.last.Load(); s != nil && s.dir == dir && s.epoch == c.epoch.Load() {
		return s
	}
	v, ok := c.m.Load(dir)
	if !ok {
		return nil
	}
	s := v.(*dirSlot)
	c.last.Store(s)
	return s
}

// state returns dir's state. Callers hold the Fs's lock.
func (c *cleanDirs) state(dir string) dirState {
	if s := c.find(dir); s != nil {
		return dirState(s.st.Load())
	}
	return 0
}

// absent reports whether the layer surely has no entry named base directly
// in a directory whose slot is s and whose state st is known.
func (c *cleanDirs) absent(s *dirSlot, st dirState, base string) bool {
	if st&dirBare != 0 {
		return true
	}
	k := s.kids.Load()
	return k != nil && !k.has(maphash.String(c.seed, base))
}

// inserted updates the states for a new layer entry at k.
func (c *cleanDirs) inserted(k string) {
	c.full.Store(true)
	if k == "" || c.state(k)&dirClean != 0 {
		c.clear()
		return
	}
	s := c.find(parent(k))
	if s == nil {
		return
	}
	st := dirState(s.st.Load())
	if st&dirKnown == 0 {
		return
	}
	h := maphash.String(c.seed, base(k))
	if st&dirBare != 0 {
		kids := newKidSet(1)
		kids.add(h)
		s.kids.Store(kids)
		s.st.Store(uint32(st &^ dirBare))
		return
	}
	if kids := s.kids.Load(); kids != nil && !kids.add(h) {
		s.st.Store(uint32(st &^ dirKnown)) // full: the next look makes a bigger one
	}
}

// slot returns dir's slot, made if need be.
func (c *cleanDirs) slot(dir string) *dirSlot {
	if s := c.find(dir); s != nil {
		return s
	}
	v, _ := c.m.LoadOrStore(dir, &dirSlot{dir: dir, epoch: c.epoch.Load()})
	return v.(*dirSlot)
}

// or adds bits to dir's state, atomically, and returns the new state.
func (c *cleanDirs) or(dir string, bits dirState) dirState {
	return dirState(c.slot(dir).st.Or(uint32(bits)) | uint32(bits))
}

// clear forgets every state, and the index of files. Callers hold the Fs's
// lock for writing.
func (c *cleanDirs) clear() {
	c.epoch.Add(1)
	c.root.st.Store(0)
	c.root.kids.Store(nil)
	c.last.Store(nil)
	c.m.Clear()
	clear(c.files)
}

// file returns what the index of files has at rel.
// Callers hold the Fs's lock for writing.
func (c *cleanDirs) file(rel string) (fileRef, bool) {
	f, ok := c.files[rel]
	return f, ok
}

// index puts the layer file f at the clean rel in the index of files.
// Callers hold the Fs's lock for writing.
func (c *cleanDirs) index(rel string, f fileRef) {
	if c.files == nil {
		c.files = make(map[string]fileRef)
	}
	if _, ok := c.files[rel]; ok {
		c.files[rel] = f
		return
	}
	c.files[strings.Clone(rel)] = f // rel may be a slice of a whole name
}

// unindex takes rel out of the index of files.
// Callers hold the Fs's lock for writing.
func (c *cleanDirs) unindex(rel string) {
	if c.files != nil {
		delete(c.files, rel)
	}
}

// markClean records dir as clean if it is: no layer entry at dir or an
// ancestor, and each of them a known real lower directory. The cache of
// real lower directories holds paths whose own lstat is a directory, so
// never a symlink, though a path under a symlink may be there: every
// prefix is checked, which rules symlinks out on the way. It reports
// whether dir is clean; false may also mean "not yet known", until a full
// walk has seen the lower directories. Callers hold l.mu (read or write).
func (l *layer) markClean(dir string) bool {
	c := l.paths.clean
	for p := dir; p != ""; p = parent(p) {
		if c.state(p)&dirClean != 0 {
			break
		}
		if _, ok := l.paths.Get(p); ok {
			return false
		}
		if _, ok := l.dirs.Load(p); !ok {
			return false
		}
	}
	for p := dir; p != ""; p = parent(p) {
		if c.state(p)&dirClean != 0 {
			break
		}
		c.or(p, dirClean)
	}
	return true
}

// maxKids is the most entries a directory's kids filter is made for:
// past it a look at the layer is a B-tree search, as without a filter.
const maxKids = 1024

// markBare records whether the layer has an entry directly in dir, and
// which names (see cleanDirs), and returns dir's new state (st is what
// the caller knew of it). It visits each entry directly in dir and seeks
// past each subtree under dir, so it costs a B-tree step per entry and a
// search per subtree. Callers hold l.mu (read or write).
func (l *layer) markBare(dir string, st dirState) dirState {
	prefix := dir + "/"
	if dir == "" {
		prefix = ""
	}
	var names []string
	for pivot := prefix; len(names) <= maxKids; {
		seek := ""
		l.paths.Ascend(pivot, func(k string, _ entry) bool {
			if k == "" {
				return true // the root's own entry
			}
			if !strings.HasPrefix(k, prefix) {
				return false
			}
			child, _, deeper := strings.Cut(k[len(prefix):], "/")
			if deeper {
				seek = prefix + child + "0" // '0' follows '/': past child's subtree
				return false
			}
			names = append(names, child)
			return len(names) <= maxKids
		})
		if seek == "" {
			break
		}
		pivot = seek
	}
	c := l.paths.clean
	s := c.slot(dir)
	bits := dirKnown
	var kids *kidSet
	switch {
	case len(names) == 0:
		bits |= dirBare
	case len(names) <= maxKids:
		kids = newKidSet(len(names))
		for _, n := range names {
			kids.add(maphash.String(c.seed, n))
		}
	}
	s.kids.Store(kids) // before the state says known: see cleanDirs
	return st | dirState(s.st.Or(uint32(bits))|uint32(bits))
}

// kidSet is a filter of the names of a directory's layer entries (a
// blocked Bloom filter: two bits of one word per name, 16 bits of room per
// name): has is never false for a name added, and true for another with a
// chance of about 2%. It is safe for concurrent use; a name is added by
// one atomic or, so a reader sees it whole or not at all.
type kidSet struct {
	n    atomic.Int32 // names added
	room int32        // names it has room for
	w    []atomic.Uint64
}

// newKidSet returns an empty set with room for at least twice n names.
func newKidSet(n int) *kidSet {
	words := 1
	for words*4 < 2*n {
		words *= 2
	}
	return &kidSet{room: int32(words * 4), w: make([]atomic.Uint64, words)}
}

// bits are the word and the two bits of a name's hash h.
func (k *kidSet) bits(h uint64) (*atomic.Uint64, uint64) {
	return &k.w[h&uint64(len(k.w)-1)], 1<<(h>>52&63) | 1<<(h>>58)
}

// add adds a name by its hash, and reports whether the set still has room.
func (k *kidSet) add(h uint64) bool {
	w, b := k.bits(h)
	w.Or(b)
	return k.n.Add(1) <= k.room
}

// has reports whether a name of hash h may have been added.
func (k *kidSet) has(h uint64) bool {
	w, b := k.bits(h)
	return w.Load()&b == b
}

// fastRel is the test of the resolver's fast path: abs is an absolute
// name inside the root, clean (no empty, "." or ".." component, no
// trailing slash, no NUL, no component longer than a name may be, shorter
// than a path may be), whose directory is clean (see cleanDirs). Then abs
// is the root joined with rel (so it is rel's host path), and the merged
// view resolves it as the lower does up to its last component. It returns
// rel, the directory's state, and whether the fast path applies.
// Callers hold l.mu (read or write).
func (l *layer) fastRel(abs string) (rel string, st dirState, ok bool) {
	if l.paths.clean == nil || len(abs) >= pathMax || len(abs) < 2 || abs[0] != '/' {
		return "", 0, false
	}
	rel, in := l.within(abs)
	if !in {
		return "", 0, false
	}
	dir, ok := cleanRel(rel)
	if !ok {
		return "", 0, false
	}
	st = l.paths.clean.state(dir)
	if dir != "" && st&dirClean == 0 {
		if !l.markClean(dir) {
			return "", 0, false
		}
		st |= dirClean
	}
	return rel, st, true
}

// cleanRel reports whether rel is a non-empty slash path with no empty,
// "." or ".." component, no NUL and no component longer than nameMax, and
// returns its directory part. A short rel is checked in one pass; a long
// one by searching for the bytes that can make it unclean.
func cleanRel(rel string) (dir string, ok bool) {
	if len(rel) <= 64 {
		return cleanShort(rel)
	}
	if rel[0] == '/' || rel[len(rel)-1] == '/' ||
		strings.IndexByte(rel, 0) >= 0 || strings.Contains(rel, "//") {
		return "", false
	}
	for i := strings.IndexByte(rel, '.'); i >= 0; {
		if i == 0 || rel[i-1] == '/' {
			// A component starting with a dot: "." or ".." alone?
			j := i + 1
			if j < len(rel) && rel[j] == '.' {
				j++
			}
			if j == len(rel) || rel[j] == '/' {
				return "", false
			}
		}
		k := strings.IndexByte(rel[i+1:], '.')
		if k < 0 {
			break
		}
		i += 1 + k
	}
	if len(rel) > nameMax {
		for rest := rel; ; {
			i := strings.IndexByte(rest, '/')
			if i < 0 {
				if len(rest) > nameMax {
					return "", false
				}
				break
			}
			if i > nameMax {
				return "", false
			}
			rest = rest[i+1:]
		}
	}
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir = rel[:i]
	}
	return dir, true
}

// cleanShort is cleanRel for a rel of at most 64 bytes (no component can
// be too long), in one pass. Bytes above '/' (letters, digits, most
// punctuation) cannot make a name unclean, so they cost one comparison.
func cleanShort(rel string) (dir string, ok bool) {
	start := 0 // of the current component
	for i := 0; i < len(rel); i++ {
		switch rel[i] {
		case 0:
			return "", false
		case '/':
			if !plainComponent(rel[start:i]) {
				return "", false
			}
			dir, start = rel[:i], i+1
		}
	}
	return dir, plainComponent(rel[start:])
}

// plainComponent reports whether c is a name a clean path may hold: not
// empty, ".", or "..".
func plainComponent(c string) bool {
	return c != "" && c != "." && c != ".."
}

// noEntry reports whether the layer has no entry at rel, searching the
// B-tree only when rel's directory is not recorded bare.
// Callers hold l.mu (read or write).
func (l *layer) noEntry(rel string) bool {
	dir := parent(rel)
	st := l.paths.clean.state(dir)
	if st&dirKnown == 0 {
		st = l.markBare(dir, st)
	}
	if l.surelyAbsent(dir, rel, st) {
		return true
	}
	_, ok := l.paths.Get(rel)
	return !ok
}

// surelyAbsent reports whether the state st (known) of rel's directory dir
// says the layer has no entry at rel. Callers hold l.mu.
func (l *layer) surelyAbsent(dir, rel string, st dirState) bool {
	c := l.paths.clean
	s := c.find(dir)
	return s != nil && c.absent(s, st, base(rel))
}

// fastNode returns the node at rel, where fastRel applies with state st;
// host is rel's host path. It looks at the layer only when the directory
// may hold an entry, and makes one lstat of the lower otherwise.
func (l *layer) fastNode(rel, host string, st dirState) (node, error) {
	if st&dirKnown == 0 {
		st = l.markBare(parent(rel), st)
	}
	if l.surelyAbsent(parent(rel), rel, st) {
		return l.lowerLookup(rel, host)
	}
	return l.lookupAt(rel, host, true)
}

// fastLoc resolves a name on the fast path (see fastRel), without walking
// it: the result is what walk gives, at the cost of a map lookup or two,
// and when follow is set one lstat of the final host path (which walk
// makes too). ok is false when the fast path does not apply, or the name
// ends in a symlink to follow; the caller then walks.
// Callers hold l.mu (read or write).
func (l *layer) fastLoc(op, name, abs string, follow bool) (at loc, ok bool, err error) {
	rel, st, ok := l.fastRel(abs)
	if !ok {
		return loc{}, false, nil
	}
	at = loc{name: name, inside: true, rel: rel, host: abs, visible: true}
	if !follow {
		return at, true, nil
	}
	n, err := l.fastNode(rel, abs, st)
	if err != nil {
		return loc{}, true, fixErr(op, name, err)
	}
	if n.kind == kindSymlink {
		return loc{}, false, nil
	}
	at.n, at.have = n, true
	return at, true, nil
}

// fastEntry is the fast path's test for stat (see fastRel) of an absolute
// name host: ok when it applies, and then lower when the layer has no
// entry at rel, so that the lower's lstat of host is the answer.
// Callers hold l.mu (read or write).
func (l *layer) fastEntry(host string) (rel string, lower, ok bool) {
	rel, st, ok := l.fastRel(host)
	if !ok {
		return "", false, false
	}
	if st&dirKnown == 0 {
		st = l.markBare(parent(rel), st)
	}
	if l.surelyAbsent(parent(rel), rel, st) {
		return rel, true, true
	}
	_, in := l.paths.Get(rel)
	return rel, !in, true
}

// lowerOnly is fastEntry without the lock, for a name whose answer the
// states already recorded settle: host is clean (see fastRel), its
// directory is clean and known to hold no layer entry of its name (see
// cleanDirs.absent), so the lower's host is the merged view's. It reports
// false wherever something is not yet recorded; the caller then takes the
// lock, which fills the states.
//
// No lock is needed: the states live in c, l.clean (atomics, a sync.Map),
// and they lose bits only under the write lock, right after the insertion
// that makes them wrong and before the lock is released. So an answer
// from them is the merged view at an instant within the call, and a call
// that starts after a write returned sees it. A Reset, Restore or Commit
// swaps or clears the states the same way. A slot that a clear drops
// while this reads it still says what held before the clear, which is an
// instant within the call too, and find hands it out no more once the
// clear is done.
func (l *layer) lowerOnly(c *cleanDirs, host string) (rel string, ok bool) {
	if len(host) >= pathMax || len(host) < 2 || host[0] != '/' {
		return "", false
	}
	rel, in := l.within(host)
	if !in {
		return "", false
	}
	dir, ok := cleanRel(rel)
	if !ok || dir == "" && rel == journalName {
		// A Commit, under the write lock, has its journal there for a while:
		// the view has nothing there before it or after it.
		return "", false
	}
	s := &c.root
	if dir != "" {
		if s = c.find(dir); s == nil {
			return "", false
		}
	}
	switch st := dirState(s.st.Load()); {
	case st&dirKnown == 0 || (dir != "" && st&dirClean == 0):
		return "", false
	case st&dirBare != 0:
		return rel, true
	default:
		return rel, c.absent(s, st, base(rel))
	}
}

// lowerStat is stat of a name that fastEntry found to be the lower's at
// rel: the lstat of host as it is, unless it is a symlink to follow (done
// is false, fi its lstat). since is the count of Commit's starts and ends
// (layer.commits) read before the caller released the lock or, taking
// none, before the call (see sawDirSince). It makes no use of the lock and needs none: the answer is
// the merged view as fastEntry saw it, the lower does not change while
// the Fs is in use, and it caches nothing that depends on the layer.
func (l *layer) lowerStat(op, name, rel, host string, follow bool, since uint64) (fi fs.FileInfo, done bool, err error) {
	fi, err = os.Lstat(host)
	if err != nil {
		if isMissing(err) {
			return nil, true, pathErr(op, name, errNoEnt)
		}
		return nil, true, fixErr(op, name, err)
	}
	switch m := fi.Mode(); {
	case follow && m&fs.ModeSymlink != 0:
		return fi, false, nil
	case m.IsDir():
		l.sawDirSince(rel, since)
	}
	// Its Name is host's base, which is rel's, which is name's.
	return fi, true, nil
}

// sawDirSince is sawDir for a directory an lstat made outside the lock
// found, when the count of Commit's starts and ends was since before it:
// a Commit may have changed the lower since the lstat and dropped the
// caches, which a late store would fill again with what is no longer
// there, for good. Under the read lock no Commit runs, so an unchanged
// count says none began or ended since the lstat. Callers do not hold
// l.mu.
func (l *layer) sawDirSince(rel string, since uint64) {
	if _, ok := l.dirs.Load(rel); ok {
		return
	}
	l.mu.RLock()
	if l.commits.Load() == since {
		l.sawDir(rel)
	}
	l.mu.RUnlock()
}

// layerStat is stat of a name that fastEntry found to have a layer entry
// at rel (host is its host path): done is false for a symlink to follow.
// Callers hold l.mu (read or write).
func (l *layer) layerStat(op, name, rel, host string, follow bool) (fi fs.FileInfo, done bool, err error) {
	n, err := l.lookupAt(rel, host, true)
	switch {
	case err != nil:
		return nil, true, fixErr(op, name, err)
	case follow && n.kind == kindSymlink:
		return nil, false, nil
	case !n.exists():
		return nil, true, pathErr(op, name, errNoEnt)
	}
	return l.infoLocked(base(rel), n), true, nil
}

// openLower opens read-only a name that the fast path finds in the lower
// (see fastEntry): the handle is made and bound under the lock, as of
// then, and the lower is opened (O_NOFOLLOW) outside it: the lower does
// not change while the Fs is in use, and a rename or removal in between
// moves the bound handle as it would an open one. done is false when the
// fast path does not apply, and link is set too when the name is a
// symlink, which the caller resolves; since is then for lowerLink: the
// count of Commit's starts and ends as of the look.
func (l *layer) openLower(name, abs string, flag int) (h afero.File, done, link bool, since uint64, err error) {
	host := abs
	if host == "" {
		host = name
	}
	l.mu.RLock()
	rel, lower, fast := l.fastEntry(host)
	if !fast || !lower {
		l.mu.RUnlock()
		return nil, false, false, 0, nil
	}
	o := l.boundHandle(name, rel, flag)
	since = l.commits.Load()
	l.mu.RUnlock()
	fh, err := os.OpenFile(host, flag|oNoFollow, 0)
	if err == nil {
		o.File = fh
		return o, true, false, since, nil
	}
	l.unbind(&o.at, o.slot)
	if errno(err) == errLoop {
		return nil, false, true, since, nil
	}
	return nil, true, false, since, fixErr("open", name, err)
}

// lowerLink is for a name that fastEntry found in the lower, at host,
// and that a look outside the lock (an lstat giving fi, or an O_NOFOLLOW
// open failing with ELOOP, fi nil) found to be a symlink: the node the walk
// is to take for it rather than look it up again, or nil when the layer
// changed since and the name is no longer the lower's, or a Commit (which
// changes the lower) began or ended since the count since was read, before
// that look. Callers hold l.mu (read or write).
func (l *layer) lowerLink(host string, fi fs.FileInfo, since uint64) *known {
	if l.commits.Load() != since {
		return nil
	}
	rel, lower, fast := l.fastEntry(host)
	if !fast || !lower {
		return nil
	}
	return &known{rel: rel, n: node{kind: kindSymlink, fi: fi}}
}
