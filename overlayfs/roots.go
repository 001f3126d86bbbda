package overlayfs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// WithRoot overlays one more directory in the same Fs: a sibling module, a
// config directory. Names inside it go to its own layer; Changes say which
// root a change belongs to; Snapshot, Restore, Fork, Reset and Commit cover
// every root at once (Commit checks all of them for conflicts before
// writing any). Roots may not be nested. Renaming across roots fails with
// EXDEV, as across devices. A symlink in one root that points into another
// is followed on the real file system: reads through it see that root's
// lower, writes through it are refused.
func WithRoot(dir string) Option {
	return func(o *options) { o.extra = append(o.extra, dir) }
}

// addRoots creates the layers of the extra roots.
func (f *Fs) addRoots(extra []string) error {
	for _, dir := range extra {
		opts := f.opts
		opts.extra = nil
		g, err := New(dir, func(o *options) { *o = opts })
		if err != nil {
			return err
		}
		g.fam = f.fam
		g.resetLocked()
		for _, r := range f.Roots() {
			if nested(r, g.root) || nested(g.root, r) {
				return fmt.Errorf("overlayfs: roots %s and %s overlap", r, g.root)
			}
		}
		f.subs = append(f.subs, g)
	}
	return nil
}

// nested reports whether dir is at or under root.
func nested(root, dir string) bool {
	return dir == root || root == "/" || strings.HasPrefix(dir, root+"/")
}

// Roots returns the canonical roots, the primary one (Root) first.
func (f *Fs) Roots() []string {
	out := []string{f.root}
	for _, g := range f.subs {
		out = append(out, g.root)
	}
	return out
}

// route returns the layer of the extra root name lies in, or nil for the
// primary root and for names outside every root.
func (f *Fs) route(name string) *Fs {
	if len(f.subs) == 0 || name == "" {
		return nil
	}
	abs := name
	if !filepath.IsAbs(name) {
		wd, err := getwd()
		if err != nil {
			return nil
		}
		abs = filepath.Join(wd, name)
	}
	p := filepath.Clean(abs)
	if _, ok := f.within(p); ok {
		return nil
	}
	for _, g := range f.subs {
		if _, ok := g.within(p); ok {
			return g
		}
	}
	c := physical(p)
	for _, g := range f.subs {
		if _, ok := g.within(c); ok {
			return g
		}
	}
	return nil
}

// WriteDiffFor writes the git patch of one root's layer, paths relative to
// that root (see WriteDiff).
func (f *Fs) WriteDiffFor(w io.Writer, root string) error {
	for _, g := range f.all() {
		if g.root == root {
			return g.writeDiff(w)
		}
	}
	return fmt.Errorf("overlayfs: %s is not a root of this Fs", root)
}

// all returns the primary layer and those of the extra roots.
func (f *Fs) all() []*Fs {
	return append([]*Fs{f}, f.subs...)
}

// physical resolves the symlinks of the longest existing ancestor of a
// clean path, to tell which root a name outside them all reaches.
func physical(p string) string {
	dir, rest := p, ""
	for {
		if _, err := os.Lstat(dir); err == nil {
			break
		}
		next := filepath.Dir(dir)
		if next == dir {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = next
	}
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return p
	}
	return filepath.Join(r, rest)
}
