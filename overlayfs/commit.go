package overlayfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// CommitError is the error of a Commit that did not write everything.
//
// With conflicts, nothing was written: Conflicts names every lower path
// that changed on disk since the layer came to depend on it, and the error
// wraps ErrConflict. Otherwise the disk refused a write midway: Applied
// lists the layer paths written, in order, NotApplied those left in the
// layer (nothing is lost: a second Commit after fixing the cause finishes),
// and Err is the refusal.
type CommitError struct {
	Conflicts  []string
	Applied    []string
	NotApplied []string
	Err        error
}

func (e *CommitError) Error() string {
	if len(e.Conflicts) > 0 {
		return fmt.Sprintf("overlayfs: commit: lower changed since read: %s", strings.Join(e.Conflicts, ", "))
	}
	return fmt.Sprintf("overlayfs: commit: applied %d of %d paths: %v", len(e.Applied), len(e.Applied)+len(e.NotApplied), e.Err)
}

func (e *CommitError) Unwrap() error {
	if len(e.Conflicts) > 0 {
		return ErrConflict
	}
	return e.Err
}

// Commit writes the layer to the real root: deletions, directories, files,
// symlinks, modes, owners (where permitted) and modification times. Every
// file is written to a temporary file in its directory, synced, and renamed
// into place, so no file is ever half-written.
//
// Before writing anything, Commit checks every lower path the layer depends
// on (read for a copy-up, deleted, renamed away) against the identity
// (device, inode, size, mtime, ctime) it had when the layer came to depend
// on it; on any difference it writes nothing and returns a *CommitError
// wrapping ErrConflict that names every such path.
//
// After a successful Commit the layer is empty and the view is unchanged.
// Symlinks keep the time of their creation on disk. A handle open across a
// Commit keeps working on a private copy of its file: its later writes
// reach neither the view nor the disk (reopen the file to go on).
func (f *Fs) Commit() error { return f.commit(nil) }

// CommitPaths is Commit restricted to the changes at or under the given
// names (a review gate: accept some changes, keep the rest in the layer).
// Parent directories that only the layer has are created as needed.
func (f *Fs) CommitPaths(names ...string) error {
	sel := make(map[*Fs][]string)
	for _, name := range names {
		g := f.route(name)
		if g == nil {
			g = f
		}
		g.mu.RLock()
		l, err := g.resolve("commit", name, false)
		g.mu.RUnlock()
		if err != nil {
			return err
		}
		if !l.inside {
			return pathErr("commit", name, ErrOutsideRoot)
		}
		sel[g] = append(sel[g], l.rel)
	}
	return f.commit(sel)
}

// plan is what one root's commit writes.
type plan struct {
	keys []string
	ents []entry
	keep map[string]bool // ancestors created for selected entries, kept in the layer
}

// commit applies the layer entries selected per root (all when sel is nil),
// after checking every root for conflicts.
func (f *Fs) commit(sel map[*Fs][]string) error {
	roots := f.all()
	for _, g := range roots {
		g.mu.Lock()
		defer g.mu.Unlock()
	}
	plans := make([]plan, len(roots))
	var conflicts []string
	for i, g := range roots {
		rels, ok := sel[g]
		if sel != nil && !ok {
			continue
		}
		plans[i] = g.planLocked(rels, sel != nil)
		for _, c := range g.conflictsLocked(plans[i].keys) {
			if len(roots) > 1 {
				c = filepath.Join(g.root, c)
			}
			conflicts = append(conflicts, c)
		}
	}
	if len(conflicts) > 0 {
		return &CommitError{Conflicts: conflicts}
	}
	var applied, notApplied []string
	var firstErr error
	for i, g := range roots {
		a, n, err := g.applyPlanLocked(plans[i])
		if len(roots) > 1 {
			a, n = prefixAll(g.root, a), prefixAll(g.root, n)
		}
		applied, notApplied = append(applied, a...), append(notApplied, n...)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return &CommitError{Applied: applied, NotApplied: notApplied, Err: firstErr}
	}
	return nil
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
// replaced directory) gets a deletion step of its own.
func (f *Fs) planLocked(rels []string, partial bool) plan {
	p := plan{keep: make(map[string]bool)}
	f.paths.Scan(func(k string, e entry) bool {
		if k == "" {
			return true
		}
		if !partial || under(k, rels) {
			p.keys, p.ents = append(p.keys, k), append(p.ents, e)
		} else if e.kind == kindDir && above(k, rels) {
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
		if !f.nodeAtLocked(r).exists() && f.lowerSide(r).kind != kindNone {
			i, _ := slices.BinarySearch(p.keys, r)
			p.keys = slices.Insert(p.keys, i, r)
			p.ents = slices.Insert(p.ents, i, entry{kind: kindWhiteout})
			p.keep[r] = true // nothing in the layer to drop: an ancestor hides it
		}
	}
	return p
}

// applyPlanLocked writes a plan, stopping at the first refusal; it returns
// the keys applied and those left in the layer.
func (f *Fs) applyPlanLocked(p plan) (applied, notApplied []string, err error) {
	// A renamed file's bytes are still on the lower under its old name,
	// which a step may delete or overwrite, whether or not the renamed
	// file is committed now: read them all first.
	var loadErr error
	var renamed []uint64
	f.paths.Scan(func(k string, e entry) bool {
		if e.kind == kindFile {
			if b := f.blobLocked(e.ino); b != nil && b.lazy && b.src != k {
				renamed = append(renamed, e.ino)
			}
		}
		return true
	})
	for _, ino := range renamed {
		if err := f.ownBlobLocked(ino).load(f); err != nil && loadErr == nil {
			loadErr = err
		}
	}
	if loadErr != nil {
		return nil, p.keys, loadErr
	}
	defer func() {
		f.dropCaches()
		clear(f.copied)
		clear(f.copyIno)
	}()
	for i, k := range p.keys {
		if err := f.applyLocked(k, p.ents[i], p.keep[k]); err != nil {
			return applied, p.keys[i:], err
		}
		applied = append(applied, k)
		for a := parent(k); ; a = parent(a) {
			f.refreshDepLocked(a) // Commit's own write is no conflict
			if a == "" {
				break
			}
		}
		if !p.keep[k] {
			f.settleLocked(k, p.ents[i])
		} else {
			f.refreshDepLocked(k)
		}
	}
	// Directory times last: writing their children moved them.
	for i := len(p.keys) - 1; i >= 0; i-- {
		if e := p.ents[i]; e.kind == kindDir && !e.mtime.IsZero() {
			os.Chtimes(f.host(p.keys[i]), e.mtime, e.mtime)
			f.refreshDepLocked(p.keys[i])
		}
	}
	return applied, nil, nil
}

// under reports whether k is one of rels or below one.
func under(k string, rels []string) bool {
	for _, r := range rels {
		if r == "" || k == r || strings.HasPrefix(k, r+"/") {
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

// conflictsLocked returns the dependencies of the selected entries whose
// lower no longer matches.
func (f *Fs) conflictsLocked(keys []string) []string {
	sel := make(map[string]bool, len(keys))
	srcs := make(map[string]bool)
	for _, k := range keys {
		sel[k] = true
		if e, ok := f.paths.Get(k); ok && e.kind == kindFile {
			if b := f.blobLocked(e.ino); b != nil && b.lazy {
				srcs[b.src] = true
			}
		}
	}
	var out []string
	f.deps.Scan(func(rel string, d dep) bool {
		if !srcs[rel] && !selectedAbove(rel, sel) {
			return true
		}
		fi, err := os.Lstat(f.host(rel))
		if err != nil || !d.same(fi) {
			out = append(out, rel)
		}
		return true
	})
	return out
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
func (f *Fs) settleLocked(k string, e entry) {
	if !f.lowerVisible(parent(k)) {
		return
	}
	f.paths.Delete(k)
	// The lower at and below k is now what the layer said: nothing there is
	// a dependency any more.
	var stale []string
	f.deps.Ascend(k, func(p string, _ dep) bool {
		if p != k && !strings.HasPrefix(p, k+"/") {
			return !strings.HasPrefix(p, k)
		}
		stale = append(stale, p)
		return true
	})
	for _, p := range stale {
		f.deps.Delete(p)
	}
	if e.kind == kindFile {
		f.dropBlobLocked(e.ino)
	}
}

// applyLocked writes one layer entry to the lower.
func (f *Fs) applyLocked(k string, e entry, createOnly bool) error {
	host := f.host(k)
	low, _ := os.Lstat(host)
	switch e.kind {
	case kindWhiteout:
		return os.RemoveAll(host)
	case kindDir:
		if low != nil && !low.IsDir() {
			if err := os.Remove(host); err != nil {
				return err
			}
			low = nil
		}
		if low == nil {
			if err := os.Mkdir(host, 0o700); err != nil {
				return err
			}
		} else if e.opaque && !createOnly {
			if err := f.pruneLocked(k); err != nil {
				return err
			}
		}
		return setMeta(host, e.meta, false)
	case kindSymlink:
		if low != nil && low.IsDir() {
			if err := os.RemoveAll(host); err != nil {
				return err
			}
		}
		tmp := tempName(host)
		if err := os.Symlink(e.target, tmp); err != nil {
			return err
		}
		if err := setMeta(tmp, e.meta, true); err != nil {
			os.Remove(tmp)
			return err
		}
		return os.Rename(tmp, host)
	case kindFile:
		b := f.blobLocked(e.ino)
		if b == nil {
			return pathErr("commit", k, fs.ErrNotExist)
		}
		if low != nil && low.IsDir() {
			if err := os.RemoveAll(host); err != nil {
				return err
			}
		}
		if b.lazy && b.src == k {
			return setMeta(host, b.meta, false) // same bytes, already there
		}
		return writeFileAtomic(host, b)
	}
	return nil
}

// pruneLocked removes the lower children of an opaque directory that the
// layer does not have.
func (f *Fs) pruneLocked(rel string) error {
	des, err := os.ReadDir(f.host(rel))
	if err != nil {
		return err
	}
	for _, de := range des {
		if _, ok := f.paths.Get(join(rel, de.Name())); !ok {
			if err := os.RemoveAll(f.host(join(rel, de.Name()))); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeFileAtomic writes a loaded blob over host through a synced temporary
// file in the same directory.
func writeFileAtomic(host string, b *blob) error {
	tmp := tempName(host)
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = fh.Write(b.data)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = setMeta(tmp, b.meta, false)
	}
	if err == nil {
		err = os.Rename(tmp, host)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// setMeta applies owner, mode and time; chown is skipped where the process
// may not change owners (EPERM), as tools like cp do.
func setMeta(host string, m meta, link bool) error {
	if m.uid >= 0 && m.gid >= 0 {
		if err := os.Lchown(host, m.uid, m.gid); err != nil && !errors.Is(err, syscall.EPERM) {
			return err
		}
	}
	if link {
		return nil // symlink modes are fixed; times need AT_SYMLINK_NOFOLLOW
	}
	if err := os.Chmod(host, fileMode(m.perm)); err != nil {
		return err
	}
	if !m.mtime.IsZero() {
		return os.Chtimes(host, time.Time{}, m.mtime)
	}
	return nil
}

// fileMode maps permission bits to what os.Chmod takes.
func fileMode(perm fs.FileMode) fs.FileMode { return perm & permBits }

// tempName is a fresh name beside host for an atomic replace.
func tempName(host string) string {
	var b [6]byte
	rand.Read(b[:])
	return filepath.Join(filepath.Dir(host), ".cowfs-"+hex.EncodeToString(b[:])+"~")
}
