package overlayfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// dep is what the layer assumed about a lower path when it came to depend
// on it: read for a copy-up, deleted, renamed away, or hidden by an opaque
// directory. Commit refuses to write when the lower no longer matches.
type dep struct {
	mode  fs.FileMode
	size  int64
	mtime time.Time
	id    fileID // device, inode and change time where the platform has them
}

// depOf captures a lower file's identity. For a directory, the mtime and
// ctime move when an entry is added, removed or renamed inside it, so a
// change to what the layer hid or deleted there is seen too.
func depOf(fi fs.FileInfo) dep {
	return dep{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime(), id: identity(fi)}
}

// same reports whether the lower still is what d recorded.
func (d dep) same(fi fs.FileInfo) bool { return depOf(fi) == d }

// dependBelowLocked records every entry under the lower directory rel,
// which the layer is deleting or hiding: an edit or a new entry anywhere in
// it then shows as a conflict, instead of being deleted silently by Commit.
// Cost: one Lstat per entry, as os.RemoveAll pays. It returns the
// non-directories met that have other names (see keepLinksLocked).
func (l *layer) dependBelowLocked(rel string) (linked []string) {
	top := l.host(rel)
	filepath.WalkDir(top, func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == top {
			return nil
		}
		fi, err := de.Info()
		if err != nil {
			return nil
		}
		r, _ := filepath.Rel(l.root, p)
		l.dependLocked(filepath.ToSlash(r), fi)
		if _, nlink := lowerLinkID(fi); nlink > 1 && !fi.IsDir() {
			linked = append(linked, filepath.ToSlash(r))
		}
		return nil
	})
	return linked
}

// dependLocked records the first state of a lower path the layer relies on.
func (l *layer) dependLocked(rel string, fi fs.FileInfo) {
	if _, ok := l.deps.Get(rel); !ok {
		l.deps.Set(rel, depOf(fi))
	}
}

// dependReplacedLocked records what the lower shows at rel, which a new
// layer entry replaces without reading it (PutEntry): Commit then checks
// that the lower is still that, as for a deletion.
func (l *layer) dependReplacedLocked(rel string, visible bool) {
	if !visible {
		return
	}
	low := l.lowerNode(rel)
	if !low.exists() {
		return
	}
	l.dependLocked(rel, low.fi)
	if low.kind == kindDir {
		l.dependBelowLocked(rel)
	}
}

// refreshDepLocked records the lower's new state at rel after Commit itself
// changed it, so that a later Commit does not take its own write for
// someone else's.
func (l *layer) refreshDepLocked(rel string) {
	if _, ok := l.deps.Get(rel); !ok {
		return
	}
	if fi, err := os.Lstat(l.host(rel)); err == nil {
		l.deps.Set(rel, depOf(fi))
	} else {
		l.deps.Delete(rel)
	}
}

// recordDepLocked records the lower's current state at rel as what the
// layer saw there: after Commit wrote an entry the layer keeps.
func (l *layer) recordDepLocked(rel string) {
	if fi, err := os.Lstat(l.host(rel)); err == nil {
		l.deps.Set(rel, depOf(fi))
	} else {
		l.deps.Delete(rel)
	}
}

// conflict is a path whose lower changed since the layer saw it.
type conflict struct {
	path   string
	escape bool // a symlink on disk that leads outside the root
}

// conflictsLocked returns every path of a plan whose lower is no longer
// what the layer saw:
//   - a dependency (a file read for a copy-up, deleted, renamed away, a
//     directory deleted with its subtree) whose identity changed;
//   - a path the layer creates (a new file, symlink or opaque directory
//     without a dependency of its own) that now exists, unless it is
//     already the same symlink;
//   - a directory the layer only changed the metadata of, or a parent the
//     layer writes into, that is no longer a real directory, or that lies on
//     another file system than the root (a staged rename could not reach
//     it).
//
// Cost: one Lstat per dependency, per planned path and per distinct
// parent directory.
func (l *layer) conflictsLocked(p plan) ([]conflict, error) {
	c := &conflictCheck{
		f:     l,
		p:     p,
		sel:   make(map[string]bool, len(p.keys)),
		bad:   map[string]bool{},
		isDir: map[string]bool{},
	}
	c.changedDepsLocked()
	rootFi, err := os.Lstat(l.root)
	if err != nil {
		return nil, err
	}
	c.dev = deviceOf(rootFi)
	for i, k := range p.keys {
		if _, ok := l.deps.Get(k); !ok && k != "" {
			c.created(k, p.ents[i])
		}
		c.parents(k)
	}
	if len(c.crossing) > 0 {
		slices.Sort(c.crossing)
		return nil, fmt.Errorf("%s: on another file system than the root: a commit cannot move its staged contents there atomically", strings.Join(c.crossing, ", "))
	}
	slices.SortFunc(c.out, func(a, b conflict) int { return strings.Compare(a.path, b.path) })
	return c.out, nil
}

// conflictCheck collects the conflicts of one plan.
type conflictCheck struct {
	f        *layer
	p        plan
	sel      map[string]bool // the plan's keys
	bad      map[string]bool // paths already in out
	out      []conflict
	dev      uint64          // the root's device
	isDir    map[string]bool // realDir's answers
	crossing []string        // real directories on another device than the root
}

// add records a conflict at rel once. into: the plan writes into rel (a
// parent), so a symlink at rel itself would carry writes; otherwise only
// rel's ancestors would.
func (c *conflictCheck) add(rel string, into bool) {
	if c.bad[rel] {
		return
	}
	c.bad[rel] = true
	from := rel
	if !into {
		from = parent(rel)
	}
	c.out = append(c.out, conflict{path: osSlash(rel), escape: rel != "" && c.f.leadsOutside(from)})
}

// realDir reports whether the lower at rel is a real directory, noting
// one on another device than the root.
func (c *conflictCheck) realDir(rel string) bool {
	ok, seen := c.isDir[rel]
	if !seen {
		fi, err := os.Lstat(c.f.host(rel))
		ok = err == nil && fi.IsDir()
		if ok && deviceOf(fi) != c.dev {
			c.crossing = append(c.crossing, rel)
		}
		c.isDir[rel] = ok
	}
	return ok
}

// changedDepsLocked adds the dependencies at or under the plan's keys, or
// the lower sources of its lazy files, whose identity changed. It fills
// sel.
func (c *conflictCheck) changedDepsLocked() {
	srcs := make(map[string]bool)
	for i, k := range c.p.keys {
		c.sel[k] = true
		if e := c.p.ents[i]; e.kind == kindFile {
			if b := c.f.blobLocked(e.ino); b != nil && b.lazy() && !b.external() {
				srcs[b.src] = true
			}
		}
	}
	c.f.deps.Scan(func(rel string, d dep) bool {
		if !srcs[rel] && !selectedAbove(rel, c.sel) {
			return true
		}
		fi, err := os.Lstat(c.f.host(rel))
		if err != nil || !d.same(fi) {
			c.add(rel, fi != nil && fi.Mode()&fs.ModeSymlink != 0 && d.mode.IsDir())
		}
		return true
	})
}

// created checks a path the plan writes without a dependency of its own:
// a directory it changes the metadata of must still be a real directory;
// what it creates must still be absent (or already the same symlink, FIFO
// or socket).
func (c *conflictCheck) created(k string, e entry) {
	fi, err := os.Lstat(c.f.host(k))
	switch {
	case e.kind == kindDir && !e.opaque:
		if !c.realDir(k) {
			c.add(k, true)
		}
	case e.kind == kindWhiteout && c.p.keep[k]:
		// hidden through an ancestor, whose subtree is a dependency
	case err == nil && e.kind == kindSymlink && fi.Mode()&fs.ModeSymlink != 0:
		if t, _ := os.Readlink(c.f.host(k)); t != e.target() {
			c.add(k, false)
		}
	case err == nil && e.kind.special() && kindOfMode(fi.Mode()) == e.kind:
		// a FIFO or socket copied up for its metadata: still one
	case err == nil:
		c.add(k, false)
	}
}

// parents checks that the nearest ancestor of k the plan does not write
// itself is a real directory on the lower (the plan checks its own).
func (c *conflictCheck) parents(k string) {
	for a := k; a != ""; {
		a = parent(a)
		if c.sel[a] && a != "" {
			break
		}
		if !c.realDir(a) {
			c.add(a, true)
		}
		if a == "" {
			break
		}
	}
}

// leadsOutside reports whether the lower at rel, or one of its ancestors,
// is a symlink that resolves outside the root. The root itself is not
// looked at: it was resolved once, in New.
func (l *layer) leadsOutside(rel string) bool {
	for p := rel; p != ""; p = parent(p) {
		fi, err := os.Lstat(l.host(p))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		r, err := filepath.EvalSymlinks(l.host(p))
		if err != nil {
			t, _ := os.Readlink(l.host(p))
			r = t
			if !filepath.IsAbs(t) {
				r = filepath.Join(filepath.Dir(l.host(p)), t)
			}
		}
		if !nested(l.root, filepath.Clean(r)) {
			return true
		}
	}
	return false
}
