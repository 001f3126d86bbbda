package overlayfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cowfs/cowfs/internal/relpath"
	"github.com/cowfs/cowfs/internal/sparse"
)

// CommitError is the error of a Commit that wrote nothing, or that was
// interrupted after its commit point.
//
// With conflicts, nothing was written: Conflicts names every path that
// changed on disk since the layer came to depend on it (a file it read, a
// path it created that now exists, a parent directory that is no longer a
// directory), and the error wraps ErrConflict; where such a change is a
// symlink that would carry a write outside the root, the path is also in
// Escapes and the error wraps ErrOutsideRoot as well.
//
// Otherwise Err is why the commit stopped. Before the commit point
// (staging: a full disk, an I/O error, a read-only root) the tree is
// untouched, Applied is empty and NotApplied lists every path; the layer
// keeps everything and a later Commit can finish. After the commit point
// (a refusal while moving the staged contents into place) Interrupted is
// set and the error also wraps ErrInterruptedCommit: the root named in Err
// holds the journal, and Recover on it finishes the commit. With several
// roots (WithRoot), Applied lists the roots' paths already written.
type CommitError struct {
	Conflicts   []string
	Escapes     []string
	Applied     []string
	NotApplied  []string
	Interrupted bool
	Err         error
}

func (e *CommitError) Error() string {
	switch {
	case len(e.Conflicts) > 0:
		return fmt.Sprintf("overlayfs: commit: lower changed since read: %s", strings.Join(e.Conflicts, ", "))
	case e.Interrupted:
		return fmt.Sprintf("overlayfs: commit interrupted after its commit point: %v", e.Err)
	}
	return fmt.Sprintf("overlayfs: commit: applied %d of %d paths: %v", len(e.Applied), len(e.Applied)+len(e.NotApplied), e.Err)
}

func (e *CommitError) Unwrap() []error {
	switch {
	case len(e.Escapes) > 0:
		return []error{ErrConflict, ErrOutsideRoot}
	case len(e.Conflicts) > 0:
		return []error{ErrConflict}
	case e.Interrupted:
		return []error{ErrInterruptedCommit, e.Err}
	}
	return []error{e.Err}
}

// Commit writes the layer to the real root: deletions, directories, files,
// symlinks, modes (the root's own included), owners (where permitted) and
// modification times, atomically (see the package documentation's
// "Commit" section for the guarantee, the journal and its cost).
//
// Before writing anything, Commit checks every path it touches against
// what the layer saw: lower files it read or deleted (device, inode, size,
// mtime, ctime), paths it creates (still absent), parents it writes into
// (still real directories). On any difference it writes nothing and
// returns a *CommitError wrapping ErrConflict that names every such path.
// Every write goes through a handle anchored at the root ([os.Root]), so no
// symlink, in the layer or swapped in on disk during the commit, carries a
// write outside it; such an attempt fails with an error wrapping
// ErrOutsideRoot.
//
// After a successful Commit the layer is empty and the view is unchanged.
// Symlinks keep the time of their creation on disk. A handle open across a
// Commit keeps working on a private copy of its file: its later writes
// reach neither the view nor the disk (reopen the file to go on).
func (f *Fs) Commit() error { return f.commit(nil, nil) }

// CommitPaths is Commit restricted to the changes at or under the given
// names (a review gate: accept some changes, keep the rest in the layer).
// Parent directories that only the layer has are created as needed. It is
// atomic as Commit is.
func (f *Fs) CommitPaths(names ...string) error {
	sel := make(map[*layer][]string)
	for _, name := range names {
		g, abs := f.pick(name)
		g.mu.RLock()
		l, err := g.resolve("commit", name, abs, false)
		g.mu.RUnlock()
		if err != nil {
			return err
		}
		if !l.inside {
			return pathErr("commit", name, ErrOutsideRoot)
		}
		sel[g] = append(sel[g], l.rel)
	}
	return f.commit(sel, nil)
}

// plan is what one root's commit writes.
type plan struct {
	keys []string
	ents []entry
	keep map[string]bool // ancestors created for selected entries, kept in the layer
}

// commit applies the layer entries selected per root (all when sel is nil),
// after checking every root for conflicts. Each root is staged, then each
// is applied: a crash leaves each root old or new, not all roots alike.
func (f *Fs) commit(sel map[*layer][]string, hook faultHook) error {
	return f.commitLocked(sel, hook)
}

// commitLocked is commit, under the locks of all the Fs's layers.
func (f *Fs) commitLocked(sel map[*layer][]string, hook faultHook) error {
	roots := f.layers
	for _, g := range roots {
		g.mu.Lock()
		defer g.mu.Unlock()
	}
	// The lower changed under every layer of the family (this Fs's, its
	// forks', and it of theirs): each drops what it saw of it, from
	// before the locks are released (see layer.lower).
	defer f.fam.lowerChanged()
	plans := make([]plan, len(roots))
	for i, g := range roots {
		rels, ok := sel[g]
		if sel != nil && !ok {
			continue
		}
		plans[i] = g.planLocked(rels, sel != nil)
		for _, k := range plans[i].keys {
			if relpath.Within(k, journalName) {
				return &CommitError{NotApplied: allKeys(roots, plans, len(roots) > 1),
					Err: pathErr("commit", k, fmt.Errorf("the name is reserved for the commit journal: %w", fs.ErrInvalid))}
			}
		}
	}
	// The commit lock of every root written, from the conflict check to
	// the journal's removal: a commit that waited for another checks the
	// tree that one left.
	locks, err := lockRoots(roots, plans)
	if err != nil {
		return &CommitError{NotApplied: allKeys(roots, plans, len(roots) > 1), Err: err}
	}
	defer func() {
		for _, l := range locks {
			l.unlock()
		}
	}()
	if err := conflictsOfLocked(roots, plans, sel); err != nil {
		return err
	}
	journals := make([]*journal, len(roots))
	abortAll := func() {
		for _, j := range journals {
			if j != nil {
				j.abort()
			}
		}
	}
	for i, g := range roots {
		if len(plans[i].keys) == 0 {
			continue
		}
		if err := g.loadRenamedLocked(); err != nil {
			abortAll()
			return &CommitError{NotApplied: allKeys(roots, plans, len(roots) > 1), Err: err}
		}
		j, err := openJournal(g.root, hook)
		if err == nil {
			journals[i] = j
			err = g.stageLocked(j, plans[i])
		}
		if err == nil {
			err = j.seal()
		}
		if err != nil {
			abortAll()
			return &CommitError{NotApplied: allKeys(roots, plans, len(roots) > 1), Err: err}
		}
	}
	// Past the commit points: every root is rolled forward, even when
	// another one fails.
	var applied, notApplied []string
	var firstErr error
	for i, g := range roots {
		j := journals[i]
		if j == nil {
			if sel == nil {
				g.dirs = nil // nothing to write: the view is the real tree, times too
			}
			continue
		}
		err := j.apply()
		if err == nil {
			err = j.finish()
		}
		if err != nil {
			j.rt.Close()
			notApplied = append(notApplied, allKeys(roots[i:i+1], plans[i:i+1], len(roots) > 1)...)
			if firstErr == nil {
				firstErr = fmt.Errorf("call overlayfs.Recover on %s: %w", g.root, err)
			}
			continue
		}
		g.settlePlanLocked(plans[i])
		if sel == nil {
			g.dirs = nil // the layer is empty: the real directories' times show
		}
		applied = append(applied, allKeys(roots[i:i+1], plans[i:i+1], len(roots) > 1)...)
	}
	if firstErr != nil {
		return &CommitError{Applied: applied, NotApplied: notApplied, Interrupted: true, Err: firstErr}
	}
	return nil
}

// conflictsOfLocked is Commit's check: every selected root's plan against
// the disk, under the commit locks; a *CommitError naming every conflict,
// or nil.
func conflictsOfLocked(roots []*layer, plans []plan, sel map[*layer][]string) error {
	var conflicts, escapes []string
	for i, g := range roots {
		if _, ok := sel[g]; sel != nil && !ok {
			continue
		}
		cs, err := g.conflictsLocked(plans[i])
		if err != nil {
			return &CommitError{NotApplied: allKeys(roots, plans, len(roots) > 1), Err: err}
		}
		for _, c := range cs {
			p := c.path
			if len(roots) > 1 {
				p = filepath.Join(g.root, p)
			}
			conflicts = append(conflicts, p)
			if c.escape {
				escapes = append(escapes, p)
			}
		}
	}
	if len(conflicts) > 0 {
		return &CommitError{Conflicts: conflicts, Escapes: escapes}
	}
	return nil
}

// lockRoots takes the commit lock of each root with something to write,
// in the order of their paths (two commits over the same roots cannot
// wait for each other).
func lockRoots(roots []*layer, plans []plan) ([]*rootLock, error) {
	var order []*layer
	for i, g := range roots {
		if len(plans[i].keys) > 0 {
			order = append(order, g)
		}
	}
	slices.SortFunc(order, func(a, b *layer) int { return strings.Compare(a.root, b.root) })
	locks := make([]*rootLock, 0, len(order))
	for _, g := range order {
		l, err := lockRoot(g.root, true, true)
		if err != nil {
			for _, l := range locks {
				l.unlock()
			}
			return nil, pathErr("commit", g.root, err)
		}
		locks = append(locks, l)
	}
	return locks, nil
}

// allKeys lists the keys of the plans, prefixed with their roots when
// prefix is set (there are several roots).
func allKeys(roots []*layer, plans []plan, prefix bool) []string {
	var out []string
	for i, g := range roots {
		if prefix {
			out = append(out, prefixAll(g.root, plans[i].keys)...)
		} else {
			for _, k := range plans[i].keys {
				out = append(out, osSlash(k))
			}
		}
	}
	return out
}

func prefixAll(root string, rels []string) []string {
	out := make([]string, len(rels))
	for i, r := range rels {
		out[i] = filepath.Join(root, r)
	}
	return out
}

// planLocked selects the layer entries at or under rels (all when !partial).
// A selected name the layer hides only through an ancestor (an opaque or
// replaced directory) gets a deletion step of its own. The root's own
// entry (key "") comes first.
func (l *layer) planLocked(rels []string, partial bool) plan {
	p := plan{keep: make(map[string]bool)}
	l.paths.Scan(func(k string, e entry) bool {
		if k == "" && e.kind != kindDir {
			return true
		}
		if !partial || under(k, rels) {
			p.keys, p.ents = append(p.keys, k), append(p.ents, e)
		} else if e.kind == kindDir && k != "" && above(k, rels) {
			p.keys, p.ents = append(p.keys, k), append(p.ents, e)
			p.keep[k] = true
		}
		return true
	})
	if !partial {
		return p
	}
	for _, r := range rels {
		if r == "" || slices.ContainsFunc(p.keys, func(k string) bool { return under(k, []string{r}) }) {
			continue
		}
		if !l.nodeAtLocked(r).exists() && l.lowerSide(r).kind != kindNone {
			i, _ := slices.BinarySearch(p.keys, r)
			p.keys = slices.Insert(p.keys, i, r)
			p.ents = slices.Insert(p.ents, i, entry{kind: kindWhiteout})
			p.keep[r] = true // nothing in the layer to drop: an ancestor hides it
		}
	}
	return p
}

// loadRenamedLocked reads into memory the bytes of every renamed file that
// still refers to the lower under its old name: the commit may delete or
// overwrite that name, whether or not the renamed file is committed now.
func (l *layer) loadRenamedLocked() error {
	var renamed []uint64
	l.paths.Scan(func(k string, e entry) bool {
		if e.kind == kindFile {
			if b := l.blobLocked(e.ino); b != nil && b.lazy() && !b.external() && b.src != k {
				renamed = append(renamed, e.ino)
			}
		}
		return true
	})
	for _, ino := range renamed {
		if err := l.ownBlobLocked(ino).load(l, 0); err != nil {
			return err
		}
	}
	return nil
}

// stageLocked writes the new contents of a plan into the journal's stage
// and records the steps that put them in place. Nothing outside the
// journal is written. A new directory is staged with its whole subtree, so
// that one rename places it.
func (l *layer) stageLocked(j *journal, p plan) error {
	st := &stage{j: j, keep: p.keep, staged: map[string]string{}, links: map[uint64]string{}}
	for i, k := range p.keys {
		e := p.ents[i]
		s := slot{k: k}
		s.in, s.inNew = st.stagedAt(k)
		if s.inNew && e.kind == kindWhiteout {
			continue
		}
		if !s.inNew {
			fi, err := j.rt.Lstat(osName(k))
			switch {
			case err == nil:
				s.low = fi
			case !isMissing(err):
				return escapeErr(err)
			}
		}
		if err := l.stageEntryLocked(st, s, e); err != nil {
			return err
		}
	}
	return nil
}

// stage is a plan being staged into a journal.
type stage struct {
	j      *journal
	keep   map[string]bool   // the plan's keep
	staged map[string]string // new directory in the tree -> its place in the stage
	links  map[uint64]string // linked identity -> where its first name is (see stageLinkLocked)
}

// slot is where one entry of a plan goes: its key, what the lower has
// there (nil: nothing, or inside a new directory), and inside a new
// directory, its place in the stage.
type slot struct {
	k     string
	low   fs.FileInfo
	in    string
	inNew bool
}

// lowDir reports whether the lower has a directory at the slot.
func (s slot) lowDir() bool { return s.low != nil && s.low.IsDir() }

// stagedAt returns the place in the stage of k inside a new directory
// staged whole, if it is.
func (st *stage) stagedAt(k string) (string, bool) {
	for a := parent(k); a != ""; a = parent(a) {
		if s, ok := st.staged[a]; ok {
			return s + k[len(a):], true
		}
	}
	return "", false
}

// trash moves what the lower has at the slot to the trash first: where
// the new entry cannot be renamed over the old one (a directory on either
// side).
func (st *stage) trash(s slot) {
	st.j.add(step{Op: opTrash, Path: s.k, N: st.j.next()})
}

// place returns where in the stage the slot's new entry is written.
func (st *stage) place(s slot) string {
	if s.inNew {
		return s.in
	}
	n := st.j.next()
	st.j.add(step{Op: opPlace, Path: s.k, N: n})
	return stageName(n)
}

// stageEntryLocked stages one entry by kind.
func (l *layer) stageEntryLocked(st *stage, s slot, e entry) error {
	switch e.kind {
	case kindWhiteout:
		if s.low != nil {
			st.trash(s)
		}
	case kindDir:
		return l.stageDirLocked(st, s, e)
	case kindFIFO, kindSocket:
		return st.special(s, e)
	case kindSymlink:
		if done, err := l.stageLinkLocked(st, s, e); done {
			return err
		}
		if s.lowDir() {
			st.trash(s)
		}
		place := st.place(s)
		st.linkedLocked(l, e, place)
		return st.j.stageSymlink(place, e.target(), e.meta())
	case kindFile:
		return l.stageFileLocked(st, s, e)
	}
	return nil
}

// stageDirLocked stages a directory: over a lower directory only its
// metadata (and, opaque, the trashing of the lower children the layer
// does not have); otherwise a new directory, staged whole.
func (l *layer) stageDirLocked(st *stage, s slot, e entry) error {
	if s.lowDir() {
		if e.opaque && !st.keep[s.k] {
			if err := l.pruneLocked(st.j, s.k); err != nil {
				return err
			}
		}
		st.j.add(metaStep(s.k, e.meta(), false))
		return nil
	}
	if s.low != nil {
		st.trash(s)
	}
	place := st.place(s)
	if err := st.j.stageDir(place); err != nil {
		return err
	}
	if !s.inNew {
		st.staged[s.k] = place
	}
	st.j.add(metaStep(s.k, e.meta(), false))
	return nil
}

// special stages a FIFO or a socket; over the same kind of node only its
// metadata.
func (st *stage) special(s slot, e entry) error {
	if s.low != nil && kindOfMode(s.low.Mode()) == e.kind {
		st.j.add(metaStep(s.k, e.meta(), false)) // the same node, new metadata
		return nil
	}
	if s.lowDir() {
		st.trash(s)
	}
	if err := st.j.stageSpecial(st.place(s), e.kind); err != nil {
		return err
	}
	st.j.add(metaStep(s.k, e.meta(), false))
	return nil
}

// stageFileLocked stages a file's content, streamed from the lower or an
// external file when it is still lazy; a file still the lower's own bytes
// at the same place gets only its metadata.
func (l *layer) stageFileLocked(st *stage, s slot, e entry) error {
	b := l.blobLocked(e.ino)
	if b == nil {
		return pathErr("commit", s.k, fs.ErrNotExist)
	}
	if done, err := l.stageLinkLocked(st, s, e); done {
		return err
	}
	if b.lazy() && !b.external() && len(b.data) == 0 && b.src == s.k && s.low != nil && s.low.Mode().IsRegular() {
		st.j.add(metaStep(s.k, b.meta, false)) // same bytes, already there
		st.linkedLocked(l, e, s.k)
		return nil
	}
	if s.lowDir() {
		st.trash(s)
	}
	place := st.place(s)
	st.linkedLocked(l, e, place)
	return st.j.stageFile(place, b.meta, func(fh *os.File) error {
		if !b.lazy() {
			return sparse.Write(fh, b.data)
		}
		r, err := b.reader(l) // streamed: a large file is never held whole
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = sparse.Copy(fh, r)
		return err
	})
}

// settlePlanLocked brings the layer up to date with a plan now on disk:
// what the lower shows as the layer did leaves the layer, and the lower's
// new state is what later commits compare with.
func (l *layer) settlePlanLocked(p plan) {
	defer func() {
		l.fam.lowerChanged()
		clear(l.copied)
		clear(l.copyIno)
	}()
	for i, k := range p.keys {
		for a := k; a != ""; {
			a = parent(a)
			l.refreshDepLocked(a)          // Commit's own write is no conflict
			l.dropDirTimesLocked(a, false) // the real directory's time moved
		}
		if !p.keep[k] {
			l.settleLocked(k, p.ents[i])
		} else {
			l.recordDepLocked(k)
		}
	}
	for i := len(p.keys) - 1; i >= 0; i-- {
		if p.ents[i].kind == kindDir {
			l.refreshDepLocked(p.keys[i])
		}
	}
}

// under reports whether k is one of rels or below one.
func under(k string, rels []string) bool {
	for _, r := range rels {
		if relpath.Within(k, r) {
			return true
		}
	}
	return false
}

// above reports whether k is an ancestor of one of rels.
func above(k string, rels []string) bool {
	for _, r := range rels {
		if strings.HasPrefix(r, k+"/") {
			return true
		}
	}
	return false
}

// selectedAbove reports whether rel or one of its ancestors is selected.
func selectedAbove(rel string, sel map[string]bool) bool {
	for p := rel; p != ""; p = parent(p) {
		if sel[p] {
			return true
		}
	}
	return false
}

// settleLocked drops an applied entry from the layer once the lower shows
// the same thing through it; under a directory the layer still hides, the
// entry stays (it is now equal to the lower there, and harmless).
func (l *layer) settleLocked(k string, e entry) {
	if !l.lowerVisible(parent(k)) {
		l.recordDepLocked(k)
		return
	}
	l.deleteEntry(k)
	// The lower at and below k is now what the layer said: nothing there is
	// a dependency any more.
	var stale []string
	l.deps.Ascend(k, func(p string, _ dep) bool {
		if p != k && !strings.HasPrefix(p, k+"/") {
			return !strings.HasPrefix(p, k)
		}
		stale = append(stale, p)
		return true
	})
	for _, p := range stale {
		l.deps.Delete(p)
	}
	l.dropNameLocked(e)
}

// pruneLocked moves to the trash the lower children of an opaque
// directory that the layer does not have.
func (l *layer) pruneLocked(j *journal, rel string) error {
	d, err := j.rt.Open(osName(rel))
	if err != nil {
		return escapeErr(err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		if _, ok := l.paths.Get(join(rel, name)); !ok {
			j.add(step{Op: opTrash, Path: join(rel, name), N: j.next()})
		}
	}
	return nil
}

// fileMode maps permission bits to what os.Chmod takes.
func fileMode(perm fs.FileMode) fs.FileMode { return perm & permBits }
