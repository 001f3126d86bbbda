package overlayfs

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
)

// lowerCache is everything a layer knows of the lower besides what it
// depends on for Commit (deps): the real lower directories it walked
// through, the names of lower directories it listed after misses, and the
// metadata of lower directories it created entries in. The lower must not
// change while the Fs is in use; when it does through the family's own
// Commit (or the view is reset or restored), the family's epoch moves and
// every layer of the family starts a new, empty cache at its next lookup
// (see layer.lower). A cache is filled under its layer's lock, read or
// write, from many goroutines: its maps are sync.Maps.
type lowerCache struct {
	epoch uint64 // the family's epoch it was made in

	// chains holds root-relative directories D such that D and every
	// ancestor of D are real lower directories (not symlinks), as the
	// resolver found them walking: with the layer's entry-free
	// directories (pathMap.clear), the resolver's fast path (see fastLoc).
	chains sync.Map // rel -> struct{}

	// names holds the entry names of a lower directory in which lookups
	// missed, so that creating many new files costs no system call each.
	// A listing of the directory (readdir) replaces it: a lookup never
	// denies a name a listing showed (issue 23, a changed lower).
	names  sync.Map // rel -> map[string]struct{}
	misses sync.Map // rel -> *atomic.Int32: lookups that missed in a directory not yet listed

	// meta holds the metadata of lower directories in which entries were
	// created (what a new entry inherits from a setgid directory).
	meta sync.Map // rel -> meta
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
		if e.kind == kindWhiteout {
			return node{}, nil
		}
		return node{kind: e.kind, layer: true, e: e, under: visible && e.kind == kindDir && !e.opaque}, nil
	}
	if !visible {
		return node{}, nil
	}
	return l.lowerLookup(rel, host)
}

// lowerLookup returns the lower's node at rel, a path the layer has no
// entry at and whose parent shows the lower; host is rel's host path, or
// "" for f.host(rel).
func (l *layer) lowerLookup(rel, host string) (node, error) {
	c := l.lower()
	if names, ok := c.names.Load(parent(rel)); ok {
		if _, ok := names.(map[string]struct{})[base(rel)]; !ok {
			return node{}, nil
		}
	}
	if host == "" {
		host = l.host(rel)
	}
	fi, err := os.Lstat(host)
	if err != nil {
		if isMissing(err) {
			l.missed(c, parent(rel))
			return node{}, nil
		}
		return node{}, err
	}
	k := kindOfMode(fi.Mode())
	return node{kind: k, fi: fi, under: k == kindDir}, nil
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

// missed counts a lookup that found nothing in the lower directory dir,
// and lists dir when it is time (see smallDir).
func (l *layer) missed(c *lowerCache, dir string) {
	if _, ok := c.names.Load(dir); ok {
		return
	}
	v, ok := c.misses.Load(dir)
	if !ok {
		v, _ = c.misses.LoadOrStore(dir, new(atomic.Int32))
	}
	switch v.(*atomic.Int32).Add(1) {
	case 2:
		if fi, err := os.Lstat(l.host(dir)); err == nil && fi.Size() <= smallDir {
			l.cacheNames(c, dir)
		}
	case listAfter:
		l.cacheNames(c, dir)
	}
}

// cacheNames remembers the names in the lower directory dir, once it is
// known to be a real directory.
func (l *layer) cacheNames(c *lowerCache, dir string) {
	if _, ok := c.chains.Load(dir); !ok && dir != "" {
		return
	}
	d, err := os.Open(l.host(dir))
	if err != nil {
		return
	}
	list, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return
	}
	c.listed(dir, list)
}

// listed records names, a listing of the lower directory dir just read,
// where lookups in dir look for names: it replaces what an older listing
// said, so that no lookup denies what the newest listing shows.
func (c *lowerCache) listed(dir string, list []string) {
	names := make(map[string]struct{}, len(list))
	for _, n := range list {
		names[n] = struct{}{}
	}
	c.names.Store(dir, names)
}

// relisted is listed for a listing made for a reader (readdir): it
// replaces the names of dir only where lookups use them already.
func (c *lowerCache) relisted(dir string, list []string) {
	if _, ok := c.names.Load(dir); ok {
		c.listed(dir, list)
	}
}

// sawChain records that rel and every ancestor of it are real lower
// directories.
func (c *lowerCache) sawChain(rel string) {
	if _, ok := c.chains.Load(rel); !ok {
		c.chains.Store(rel, struct{}{})
	}
}

// isChain reports whether rel and every ancestor are known real lower
// directories ("" always is).
func (c *lowerCache) isChain(rel string) bool {
	if rel == "" {
		return true
	}
	_, ok := c.chains.Load(rel)
	return ok
}

// isMissing reports whether a lower lookup error means "nothing there".
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errno(err) == errNotDir
}

// lowerNode returns the lower's node at rel ignoring the layer, or kindNone.
func (l *layer) lowerNode(rel string) node {
	fi, err := os.Lstat(l.host(rel))
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
