package overlayfs

import (
	"time"

	"github.com/cowfs/cowfs/internal/relpath"
)

// goneRel is the rel of a directory handle whose directory was removed: no
// path holds a NUL, so it names nothing.
const goneRel = "\x00"

// bindings are where a layer's open handles are: a slot per handle, so
// that opening and closing one (every lower file a test reads) costs no
// hashing, and renames and removals visit each open handle once.
type bindings struct {
	at   []*string // by slot; nil where free
	free []int32   // the free slots
	// gone is, by slot, the modification time a directory had when it
	// was removed under its handle (see goneDirTimesLocked); zero for
	// others.
	gone []time.Time
}

// bind registers where an open handle is, so that the handle follows its
// file or directory through renames and knows its removal, as a handle on
// an inode does, and returns its slot for unbind. Callers hold l.mu (read
// or write); the string changes under l.mu held for writing.
func (l *layer) bind(rel *string) int32 {
	l.hmu.Lock()
	b := &l.bound
	var slot int32
	if n := len(b.free); n > 0 {
		slot = b.free[n-1]
		b.free = b.free[:n-1]
		b.at[slot] = rel
		b.gone[slot] = time.Time{}
	} else {
		slot = int32(len(b.at))
		b.at = append(b.at, rel)
		b.gone = append(b.gone, time.Time{})
	}
	l.hmu.Unlock()
	return slot
}

// unbind forgets the handle bound at slot to rel. A slot that holds
// something else (the layer was reset since, or the handle unbound) is
// left alone, so unbinding twice is harmless.
func (l *layer) unbind(rel *string, slot int32) {
	l.hmu.Lock()
	if b := &l.bound; int(slot) < len(b.at) && b.at[slot] == rel {
		b.at[slot] = nil
		b.free = append(b.free, slot)
	}
	l.hmu.Unlock()
}

// movedLocked moves the bound handles at and below from to the same place
// below to. Callers hold l.mu for writing.
func (l *layer) movedLocked(from, to string) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	for _, p := range l.bound.at {
		if p != nil && relpath.Within(*p, from) {
			*p = to + (*p)[len(from):]
		}
	}
}

// goneLocked marks the bound handles at and below rel as removed, and
// keeps for each directory's the time goneDirTimesLocked found (times).
// Callers hold l.mu for writing.
func (l *layer) goneLocked(rel string, times map[int32]time.Time) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	for slot, p := range l.bound.at {
		if p != nil && relpath.Within(*p, rel) {
			*p = goneRel
			if t, ok := times[int32(slot)]; ok {
				l.bound.gone[slot] = t
			}
		}
	}
}

// goneDirTimesLocked returns, by slot, the modification times of the
// directories at and below rel that handles have open, as fstat reports
// them once the directory is removed (rel's removal is about to drop the
// layer's times): the time the view shows, or now where the directory
// still has entries (removing them moves it, as RemoveAll's unlinks do
// on Linux). Callers hold l.mu for writing.
func (l *layer) goneDirTimesLocked(rel string) map[int32]time.Time {
	type bound struct {
		slot int32
		rel  string
	}
	var open []bound
	l.hmu.Lock()
	for slot, p := range l.bound.at {
		if p != nil && *p != goneRel && relpath.Within(*p, rel) {
			open = append(open, bound{int32(slot), *p})
		}
	}
	l.hmu.Unlock()
	var times map[int32]time.Time
	for _, b := range open {
		n := l.nodeAtLocked(b.rel)
		if n.kind != kindDir {
			continue // a file handle: a file's time is its own
		}
		var t time.Time
		if n.layer || n.fi != nil {
			t = l.dirInfoLocked(l.infoLocked("", n), b.rel, n).ModTime()
		}
		if ents, err := l.listLocked(b.rel, n); err == nil && len(ents.names) > 0 {
			t = l.now()
		}
		if t.IsZero() {
			continue
		}
		if times == nil {
			times = map[int32]time.Time{}
		}
		times[b.slot] = t
	}
	return times
}

// goneTime returns the time goneLocked kept for the handle bound at slot
// to rel, if any.
func (l *layer) goneTime(rel *string, slot int32) (time.Time, bool) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if b := &l.bound; int(slot) < len(b.at) && b.at[slot] == rel && !b.gone[slot].IsZero() {
		return b.gone[slot], true
	}
	return time.Time{}, false
}
