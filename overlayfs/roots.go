package overlayfs

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// WithRoot overlays one more directory in the same Fs: a sibling module, a
// config directory. Names inside it go to its own layer; Changes say which
// root a change belongs to; Snapshot, Restore, Fork, Reset and Commit cover
// every root at once (Commit checks all of them for conflicts before
// writing any). Roots may not be nested. Renaming across roots fails with
// EXDEV, as across devices. A name outside every root that reaches one
// through a symlink or an alias (a bind mount) is that root's. A symlink in
// one root that points into another (by its name or an alias) is followed
// on the real file system: reads through it see that root's lower; writes
// through it are refused, whatever the outside policy, with an error
// matching ErrOutsideRoot.
func WithRoot(dir string) Option {
	return func(o *options) { o.extra = append(o.extra, dir) }
}

// addRoot adds the layer of one more root, which must not overlap those
// already there.
func (f *Fs) addRoot(dir string) error {
	g, err := newLayer(f.shared, dir)
	if err != nil {
		return err
	}
	for _, r := range f.Roots() {
		if nested(r, g.root) || nested(g.root, r) {
			return fmt.Errorf("overlayfs: roots %s and %s overlap", r, g.root)
		}
	}
	f.layers = append(f.layers, g)
	f.roots = append(f.roots, g.root)
	return nil
}

// nested reports whether dir is at or under root.
func nested(root, dir string) bool {
	return dir == root || root == "/" || strings.HasPrefix(dir, root+"/")
}

// Roots returns the canonical roots, the primary one (Root) first.
func (f *Fs) Roots() []string {
	var out []string
	for _, g := range f.layers {
		out = append(out, g.root)
	}
	return out
}

// primary returns the layer of the primary root.
func (f *Fs) primary() *layer { return f.layers[0] }

// pick returns the layer of the root name lies in (the primary one for a
// name outside every root) and, with several roots, name made absolute:
// the layer's resolver takes it from there ("": it makes name absolute
// itself, once). The choice is lexical, then, for a name outside every
// root, by where it leads on the real file system: the primary layer's
// outside walk follows its symlinks and tells aliases of the roots (see
// alias.go).
func (f *Fs) pick(name string) (*layer, string) {
	if len(f.layers) == 1 || name == "" {
		return f.primary(), ""
	}
	abs := name
	if !filepath.IsAbs(name) {
		wd, err := getwd()
		if err != nil {
			return f.primary(), ""
		}
		abs = wd + "/" + name
	}
	p := filepath.Clean(abs)
	for _, g := range f.layers {
		if _, ok := g.within(p); ok {
			return g, abs
		}
	}
	pr := f.primary()
	pr.mu.RLock()
	at, _ := pr.outside("", name, abs, true, 0)
	pr.mu.RUnlock()
	if at.other > 0 {
		return f.layers[at.other-1], abs
	}
	return pr, abs
}

// WriteDiffFor writes the git patch of one root's layer, paths relative to
// that root (see WriteDiff).
func (f *Fs) WriteDiffFor(w io.Writer, root string) error {
	for _, g := range f.layers {
		if g.root == root {
			return g.writeDiff(w)
		}
	}
	return fmt.Errorf("overlayfs: %s is not a root of this Fs", root)
}
