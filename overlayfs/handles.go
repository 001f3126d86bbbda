package overlayfs

import "github.com/cowfs/cowfs/internal/relpath"

// goneRel is the rel of a directory handle whose directory was removed: no
// path holds a NUL, so it names nothing.
const goneRel = "\x00"

// bindings are where a layer's open handles are: a slot per handle, so
// that opening and closing one (every lower file a test reads) costs no
// hashing, and renames and removals visit each open handle once.
type bindings struct {
	at   []*string // by slot; nil where free
	free []int32   // the free slots
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
	} else {
		slot = int32(len(b.at))
		b.at = append(b.at, rel)
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

// goneLocked marks the bound handles at and below rel as removed.
// Callers hold l.mu for writing.
func (l *layer) goneLocked(rel string) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	for _, p := range l.bound.at {
		if p != nil && relpath.Within(*p, rel) {
			*p = goneRel
		}
	}
}
