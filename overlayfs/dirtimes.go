package overlayfs

import (
	"strings"
	"time"

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
// of the directories it wrote in (the real ones moved).

// copyDirTimes clones m (nil stays nil).
func copyDirTimes(m *btree.Map[string, time.Time]) *btree.Map[string, time.Time] {
	if m == nil {
		return nil
	}
	return m.Copy()
}

// touchDirLocked moves the modification time of the directory rel to now.
func (l *layer) touchDirLocked(rel string) {
	if l.dirs == nil {
		l.dirs = btree.NewMap[string, time.Time](32)
	}
	l.dirs.Set(rel, l.now())
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
