package overlayfs

import (
	"io"
	"os"
	"slices"
	"strings"
)

// ChangesBetween returns every path at which the view of b differs from
// the view of a, sorted by path: Added means in b and not in a. a and b may
// come from f or from any fork of it (same root). Cost: O(size of both
// layers), plus the lower subtrees that one side shows and the other hides.
// It compares the primary root's layer only: the extra roots of
// [WithRoot] are not in the result.
func (f *Fs) ChangesBetween(a, b *Snapshot) []Change {
	cs, _ := f.primary().between(a.layers[0], b.layers[0])
	out := make([]Change, len(cs))
	for i, c := range cs {
		out[i] = c.Change
	}
	return out
}

// WriteDiffBetween writes the changes from a to b as a git patch, with the
// same guarantee as WriteDiff: in a copy of a's view, `git apply` gives b's
// view (files and symlinks, byte for byte, with their executable bits).
// Like [Fs.ChangesBetween] it covers the primary root only.
func (f *Fs) WriteDiffBetween(w io.Writer, a, b *Snapshot) error {
	cs, err := f.primary().between(a.layers[0], b.layers[0])
	if err != nil {
		return err
	}
	return writePatch(w, cs)
}

// viewOf returns a read-only layer over a snapshot's layer. Snapshot trees
// are never changed, so it needs no lock.
func (l *layer) viewOf(s *savedLayer) *layer {
	return &layer{shared: l.shared, root: l.root, paths: newPathMap(s.paths), blobs: s.blobs}
}

func (l *layer) between(a, b *savedLayer) ([]change, error) {
	va, vb := l.viewOf(a), l.viewOf(b)
	keys := make(map[string]bool)
	for _, s := range []*savedLayer{a, b} {
		s.paths.Scan(func(k string, _ entry) bool {
			if k != "" {
				keys[k] = true
			}
			return true
		})
	}
	var out []change
	var firstErr error
	var visit func(rel string, na, nb node)
	visit = func(rel string, na, nb node) {
		c, ok, err := compare(rel, va.sideOf(rel, na), vb.sideOf(rel, nb))
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if ok {
			out = append(out, c)
		}
		if na.under == nb.under && (na.kind == kindDir) == (nb.kind == kindDir) {
			return // the same lower shows through both, or through neither
		}
		// One side shows lower children the other does not: walk them.
		names := make(map[string]bool)
		for _, v := range []struct {
			f *layer
			n node
		}{{va, na}, {vb, nb}} {
			if v.n.kind != kindDir {
				continue
			}
			ents, err := v.f.listLocked(rel, v.n)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			for _, name := range ents.names {
				names[name] = true
			}
		}
		for name := range names {
			p := join(rel, name)
			if !keys[p] {
				visit(p, va.nodeAtLocked(p), vb.nodeAtLocked(p))
			}
		}
	}
	for k := range keys {
		visit(k, va.nodeAtLocked(k), vb.nodeAtLocked(k))
	}
	// The root's own mode, at ".".
	ra, errA := va.rootNode()
	rb, errB := vb.rootNode()
	if errA == nil && errB == nil {
		if c, ok, _ := compare(".", va.sideOf("", ra), vb.sideOf("", rb)); ok {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(x, y change) int { return strings.Compare(x.Path, y.Path) })
	for i := range out {
		out[i].Root = l.root
	}
	return out, firstErr
}

// sideOf returns what a node of this view is, for comparison.
func (l *layer) sideOf(rel string, n node) side {
	switch {
	case !n.exists():
		return side{}
	case n.layer:
		return l.viewSide(n.e)
	}
	s := side{kind: n.kind, mode: n.fi.Mode(), size: n.fi.Size(), host: l.host(rel), lazy: true}
	if s.kind == kindSymlink {
		s.target, _ = os.Readlink(s.host)
	}
	return s
}
