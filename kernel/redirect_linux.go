package kernel

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cowfs/cowfs/overlayfs"
)

// Directory renames in Run's overlay. Mounted with redirect_dir=on (see
// redirectOptions), the kernel renames a directory that has lower content
// by renaming its upper copy and recording, in its redirect xattr, the
// lower path it still merges with: a name relative to its parent's lower
// path when the rename stayed in one directory ("sub"), else a path from
// the lower root ("/dir/sub"). The old name gets a whiteout where the
// lower has it. Run's import follows a redirect as the kernel's lookup
// does: the lower of a directory is its redirect's path, or its parent's
// lower joined with its own name; an opaque directory has none below it
// (the kernel reads no redirect there, and relative names below it find
// nothing), and an absolute redirect starts again from the lower root.
//
// In the layer, before anything of the upper is applied, every redirected
// directory's lower subtree is renamed aside (the deepest first, so a
// renamed directory inside a renamed directory is taken out before its
// parent moves) with the overlayfs Rename, which keeps file contents lazy;
// when its entry comes, parent-first, it replaces whatever the view has
// at the new name and the upper's own children stack on it as usual.

// validRedirect reports whether v is a redirect the kernel would follow:
// one name, or an absolute path of names, none of them "." or "..".
func validRedirect(v string) bool {
	rest, abs := strings.CutPrefix(v, "/")
	if rest == "" || (!abs && strings.Contains(rest, "/")) {
		return false
	}
	for _, c := range strings.Split(rest, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

// redirectStage is where Run's import has put the lower subtrees of the
// redirected directories while it applies the upper.
type redirectStage struct {
	upper string
	aside map[string]string // redirected directory (upper rel) -> its lower subtree's name aside, in the root
}

// stageRedirects computes the lower path of every redirected directory in
// entries and renames each such lower directory aside in f.
func stageRedirects(upper string, f *overlayfs.Fs, entries []upperEntry) (*redirectStage, error) {
	rs := &redirectStage{upper: upper, aside: map[string]string{}}
	type move struct{ from, dir string }
	var moves []move
	lower := map[string]string{".": "."} // directory -> its lower path; absent: none
	for _, e := range entries {
		if e.typ != overlayfs.EntryDir {
			continue
		}
		parent, hasLower := lower[path.Dir(e.rel)]
		switch {
		case e.opaque:
		case strings.HasPrefix(e.redirect, "/"):
			lower[e.rel] = e.redirect[1:]
		case !hasLower:
		case e.redirect != "":
			lower[e.rel] = joinRel(parent, e.redirect)
		default:
			lower[e.rel] = joinRel(parent, path.Base(e.rel))
		}
		if from, ok := lower[e.rel]; ok && e.redirect != "" && lowerDir(f, from) {
			moves = append(moves, move{from, e.rel})
		}
	}
	if len(moves) == 0 {
		return rs, nil
	}
	slices.SortStableFunc(moves, func(a, b move) int {
		return strings.Count(b.from, "/") - strings.Count(a.from, "/")
	})
	n := 0
	for _, m := range moves {
		var aside string
		for {
			aside = ".cowfs-redirect-" + strconv.Itoa(n)
			n++
			if _, err := f.Lstat(rs.view(f, aside)); err != nil {
				break
			}
		}
		if err := f.Rename(rs.view(f, m.from), rs.view(f, aside)); err != nil {
			return nil, &fs.PathError{Op: "import", Path: filepath.Join(upper, m.dir), Err: fmt.Errorf("%w: following the redirect to %s: %w", ErrRedirect, m.from, err)}
		}
		rs.aside[m.dir] = aside
	}
	return rs, nil
}

func (rs *redirectStage) view(f *overlayfs.Fs, rel string) string {
	return filepath.Join(f.Root(), filepath.FromSlash(rel))
}

// lowerDir reports whether rel is a directory of f's view reached through
// directories only: the kernel's lookup of a redirect follows no symlink.
func lowerDir(f *overlayfs.Fs, rel string) bool {
	p := f.Root()
	for _, c := range strings.Split(rel, "/") {
		p = filepath.Join(p, c)
		fi, err := f.Lstat(p)
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// place makes the redirected directory e show its lower subtree: whatever
// the view has at e's name is hidden (the kernel looks below at the
// redirect, not at the name), and the subtree put aside comes in its
// place. Without a lower subtree the name is left empty, and e's entry
// then makes an opaque directory there.
func (rs *redirectStage) place(f *overlayfs.Fs, e upperEntry) error {
	at := rs.view(f, e.rel)
	if _, err := f.Lstat(at); err == nil {
		if err := f.PutEntry(overlayfs.LayerEntry{Path: e.rel, Type: overlayfs.EntryWhiteout}, nil); err != nil {
			return err
		}
	}
	aside, ok := rs.aside[e.rel]
	if !ok {
		return nil
	}
	delete(rs.aside, e.rel)
	if err := f.Rename(rs.view(f, aside), at); err != nil {
		return &fs.PathError{Op: "import", Path: filepath.Join(rs.upper, e.rel), Err: fmt.Errorf("%w: %w", ErrRedirect, err)}
	}
	return nil
}

// done checks that every subtree put aside found its place.
func (rs *redirectStage) done() error {
	for dir, aside := range rs.aside {
		return &fs.PathError{Op: "import", Path: filepath.Join(rs.upper, dir), Err: fmt.Errorf("%w: the lower subtree put aside as %s was not placed", ErrRedirect, aside)}
	}
	return nil
}
