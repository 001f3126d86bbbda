package overlayfs

import (
	"io/fs"
	"iter"
	"strings"
	"time"

	"github.com/cowfs/cowfs/internal/relpath"
	"github.com/tidwall/btree"
)

// The modification time of a directory moves when an entry is made,
// removed or renamed in it, as on Linux. The layer keeps those times
// apart from its entries (l.dirs, by root-relative path), so that a
// change in a lower directory puts no entry there: its merged view, the
// changes, the patch and Commit are what they were. Stat, Lstat, a
// handle's Stat and Readdir report the time (see dirInfoLocked); a
// Chtimes of the directory replaces it; Snapshot, Restore and Fork carry
// the times as the entries (a B-tree clone, O(1)); a Commit drops those
// of the directories it wrote in (the real ones moved), and a Commit of
// everything all of them (the view is then the real tree).

// copyDirTimes clones m (nil stays nil).
func copyDirTimes(m *btree.Map[string, time.Time]) *btree.Map[string, time.Time] {
	if m == nil {
		return nil
	}
	return m.Copy()
}

// touchDirLocked moves the modification time of the directory rel to t:
// a create passes its new entry's time, so that it reads no clock again.
func (l *layer) touchDirLocked(rel string, t time.Time) {
	if l.dirs == nil {
		l.dirs = btree.NewMap[string, time.Time](32)
	}
	l.dirs.Set(rel, t)
}

// dirTimeLocked returns the time touchDirLocked last gave rel.
func (l *layer) dirTimeLocked(rel string) (time.Time, bool) {
	if l.dirs == nil {
		return time.Time{}, false
	}
	return l.dirs.Get(rel)
}

// movedDirLocked reports whether rel has a time of the layer's.
func (l *layer) movedDirLocked(rel string) bool {
	_, ok := l.dirTimeLocked(rel)
	return ok
}

// dropDirTimesLocked forgets the times at and below rel (removed, moved or
// set by Chtimes when self).
func (l *layer) dropDirTimesLocked(rel string, below bool) {
	if l.dirs == nil {
		return
	}
	l.dirs.Delete(rel)
	if below {
		for _, k := range l.dirTimesBelowLocked(rel) {
			l.dirs.Delete(k)
		}
	}
}

// dirTimesBelowLocked returns the directories strictly below rel with a time.
func (l *layer) dirTimesBelowLocked(rel string) []string {
	prefix := rel + "/"
	if rel == "" {
		prefix = ""
	}
	var keys []string
	l.dirs.Ascend(prefix, func(k string, _ time.Time) bool {
		if !strings.HasPrefix(k, prefix) {
			return false
		}
		if k != "" {
			keys = append(keys, k)
		}
		return true
	})
	return keys
}

// moveDirTimesLocked moves the times below the directory from to below
// to, as Rename moves the directories themselves (their own times do not
// move: rename changes the parents).
func (l *layer) moveDirTimesLocked(from, to string) {
	if l.dirs == nil {
		return
	}
	l.dropDirTimesLocked(to, true)
	for _, k := range l.dirTimesBelowLocked(from) {
		t, _ := l.dirs.Delete(k)
		l.dirs.Set(to+k[len(from):], t)
	}
	if t, ok := l.dirs.Delete(from); ok {
		l.dirs.Set(to, t)
	}
}

// DirTimes returns the modification times the view gives directories
// because entries were made, removed or renamed in them (or set by
// [Fs.PutDirTime]), by slash-separated path relative to Root ("." for the
// root), in path order. A directory listed here need not be a layer entry
// (see [Fs.Layer]): a lower directory the layer changed something in keeps
// its lower metadata but this time; for a layer directory the time is
// newer than its entry's ModTime. Package kernel writes them into an
// upper so that the kernel's overlay shows the view's times. It is a
// consistent snapshot (a B-tree clone, O(1)): later changes do not show.
func (f *Fs) DirTimes() iter.Seq2[string, time.Time] {
	l := f.primary()
	l.mu.Lock()
	m := copyDirTimes(l.dirs) // Copy marks the original: a write lock
	l.mu.Unlock()
	return func(yield func(string, time.Time) bool) {
		if m == nil {
			return
		}
		m.Scan(func(k string, t time.Time) bool {
			if k == "" {
				k = "."
			}
			return yield(k, t)
		})
	}
}

// PutDirTime gives the directory at path (slash-separated, relative to
// Root, "." for the root; taken literally, no symlink is followed) the
// modification time mtime in the view, as a change of its entries would:
// it does not make the directory a layer entry, so that the changes, the
// patch and Commit are as they were. It is how an upper the kernel wrote
// in passes its directories' times to the layer (see package kernel's
// Import). The path must be a directory of the view: else an
// *fs.PathError with ENOENT or ENOTDIR, or fs.ErrInvalid for a path that
// is not root-relative.
func (f *Fs) PutDirTime(path string, mtime time.Time) error {
	rel := path
	if rel == "." {
		rel = ""
	} else if !relpath.Below(rel) {
		return pathErr("putdirtime", path, fs.ErrInvalid)
	}
	l := f.primary()
	l.mu.Lock()
	defer l.mu.Unlock()
	if rel != "" {
		if _, err := l.putParentLocked(rel); err != nil {
			return pathErr("putdirtime", path, errno(err))
		}
	}
	switch n := l.nodeAtLocked(rel); {
	case !n.exists():
		return pathErr("putdirtime", path, errNoEnt)
	case n.kind != kindDir:
		return pathErr("putdirtime", path, errNotDir)
	}
	l.touchDirLocked(rel, mtime)
	return nil
}
