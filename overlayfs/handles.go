package overlayfs

import "strings"

// goneRel is the rel of a directory handle whose directory was removed: no
// path holds a NUL, so it names nothing.
const goneRel = "\x00"

// bind registers where an open directory handle is, so that the handle
// follows its directory through renames and knows its removal, as a
// handle on an inode does. Callers hold f.mu (read or write); the string
// changes under f.mu held for writing.
func (f *layer) bind(rel *string) {
	f.hmu.Lock()
	if f.bound == nil { // made at the first use
		f.bound = make(map[*string]struct{})
	}
	f.bound[rel] = struct{}{}
	f.hmu.Unlock()
}

// unbind forgets a directory handle.
func (f *layer) unbind(rel *string) {
	f.hmu.Lock()
	delete(f.bound, rel)
	f.hmu.Unlock()
}

// movedLocked moves the bound handles at and below from to the same place
// below to. Callers hold f.mu for writing.
func (f *layer) movedLocked(from, to string) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	for p := range f.bound {
		if *p == from || strings.HasPrefix(*p, from+"/") {
			*p = to + (*p)[len(from):]
		}
	}
}

// goneLocked marks the bound handles at and below rel as removed.
// Callers hold f.mu for writing.
func (f *layer) goneLocked(rel string) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	for p := range f.bound {
		if *p == rel || strings.HasPrefix(*p, rel+"/") || rel == "" {
			*p = goneRel
		}
	}
}
