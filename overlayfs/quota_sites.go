package overlayfs

import "github.com/cowfs/cowfs/internal/relpath"

// A tmpfs keeps the inode of a removed directory while a handle opened
// below it is open: the handle's dentry holds its parent's, and so on up
// to the first directory not removed. WithQuota counts the same: each open
// handle on a layer file has a site (where its name is, followed through
// renames), and a directory removed above a site stays counted until the
// last handle below it closes.

// handleSite is where an open layer-file handle's name is.
type handleSite struct {
	at   string    // the handle's name; once removed, the lowest directory above it still there
	gone bool      // the name was removed
	pins []*dirPin // the removed directories above it that it keeps counted
}

// dirPin is a removed directory that handles below it keep counted.
type dirPin struct{ refs int }

// siteOpened records that h was opened at rel. Callers hold l.mu (read
// or write).
func (l *layer) siteOpened(h *file, rel string) {
	l.hmu.Lock()
	if l.sites == nil {
		l.sites = make(map[*file]*handleSite)
	}
	l.sites[h] = &handleSite{at: rel}
	l.hmu.Unlock()
}

// siteClosed forgets h's site and frees the removed directories that only
// it kept counted, once, from Close. Callers do not hold l.mu.
func (l *layer) siteClosed(h *file) {
	l.hmu.Lock()
	var pins []*dirPin
	if s := l.sites[h]; s != nil {
		pins = s.pins
		delete(l.sites, h)
	}
	l.hmu.Unlock()
	if len(pins) == 0 {
		return
	}
	l.mu.Lock()
	for _, p := range pins {
		if p.refs--; p.refs == 0 {
			l.q.inodes--
		}
	}
	l.mu.Unlock()
}

// sitesMovedLocked moves the sites at and below from to the same place
// below to (a rename). Callers hold l.mu for writing.
func (l *layer) sitesMovedLocked(from, to string) {
	if !l.counting() {
		return
	}
	l.hmu.Lock()
	defer l.hmu.Unlock()
	for _, s := range l.sites {
		if relpath.Within(s.at, from) {
			s.at = to + s.at[len(from):]
		}
	}
}

// removedDirsLocked returns the directories at and below rel that the
// quota counts, about to be removed, when a handle's site lies there.
// Callers hold l.mu for writing.
func (l *layer) removedDirsLocked(rel string) map[string]bool {
	if !l.counting() || rel == "" {
		return nil
	}
	l.hmu.Lock()
	any := false
	for _, s := range l.sites {
		if any = relpath.Within(s.at, rel); any {
			break
		}
	}
	l.hmu.Unlock()
	if !any {
		return nil
	}
	dirs := map[string]bool{}
	l.eachBelow(rel, true, func(k string, e entry) bool {
		if e.kind == kindDir {
			dirs[k] = true
		}
		return true
	})
	return dirs
}

// pinLocked keeps counted, once rel and its subtree are removed, each
// removed directory of dirs (see removedDirsLocked) that a handle's site
// lies below, until the last such handle closes. Callers hold l.mu for
// writing.
func (l *layer) pinLocked(rel string, dirs map[string]bool) {
	if dirs == nil {
		return
	}
	l.hmu.Lock()
	defer l.hmu.Unlock()
	pins := map[string]*dirPin{}
	for _, s := range l.sites {
		if !relpath.Within(s.at, rel) {
			continue
		}
		p := s.at
		if !s.gone {
			p = parent(p) // the handle's own name goes; its directory is next
		}
		for ; relpath.Within(p, rel); p = parent(p) {
			if !dirs[p] {
				continue
			}
			pin := pins[p]
			if pin == nil {
				pin = &dirPin{}
				pins[p] = pin
				l.q.inodes++ // deleting its entry freed it
			}
			pin.refs++
			s.pins = append(s.pins, pin)
		}
		s.at, s.gone = parent(rel), true
	}
}

// pinnedLocked is the number of removed directories the sites keep
// counted. Callers hold l.mu and l.hmu.
func (l *layer) pinnedLocked() int64 {
	seen := map[*dirPin]bool{}
	for _, s := range l.sites {
		for _, p := range s.pins {
			seen[p] = true
		}
	}
	return int64(len(seen))
}
