package kernel

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cowfs/cowfs/internal/relpath"
	"github.com/cowfs/cowfs/overlayfs"
)

// step is one thing an upper dir (or an OCI layer) must hold for f's view:
// a layer entry, or a lower directory the layer does not hold but whose
// children it does (implicit). Whiteouts appear only where they hide
// something: the lower has the path and the parent is merged.
type step struct {
	overlayfs.LayerEntry
	implicit   bool      // a copy of the lower directory
	atime      time.Time // implicit dirs keep the lower's access time
	markOpaque bool      // a directory hiding a lower directory below a merged parent
}

// planLayerRoot turns f's layer into steps, parents before children, in
// bytewise path order otherwise (directories with only a time of the
// view's, see addDirTimes, last). Cost: O(layer) plus one lstat of the
// lower per directory and whiteout. It also returns the layer's entry for
// the root directory's own metadata (Path "."), or nil when it has none, and
// the view's time of the root where the layer keeps one (zero otherwise;
// see addDirTimes).
func planLayerRoot(f *overlayfs.Fs) ([]step, *overlayfs.LayerEntry, time.Time, error) {
	p := &planner{lower: f.Root(), merged: map[string]bool{".": true}}
	for _, e := range f.Layer() {
		if e.Path == "." && e.Type == overlayfs.EntryDir {
			p.root = &e
			continue
		}
		if err := p.add(e); err != nil {
			return nil, nil, time.Time{}, err
		}
	}
	p.addDirTimes(f)
	return p.steps, p.root, p.rootTime, nil
}

// addDirTimes gives the directories the view has a time of the layer's
// for (see [overlayfs.Fs.DirTimes]) that time: a lower directory the
// layer has no entry at or below is planned as a parent is (the lower's
// metadata), so that the kernel's overlay shows the view's time. The
// root's goes to p.rootTime. A time of a path the view has no directory
// at is no directory's: it is left out.
func (p *planner) addDirTimes(f *overlayfs.Fs) {
	times := map[string]time.Time{}
	for rel, t := range f.DirTimes() {
		if rel == "." {
			p.rootTime = t
			continue
		}
		if _, ok := p.merged[rel]; !ok {
			fi, err := f.Lstat(filepath.Join(p.lower, filepath.FromSlash(rel)))
			if err != nil || !fi.IsDir() || p.ensureDir(rel) != nil {
				continue
			}
		}
		times[rel] = t
	}
	if len(times) == 0 {
		return
	}
	for i := range p.steps {
		if t, ok := times[p.steps[i].Path]; ok && p.steps[i].Type == overlayfs.EntryDir {
			p.steps[i].ModTime = t
		}
	}
}

type planner struct {
	lower  string
	merged map[string]bool // every upper dir planned so far: is it merged?
	steps  []step
	root   *overlayfs.LayerEntry
	// rootTime is the view's time of the root, where the layer has one
	// (see addDirTimes); zero otherwise.
	rootTime time.Time
}

func (p *planner) lowerLstat(rel string) (fs.FileInfo, error) {
	return os.Lstat(filepath.Join(p.lower, filepath.FromSlash(rel)))
}

func (p *planner) lowerIsDir(rel string) bool {
	fi, err := p.lowerLstat(rel)
	return err == nil && fi.IsDir()
}

// ensureDir plans the implicit dir rel and its missing parents.
func (p *planner) ensureDir(rel string) error {
	if _, ok := p.merged[rel]; ok {
		return nil
	}
	parent := parentOf(rel)
	if err := p.ensureDir(parent); err != nil {
		return err
	}
	fi, err := p.lowerLstat(rel)
	if err == nil && !fi.IsDir() {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return &fs.PathError{Op: "materialize", Path: filepath.Join(p.lower, rel), Err: fmt.Errorf("parent of a layer entry is neither in the layer nor a lower directory: %w", underlying(err))}
	}
	st := fi.Sys().(*syscall.Stat_t)
	p.merged[rel] = p.merged[parent]
	p.steps = append(p.steps, step{
		LayerEntry: overlayfs.LayerEntry{
			Path: rel, Type: overlayfs.EntryDir, Mode: specialPerm(fi.Mode()),
			ModTime: time.Unix(st.Mtim.Unix()), Uid: int(st.Uid), Gid: int(st.Gid),
		},
		implicit: true,
		atime:    time.Unix(st.Atim.Unix()),
	})
	return nil
}

func (p *planner) add(e overlayfs.LayerEntry) error {
	if !relpath.Below(e.Path) {
		return &fs.PathError{Op: "materialize", Path: e.Path, Err: fs.ErrInvalid}
	}
	parent := parentOf(e.Path)
	if err := p.ensureDir(parent); err != nil {
		return err
	}
	parentMerged := p.merged[parent]
	s := step{LayerEntry: e, atime: e.ModTime}
	switch e.Type {
	case overlayfs.EntryWhiteout:
		// Below an opaque or upper-only dir nothing of the lower shows, and
		// the kernel would list a stray whiteout as a broken entry.
		if !parentMerged {
			return nil
		}
		if _, err := p.lowerLstat(e.Path); err != nil {
			return nil
		}
	case overlayfs.EntryDir:
		lowerDir := parentMerged && p.lowerIsDir(e.Path)
		s.markOpaque = lowerDir && e.Opaque
		p.merged[e.Path] = lowerDir && !e.Opaque
	case overlayfs.EntryFile, overlayfs.EntrySymlink, overlayfs.EntryFIFO, overlayfs.EntrySocket:
	default:
		return &fs.PathError{Op: "materialize", Path: e.Path, Err: fmt.Errorf("entry type %d: %w", e.Type, ErrUnsupportedType)}
	}
	p.steps = append(p.steps, s)
	return nil
}

func specialPerm(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// Root-relative slash paths in this package spell the root ".", as io/fs
// and package tape do; parentOf and joinRel are the package's one pair of
// path helpers.

// parentOf returns the directory of a root-relative path, "." for a
// top-level name.
func parentOf(rel string) string { return path.Dir(rel) }

// joinRel joins a root-relative directory ("." for the root) and a name.
func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}
