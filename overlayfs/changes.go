package overlayfs

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
)

// ChangeKind says how a path differs from the lower.
type ChangeKind uint8

const (
	Added    ChangeKind = iota + 1 // in the view, not in the lower
	Modified                       // in both, with other content, mode, symlink target or type
	Deleted                        // in the lower, not in the view
)

func (k ChangeKind) String() string {
	switch k {
	case Added:
		return "added"
	case Modified:
		return "modified"
	case Deleted:
		return "deleted"
	}
	return "ChangeKind(" + string(rune('0'+k)) + ")"
}

// Change is one path at which the view differs from the lower.
type Change struct {
	Root    string      // the root Path is relative to: Root(), or another of Roots()
	Path    string      // slash-separated, relative to Root; "." for the root directory itself
	Kind    ChangeKind  //
	Mode    fs.FileMode // in the view, type bits included; 0 when Deleted
	OldMode fs.FileMode // in the lower; 0 when Added
	// LinkTo is, for an added or modified non-directory that has other
	// names in the view (hard links, see Fs.Link), the first of them in
	// path order, changed or not; "" otherwise.
	LinkTo string
}

// String formats a change like git's name-status: "A path", "M path", "D path".
func (c Change) String() string {
	return strings.ToUpper(c.Kind.String()[:1]) + " " + c.Path
}

// side is one side of a change: what a path is in the lower or the view.
type side struct {
	kind   kind
	mode   fs.FileMode // type bits included
	target string      // symlink
	host   string      // file content on disk, when lazy
	ext    *extFile    // file content outside the lower, when lazy (instead of host)
	data   []byte      // file content in memory; when lazy, a tail after host's or ext's
	lazy   bool
	size   int64
}

func (s side) content() ([]byte, error) {
	switch {
	case s.kind == kindSymlink:
		return []byte(s.target), nil
	case s.lazy && len(s.data) > 0:
		r, err := s.open()
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return io.ReadAll(r)
	case s.ext != nil:
		return io.ReadAll(io.NewSectionReader(s.ext.f, 0, s.size))
	case s.lazy:
		return os.ReadFile(s.host)
	}
	return s.data, nil
}

// open streams a file side's content.
func (s side) open() (io.ReadCloser, error) {
	if s.lazy {
		return lazyReader(s.host, s.ext, s.size-int64(len(s.data)), s.data)
	}
	return io.NopCloser(bytes.NewReader(s.data)), nil
}

// change is a Change with both sides, for patches.
type change struct {
	Change
	old, new side
}

// Changes returns every path at which the view differs from the lower,
// sorted by path. A file written back to its original bytes and mode is not
// a change; a deleted lower directory lists itself and its descendants; a
// change of the root directory's own mode is listed at path ".".
// Times and owners are not compared. Cost: O(layer), an lstat of each
// layer path the lower can have (none below a layer directory the lower
// has no directory at), and a read of each changed file's lower content
// that has the same size as the new content.
//
// With several roots (WithRoot), the changes of each root follow those of
// the previous one, in the order of Roots().
func (f *Fs) Changes() []Change {
	var out []Change
	for _, g := range f.layers {
		g.mu.RLock()
		cs := make([]Change, 0, g.paths.Len())
		g.eachChangeLocked(func(c change) { cs = append(cs, c.Change) })
		g.mu.RUnlock()
		cs = sortedByPath(cs, func(c Change) string { return c.Path })
		if out == nil {
			out = cs
		} else {
			out = append(out, cs...)
		}
	}
	return out
}

// changes returns the changes with both sides, for patches.
func (l *layer) changes() ([]change, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []change
	err := l.eachChangeLocked(func(c change) { out = append(out, c) })
	return sortedByPath(out, func(c change) string { return c.Path }), err
}

// sortedByPath sorts changes by path unless they already are: they come in
// the layer's order, unless the root's "." or deletions below a hidden
// lower directory came in between.
func sortedByPath[T any](cs []T, path func(T) string) []T {
	byPath := func(a, b T) int { return strings.Compare(path(a), path(b)) }
	if !slices.IsSortedFunc(cs, byPath) {
		slices.SortFunc(cs, byPath)
	}
	return cs
}

// eachChangeLocked calls emit with each change, in the layer's path order
// but for the root's own (at ".") and the deletions of a hidden lower
// directory's subtree (after the directory); it returns the first error
// met comparing contents. Callers hold l.mu.
func (l *layer) eachChangeLocked(emit func(change)) error {
	var firstErr error
	note := func(err error) {
		if firstErr == nil && err != nil {
			firstErr = err
		}
	}
	// The ancestors of the path being scanned at which the lower has no
	// directory, outermost first: nothing below them is in the lower, so
	// their descendants (scanned after them) cost no lstat.
	var absent []string
	var names map[uint64][]string // see linkToLocked
	send := func(c change) {
		c.Root = l.root
		emit(c)
	}
	l.paths.Scan(func(k string, e entry) bool {
		if k == "" {
			// The root's own mode is a change like any other, at ".".
			if fi, err := os.Stat(l.root); err == nil && e.kind == kindDir {
				low := side{kind: kindDir, mode: fi.Mode()}
				if c, ok, _ := compare(".", low, l.viewSide(e)); ok {
					send(c)
				}
			} else {
				note(err)
			}
			return true
		}
		for len(absent) > 0 && !isBelow(k, absent[len(absent)-1]) {
			absent = absent[:len(absent)-1]
		}
		var low side
		if len(absent) == 0 {
			var missing string
			if low, missing = l.lowerSideOf(k); missing != "" {
				absent = append(absent, missing)
			}
		}
		if e.kind == kindDir && low.kind != kindDir {
			absent = append(absent, k)
		}
		var view side
		if e.kind != kindWhiteout {
			view = l.viewSide(e)
		}
		c, ok, err := compare(k, low, view)
		note(err)
		if ok {
			if e.kind != kindDir && e.kind != kindWhiteout {
				c.LinkTo = l.linkToLocked(k, e, &names)
			}
			send(c)
		}
		if low.kind == kindDir && (e.kind != kindDir || e.opaque) {
			note(l.deletedBelow(k, emit))
		}
		return true
	})
	return firstErr
}

// deletedBelow emits the lower's subtree of rel, which the view hides, as
// deletions; paths the layer has are left to their own entries.
func (l *layer) deletedBelow(rel string, emit func(change)) error {
	des, err := os.ReadDir(l.host(rel))
	if err != nil {
		return err
	}
	for _, de := range des {
		p := join(rel, de.Name())
		if _, ok := l.paths.Get(p); ok {
			continue
		}
		low := l.lowerSide(p)
		if low.kind == kindNone {
			continue
		}
		emit(change{Change: Change{Root: l.root, Path: p, Kind: Deleted, OldMode: low.mode}, old: low})
		if low.kind == kindDir {
			if err := l.deletedBelow(p, emit); err != nil {
				return err
			}
		}
	}
	return nil
}

// lowerSide returns what the lower tree has at rel: every ancestor must be
// a real directory there, so a lower symlink is never followed.
func (l *layer) lowerSide(rel string) side {
	s, _ := l.lowerSideOf(rel)
	return s
}

// lowerSideOf is lowerSide, also returning the ancestor of rel found not
// to be a directory in the lower, if that is why it has nothing at rel.
func (l *layer) lowerSideOf(rel string) (side, string) {
	c := l.lower()
	for p := parent(rel); p != ""; p = parent(p) {
		if c.isChain(p) {
			break
		}
		fi, err := os.Lstat(l.host(p))
		if err != nil || !fi.IsDir() {
			return side{}, p
		}
	}
	for p := parent(rel); p != "" && !c.isChain(p); p = parent(p) {
		c.sawChain(p) // every directory up to a known chain, checked above
	}
	host := l.host(rel)
	fi, err := os.Lstat(host)
	if err != nil {
		return side{}, ""
	}
	s := side{kind: kindOfMode(fi.Mode()), mode: fi.Mode(), size: fi.Size(), host: host, lazy: true}
	if s.kind == kindSymlink {
		s.target, _ = os.Readlink(s.host)
	}
	return s, ""
}

// isBelow reports whether the slash path p lies strictly below dir.
func isBelow(p, dir string) bool {
	return len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir)
}

// viewSide returns what a layer entry shows.
func (l *layer) viewSide(e entry) side {
	switch e.kind {
	case kindDir, kindSymlink, kindFIFO, kindSocket:
		return side{kind: e.kind, mode: typeOfKind(e.kind) | e.meta().perm, target: e.target()}
	}
	b := l.blobLocked(e.ino)
	if b == nil {
		return side{}
	}
	s := side{kind: kindFile, mode: b.perm, size: b.len(), lazy: b.lazy()}
	s.data = b.data // all of it, or a lazy blob's tail
	if b.external() {
		s.ext = b.ext
	} else if b.lazy() {
		s.host = l.host(b.src)
	}
	return s
}

// compare returns the change at rel between a lower side and a view side.
func compare(rel string, low, view side) (change, bool, error) {
	c := change{Change: Change{Path: rel, Mode: view.mode, OldMode: low.mode}, old: low, new: view}
	switch {
	case low.kind == kindNone && view.kind == kindNone:
		return c, false, nil
	case low.kind == kindNone:
		c.Kind = Added
		return c, true, nil
	case view.kind == kindNone:
		c.Kind = Deleted
		return c, true, nil
	}
	c.Kind = Modified
	if low.kind != view.kind || low.mode != view.mode {
		return c, true, nil
	}
	switch low.kind {
	case kindSymlink:
		return c, low.target != view.target, nil
	case kindFile:
		same, err := sameContent(low, view)
		return c, !same, err
	}
	return c, false, nil
}

// sameContent compares two file sides, reading as little as it can: two
// lazy references to the same lower file are equal without a read.
func sameContent(a, b side) (bool, error) {
	switch {
	case a.lazy && len(a.data) > 0 || b.lazy && len(b.data) > 0: // a tail
		if a.size != b.size {
			return false, nil
		}
		return equalStreams(a, b)
	case a.ext != nil || b.ext != nil:
		if a.size != b.size {
			return false, nil
		}
		if a.ext == b.ext {
			return true, nil
		}
		return equalStreams(a, b)
	}
	switch {
	case a.lazy && b.lazy && a.host == b.host:
		return true, nil
	case a.size != b.size:
		return false, nil
	case !a.lazy && !b.lazy:
		return bytes.Equal(a.data, b.data), nil
	case !b.lazy:
		return equalFile(a.host, b.data)
	case !a.lazy:
		return equalFile(b.host, a.data)
	}
	data, err := os.ReadFile(b.host)
	if err != nil {
		return false, err
	}
	return equalFile(a.host, data)
}

// equalFile reports whether the file at host holds exactly data, streaming.
func equalFile(host string, data []byte) (bool, error) {
	fh, err := os.Open(host)
	if err != nil {
		return false, err
	}
	defer fh.Close()
	buf := make([]byte, min(32<<10, len(data)+1)) // one byte more shows a longer file
	for {
		n, err := io.ReadFull(fh, buf)
		if n > len(data) || !bytes.Equal(buf[:n], data[:n]) {
			return false, nil
		}
		data = data[n:]
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return len(data) == 0, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// equalStreams compares two file sides by streaming both.
func equalStreams(a, b side) (bool, error) {
	ra, err := a.open()
	if err != nil {
		return false, err
	}
	defer ra.Close()
	rb, err := b.open()
	if err != nil {
		return false, err
	}
	defer rb.Close()
	bufA, bufB := make([]byte, 32<<10), make([]byte, 32<<10)
	for {
		na, errA := io.ReadFull(ra, bufA)
		nb, errB := io.ReadFull(rb, bufB)
		if na != nb || !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false, nil
		}
		endA := errA == io.EOF || errA == io.ErrUnexpectedEOF
		endB := errB == io.EOF || errB == io.ErrUnexpectedEOF
		switch {
		case endA && endB:
			return true, nil
		case endA != endB:
			return false, nil
		case errA != nil:
			return false, errA
		case errB != nil:
			return false, errB
		}
	}
}
