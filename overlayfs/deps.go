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
// Cost: one Lstat per entry, as os.RemoveAll pays.
func (f *layer) dependBelowLocked(rel string) {
	top := f.host(rel)
	filepath.WalkDir(top, func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == top {
			return nil
		}
		fi, err := de.Info()
		if err != nil {
			return nil
		}
		r, _ := filepath.Rel(f.root, p)
		f.dependLocked(filepath.ToSlash(r), fi)
		return nil
	})
}

// dependLocked records the first state of a lower path the layer relies on.
func (f *layer) dependLocked(rel string, fi fs.FileInfo) {
	if _, ok := f.deps.Get(rel); !ok {
		f.deps.Set(rel, depOf(fi))
	}
}

// dependReplacedLocked records what the lower shows at rel, which a new
// layer entry replaces without reading it (PutEntry): Commit then checks
// that the lower is still that, as for a deletion.
func (f *layer) dependReplacedLocked(rel string, visible bool) {
	if !visible {
		return
	}
	low := f.lowerNode(rel)
	if !low.exists() {
		return
	}
	f.dependLocked(rel, low.fi)
	if low.kind == kindDir {
		f.dependBelowLocked(rel)
	}
}

// refreshDepLocked records the lower's new state at rel after Commit itself
// changed it, so that a later Commit does not take its own write for
// someone else's.
func (f *layer) refreshDepLocked(rel string) {
	if _, ok := f.deps.Get(rel); !ok {
		return
	}
	if fi, err := os.Lstat(f.host(rel)); err == nil {
		f.deps.Set(rel, depOf(fi))
	} else {
		f.deps.Delete(rel)
	}
}

// recordDepLocked records the lower's current state at rel as what the
// layer saw there: after Commit wrote an entry the layer keeps.
func (f *layer) recordDepLocked(rel string) {
	if fi, err := os.Lstat(f.host(rel)); err == nil {
		f.deps.Set(rel, depOf(fi))
	} else {
		f.deps.Delete(rel)
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
func (f *layer) conflictsLocked(p plan) ([]conflict, error) {
	sel := make(map[string]bool, len(p.keys))
	srcs := make(map[string]bool)
	for i, k := range p.keys {
		sel[k] = true
		if e := p.ents[i]; e.kind == kindFile {
			if b := f.blobLocked(e.ino); b != nil && b.lazy && !b.external() {
				srcs[b.src] = true
			}
		}
	}
	bad := map[string]bool{}
	var out []conflict
	// into: the plan writes into rel (a parent), so a symlink at rel itself
	// would carry writes; otherwise only rel's ancestors would.
	add := func(rel string, into bool) {
		if !bad[rel] {
			bad[rel] = true
			from := rel
			if !into {
				from = parent(rel)
			}
			out = append(out, conflict{path: osSlash(rel), escape: rel != "" && f.leadsOutside(from)})
		}
	}
	f.deps.Scan(func(rel string, d dep) bool {
		if !srcs[rel] && !selectedAbove(rel, sel) {
			return true
		}
		fi, err := os.Lstat(f.host(rel))
		if err != nil || !d.same(fi) {
			add(rel, fi != nil && fi.Mode()&fs.ModeSymlink != 0 && d.mode.IsDir())
		}
		return true
	})
	rootFi, err := os.Lstat(f.root)
	if err != nil {
		return nil, err
	}
	dev := deviceOf(rootFi)
	var crossing []string
	isDir := map[string]bool{}
	realDir := func(rel string) bool {
		ok, seen := isDir[rel]
		if !seen {
			fi, err := os.Lstat(f.host(rel))
			ok = err == nil && fi.IsDir()
			if ok && deviceOf(fi) != dev {
				crossing = append(crossing, rel)
			}
			isDir[rel] = ok
		}
		return ok
	}
	for i, k := range p.keys {
		e := p.ents[i]
		if _, ok := f.deps.Get(k); !ok && k != "" {
			fi, err := os.Lstat(f.host(k))
			switch {
			case e.kind == kindDir && !e.opaque:
				if !realDir(k) {
					add(k, true)
				}
			case e.kind == kindWhiteout && p.keep[k]:
				// hidden through an ancestor, whose subtree is a dependency
			case err == nil && e.kind == kindSymlink && fi.Mode()&fs.ModeSymlink != 0:
				if t, _ := os.Readlink(f.host(k)); t != e.target {
					add(k, false)
				}
			case err == nil && e.kind.special() && kindOfMode(fi.Mode()) == e.kind:
				// a FIFO or socket copied up for its metadata: still one
			case err == nil:
				add(k, false)
			}
		}
		// The nearest ancestor the plan does not write itself must be a
		// real directory on the lower (the plan checks its own).
		for a := k; a != ""; {
			a = parent(a)
			if sel[a] && a != "" {
				break
			}
			if !realDir(a) {
				add(a, true)
			}
			if a == "" {
				break
			}
		}
	}
	if len(crossing) > 0 {
		slices.Sort(crossing)
		return nil, fmt.Errorf("%s: on another file system than the root: a commit cannot move its staged contents there atomically", strings.Join(crossing, ", "))
	}
	slices.SortFunc(out, func(a, b conflict) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// leadsOutside reports whether the lower at rel, or one of its ancestors,
// is a symlink that resolves outside the root. The root itself is not
// looked at: it was resolved once, in New.
func (f *layer) leadsOutside(rel string) bool {
	for p := rel; p != ""; p = parent(p) {
		fi, err := os.Lstat(f.host(p))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		r, err := filepath.EvalSymlinks(f.host(p))
		if err != nil {
			t, _ := os.Readlink(f.host(p))
			r = t
			if !filepath.IsAbs(t) {
				r = filepath.Join(filepath.Dir(f.host(p)), t)
			}
		}
		if !nested(f.root, filepath.Clean(r)) {
			return true
		}
	}
	return false
}
