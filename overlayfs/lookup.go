package overlayfs

import (
	"errors"
	"io/fs"
	"os"
)

// lookup returns the merged-view node at rel without following a final
// symlink. visible says whether the lower shows through rel's parent.
// Callers hold f.mu.
func (f *layer) lookup(rel string, visible bool) (node, error) {
	return f.lookupAt(rel, "", visible)
}

// lookupAt is lookup with rel's host path, when the caller has it at hand
// ("" for f.host(rel)).
func (f *layer) lookupAt(rel, host string, visible bool) (node, error) {
	if e, ok := f.paths.Get(rel); ok {
		if e.kind == kindWhiteout {
			return node{}, nil
		}
		return node{kind: e.kind, layer: true, e: e, under: visible && e.kind == kindDir && !e.opaque}, nil
	}
	if !visible {
		return node{}, nil
	}
	if names, ok := f.names.Load(parent(rel)); ok {
		if _, ok := names.(map[string]struct{})[base(rel)]; !ok {
			return node{}, nil
		}
	}
	return f.lowerLookup(rel, host)
}

// lowerLookup returns the lower's node at rel, a path the layer has no
// entry at and whose parent shows the lower; host is rel's host path, or
// "" for f.host(rel).
func (f *layer) lowerLookup(rel, host string) (node, error) {
	fi, err := f.lowerInfo(rel, host)
	if fi == nil {
		return node{}, err
	}
	k := kindOfMode(fi.Mode())
	return node{kind: k, fi: fi, under: k == kindDir}, nil
}

// lowerInfo is the lstat of the lower at rel (host as for lowerLookup):
// nil when nothing is there. It remembers what it learns of the lower.
func (f *layer) lowerInfo(rel, host string) (fs.FileInfo, error) {
	if host == "" {
		host = f.host(rel)
	}
	fi, err := os.Lstat(host)
	if err != nil {
		if isMissing(err) {
			f.cacheNames(parent(rel))
			return nil, nil
		}
		return nil, err
	}
	if fi.IsDir() {
		f.sawDir(rel)
	}
	return fi, nil
}

// sawDir records that the lower has a real directory at rel. It needs no
// lock: the lower does not change while the Fs is in use.
func (f *layer) sawDir(rel string) {
	if _, ok := f.dirs.Load(rel); !ok {
		f.dirs.Store(rel, struct{}{})
	}
}

// cacheNames remembers the names in the lower directory dir, once it is
// known to be a real directory.
func (f *layer) cacheNames(dir string) {
	if _, ok := f.names.Load(dir); ok {
		return
	}
	if _, ok := f.dirs.Load(dir); !ok && dir != "" {
		return
	}
	d, err := os.Open(f.host(dir))
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
	f.names.Store(dir, names)
}

// isMissing reports whether a lower lookup error means "nothing there".
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errno(err) == errNotDir
}

// lowerNode returns the lower's node at rel ignoring the layer, or kindNone.
func (f *layer) lowerNode(rel string) node {
	fi, err := os.Lstat(f.host(rel))
	if err != nil {
		return node{}
	}
	return node{kind: kindOfMode(fi.Mode()), fi: fi, under: fi.IsDir()}
}

// lowerVisible reports whether the lower shows through at rel: no ancestor
// (nor rel itself) is opaque, a whiteout, or a non-directory in the layer.
// Callers hold f.mu.
func (f *layer) lowerVisible(rel string) bool {
	for p := rel; ; {
		if e, ok := f.paths.Get(p); ok {
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
