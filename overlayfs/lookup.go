package overlayfs

import (
	"errors"
	"io/fs"
	"os"
	"sync/atomic"
)

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
	if names, ok := l.names.Load(parent(rel)); ok {
		if _, ok := names.(map[string]struct{})[base(rel)]; !ok {
			return node{}, nil
		}
	}
	return l.lowerLookup(rel, host)
}

// lowerLookup returns the lower's node at rel, a path the layer has no
// entry at and whose parent shows the lower; host is rel's host path, or
// "" for f.host(rel).
func (l *layer) lowerLookup(rel, host string) (node, error) {
	fi, err := l.lowerInfo(rel, host)
	if fi == nil {
		return node{}, err
	}
	k := kindOfMode(fi.Mode())
	return node{kind: k, fi: fi, under: k == kindDir}, nil
}

// lowerInfo is the lstat of the lower at rel (host as for lowerLookup):
// nil when nothing is there. It remembers what it learns of the lower.
func (l *layer) lowerInfo(rel, host string) (fs.FileInfo, error) {
	if host == "" {
		host = l.host(rel)
	}
	fi, err := os.Lstat(host)
	if err != nil {
		if isMissing(err) {
			l.missed(parent(rel))
			return nil, nil
		}
		return nil, err
	}
	if fi.IsDir() {
		l.sawDir(rel)
	}
	return fi, nil
}

// sawDir records that the lower has a real directory at rel. It needs no
// lock: the lower does not change while the Fs is in use.
func (l *layer) sawDir(rel string) {
	if _, ok := l.dirs.Load(rel); !ok {
		l.dirs.Store(rel, struct{}{})
	}
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
func (l *layer) missed(dir string) {
	if _, ok := l.names.Load(dir); ok {
		return
	}
	v, ok := l.misses.Load(dir)
	if !ok {
		v, _ = l.misses.LoadOrStore(dir, new(atomic.Int32))
	}
	switch v.(*atomic.Int32).Add(1) {
	case 2:
		if fi, err := os.Lstat(l.host(dir)); err == nil && fi.Size() <= smallDir {
			l.cacheNames(dir)
		}
	case listAfter:
		l.cacheNames(dir)
	}
}

// cacheNames remembers the names in the lower directory dir, once it is
// known to be a real directory.
func (l *layer) cacheNames(dir string) {
	if _, ok := l.names.Load(dir); ok {
		return
	}
	if _, ok := l.dirs.Load(dir); !ok && dir != "" {
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
	names := make(map[string]struct{}, len(list))
	for _, n := range list {
		names[n] = struct{}{}
	}
	l.names.Store(dir, names)
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
