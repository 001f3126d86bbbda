package overlayfs

import "strings"

// goneRel is the rel of a directory handle whose directory was removed: no
// path holds a NUL, so it names nothing.
const goneRel = "\x00"

// bind registers where an open directory handle is, so that the handle
// follows its directory through renames and knows its removal, as a
// handle on an inode does. Callers hold l.mu (read or write); the string
// changes under l.mu held for writing.
func (l *layer) bind(rel *string) {
	l.hmu.Lock()
	if l.bound == nil { // made at the first use
		l.bound = make(map[*string]struct{})
	}
	l.bound[rel] = struct{}{}
	l.hmu.Unlock()
}

// unbind forgets a directory handle.
func (l *layer) unbind(rel *string) {
	l.hmu.Lock()
	delete(l.bound, rel)
	l.hmu.Unlock()
}

// movedLocked moves the bound handles at and below from to the same place
// below to. Callers hold l.mu for writing.
func (l *layer) movedLocked(from, to string) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	for p := range l.bound {
		if *p == from || strings.HasPrefix(*p, from+"/") {
			*p = to + (*p)[len(from):]
		}
	}
}

// goneLocked marks the bound handles at and below rel as removed.
// Callers hold l.mu for writing.
func (l *layer) goneLocked(rel string) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	for p := range l.bound {
		if *p == rel || strings.HasPrefix(*p, rel+"/") || rel == "" {
			*p = goneRel
		}
	}
}
