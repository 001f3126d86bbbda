package overlayfs

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// lowerCache is everything a layer knows of the lower besides what it
// depends on for Commit (deps): the real lower directories it walked
// through, the names of those it listed after misses, and the metadata
// of lower directories it created entries in. The lower must not change
// while the Fs is in use; when it does through the family's own Commit
// (or the view is reset or restored), the family's epoch moves and every
// layer of the family starts a new, empty cache at its next lookup (see
// layer.lower). A cache is filled under its layer's lock, read or write,
// by many goroutines: its maps are sync.Maps, its records atomics.
type lowerCache struct {
	epoch uint64 // the family's epoch it was made in

	// root and chains are the root-relative directories D such that D and
	// every ancestor of D are real lower directories (not symlinks), as
	// the resolver found them walking: with the layer's entry-free
	// directories (dirStates), the resolver's fast path (see fastLoc).
	root   lowerDir
	chains sync.Map                 // rel -> *lowerDir
	last   atomic.Pointer[lowerDir] // the record last found in chains: a run of names in one directory costs no hashing

	// meta holds the metadata of lower directories in which entries were
	// created (what a new entry inherits from a setgid directory).
	meta sync.Map // rel -> meta

	// links holds where the lower's names of its files with several are
	// (see linkState); made and read under l.mu held for writing.
	links map[devIno][]string
}

// lowerDir is what the cache knows of one real lower directory: the names
// in it once listed, so that lookups missing in it (creating many new
// files) cost no system call each, and the misses until then. A listing
// of the directory for a reader (readdir) replaces the names: a lookup
// never denies a name a listing showed (issue 23, a changed lower).
type lowerDir struct {
	dir    string
	names  atomic.Pointer[map[string]struct{}]
	misses atomic.Int32
}

// lower returns the layer's cache of the lower, a new one when the
// family's epoch moved since it was made.
func (l *layer) lower() *lowerCache {
	e := l.fam.epoch.Load()
	c := l.cache.Load()
	if c != nil && c.epoch == e {
		return c
	}
	nc := &lowerCache{epoch: e}
	if l.cache.CompareAndSwap(c, nc) {
		return nc
	}
	return l.cache.Load()
}

// lowerChanged moves the family's epoch: every layer of the family drops
// what it saw of the lower at its next lookup. Commit calls it once the
// lower is written; Reset and Restore call it too.
func (fam *family) lowerChanged() { fam.epoch.Add(1) }

// lookup returns the merged-view node at rel without following a final
// symlink. visible says whether the lower shows through rel's parent.
// Callers hold l.mu.
func (l *layer) lookup(rel string, visible bool) (node, error) {
	return l.lookupAt(rel, "", visible)
}

// lookupAt is lookup with rel's host path, when the caller has it at hand
// ("" for f.host(rel)).
func (l *layer) lookupAt(rel, host string, visible bool) (node, error) {
	if e, ok := l.paths.Get(rel); ok {
		return layerNode(e, visible), nil
	}
	if !visible {
		return node{}, nil
	}
	return l.lowerLookup(rel, host)
}

// layerNode returns the merged-view node of the layer entry e, whose
// parent shows the lower when visible is set.
func layerNode(e entry, visible bool) node {
	if e.kind == kindWhiteout {
		return node{}
	}
	return node{kind: e.kind, layer: true, e: e, under: visible && e.kind == kindDir && !e.opaque}
}

// lowerLookup returns the lower's node at rel, a path the layer has no
// entry at and whose parent shows the lower; host is rel's host path, or
// "" for f.host(rel).
func (l *layer) lowerLookup(rel, host string) (node, error) {
	return l.lowerIn(l.lower().dir(parent(rel)), rel, host)
}

// lowerIn is lowerLookup with the record of rel's directory, nil when it
// is not a known real lower directory chain.
func (l *layer) lowerIn(d *lowerDir, rel, host string) (node, error) {
	if strings.IndexByte(rel, 0) >= 0 {
		// As os: no NUL in a C string (a removed handle's goneRel).
		return node{}, &fs.PathError{Op: "lstat", Path: l.host(rel), Err: errInval}
	}
	fi, err := l.lowerStat(d, rel, host, false)
	if fi == nil {
		return node{}, err
	}
	k := kindOfMode(fi.Mode())
	return node{kind: k, fi: fi, under: k == kindDir}, nil
}

// lowerStat returns the lower's Lstat at rel, or nil when it has nothing
// there; d is the record of rel's directory, as for lowerIn. A name the
// directory's listing lacks is missing without a system call, unless
// stat is set: a Stat or Lstat pays os's lstat for a miss too, and for a
// name that exists the listing would only add its lookup. rel holds no
// NUL (lowerIn checks; the fast path's names were): its host path goes to
// the kernel unchecked.
func (l *layer) lowerStat(d *lowerDir, rel, host string, stat bool) (fs.FileInfo, error) {
	if d != nil && !stat {
		if names := d.names.Load(); names != nil {
			if _, ok := (*names)[base(rel)]; !ok {
				return nil, nil
			}
		}
	}
	if host == "" {
		host = l.host(rel)
	}
	var fi fs.FileInfo
	var err error
	if rel == "" {
		fi, err = lstatHost(host) // the root: named as its host directory
	} else {
		fi, err = lstatNamed(host, base(rel))
	}
	if err != nil {
		if isMissing(err) {
			if d != nil {
				l.missed(d, parent(rel))
			}
			return nil, nil
		}
		return nil, err
	}
	return fi, nil
}

// A lower directory's names are listed (see cacheNames) at the second
// lookup that misses in it when the directory is small (its size at most
// smallDir bytes: one block on ext4, about 200 names on tmpfs or btrfs),
// else at the listAfter-th. A listing costs a few system calls and more
// per few dozen names, and a map entry per name, so a fresh overlay that
// creates one file pays no listing, one that creates a file or two beside
// thousands of lower ones pays an lstat for each, not a listing of
// thousands, and one that creates many pays a listing once.
const (
	smallDir  = 4096
	listAfter = 16
)

// missed counts a lookup that found nothing in the lower directory d, at
// rel dir, and lists it when it is time (see smallDir).
func (l *layer) missed(d *lowerDir, dir string) {
	if d.names.Load() != nil {
		return
	}
	switch d.misses.Add(1) {
	case 2:
		if fi, err := lstatHost(l.host(dir)); err == nil && fi.Size() <= smallDir {
			l.cacheNames(d, dir)
		}
	case listAfter:
		l.cacheNames(d, dir)
	}
}

// cacheNames lists the names in the lower directory d, at rel dir.
func (l *layer) cacheNames(d *lowerDir, dir string) {
	h, err := openLower(l.host(dir), os.O_RDONLY)
	if err != nil {
		return
	}
	list, err := h.Readdirnames(-1)
	h.Close()
	if err != nil {
		return
	}
	d.listed(list)
}

// listed records names, a listing of the directory just read: it
// replaces what an older listing said, so that no lookup denies what the
// newest listing shows.
func (d *lowerDir) listed(list ...[]string) {
	n := 0
	for _, l := range list {
		n += len(l)
	}
	names := make(map[string]struct{}, n)
	for _, l := range list {
		for _, s := range l {
			names[s] = struct{}{}
		}
	}
	d.names.Store(&names)
}

// relisted is for a listing of the lower directory dir read for a reader
// (readdir), whose names, with the layer's children there, are list: it
// replaces the names that lookups in dir go by, where they go by any.
func (c *lowerCache) relisted(dir string, list ...[]string) {
	if d := c.dir(dir); d != nil && d.names.Load() != nil {
		d.listed(list...)
	}
}

// dir returns the record of rel when rel and every ancestor are known
// real lower directories, else nil ("" always is).
func (c *lowerCache) dir(rel string) *lowerDir {
	if rel == "" {
		return &c.root
	}
	if d := c.last.Load(); d != nil && d.dir == rel {
		return d
	}
	if v, ok := c.chains.Load(rel); ok {
		d := v.(*lowerDir)
		c.last.Store(d)
		return d
	}
	return nil
}

// sawChain records that rel and every ancestor of it are real lower
// directories.
func (c *lowerCache) sawChain(rel string) {
	if c.dir(rel) == nil {
		rel = strings.Clone(rel) // it may be a slice of a whole name
		c.chains.LoadOrStore(rel, &lowerDir{dir: rel})
	}
}

// isChain reports whether rel and every ancestor are known real lower
// directories.
func (c *lowerCache) isChain(rel string) bool { return c.dir(rel) != nil }

// isMissing reports whether a lower lookup error means "nothing there".
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errno(err) == errNotDir
}

// sameLower is os.SameFile for infos of the lower, which may be
// lowerInfos (lstatHost, listings) that os.SameFile does not know: the
// same device and inode.
func sameLower(a, b fs.FileInfo) bool {
	if ka, _ := lowerLinkID(a); ka != (devIno{}) {
		kb, _ := lowerLinkID(b)
		return ka == kb
	}
	return os.SameFile(a, b)
}

// lowerNode returns the lower's node at rel ignoring the layer, or kindNone.
func (l *layer) lowerNode(rel string) node {
	fi, err := lstatHost(l.host(rel))
	if err != nil {
		return node{}
	}
	return node{kind: kindOfMode(fi.Mode()), fi: fi, under: fi.IsDir()}
}

// lowerVisible reports whether the lower shows through at rel: no ancestor
// (nor rel itself) is opaque, a whiteout, or a non-directory in the layer.
// Callers hold l.mu.
func (l *layer) lowerVisible(rel string) bool {
	for p := rel; ; {
		if e, ok := l.paths.Get(p); ok {
			if e.kind != kindDir || e.opaque {
				return false
			}
		}
		if p == "" {
			return true
		}
		p = parent(p)
	}
}
