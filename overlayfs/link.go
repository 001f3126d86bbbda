package overlayfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tidwall/btree"

	"github.com/cowfs/cowfs/internal/relpath"
)

// linkState is what a layer knows of hard links.
//
// In the layer, the names of one file are entries that share its identity:
// the ino of a file's blob, the id of the attrs of a symlink, FIFO or
// socket. names counts them for identities that have more than one (absent
// means one), so that Nlink costs nothing to the files that were never
// linked; it is a copy-on-write B-tree, cloned with the paths by Snapshot
// and Fork.
//
// A lower non-directory with several names is copied up with all of them
// at once, the first time one of them changes (a write, a metadata change,
// a rename, a removal, a new link): each of its names the view shows
// becomes a layer entry of one identity. The layer so never holds a file
// whose names are split between the layer and the lower, and every count
// is a count of layer entries. This is what the kernel's overlayfs does
// with index=on (a copied-up lower hard link is found again through the
// index when its other names are looked up), done eagerly: the lower must
// not change while the Fs uses it, and an eager copy-up of metadata costs
// no content read. Where the lower's linked names are is found by one walk
// of the root (an lstat per entry) the first time it is needed, and kept
// in the cache of the lower (lowerCache.links) for its epoch.
type linkState struct {
	names *btree.Map[uint64, uint32]
}

// devIno identifies a lower inode.
type devIno struct{ dev, ino uint64 }

// inoBase puts the identities of layer entries above the inode numbers a
// lower file system gives, so that no layer entry reports the inode number
// of a lower file (their device numbers differ too: layer entries report
// device 0).
const inoBase = 1 << 62

// inodeOf is the inode number a layer entry of identity id reports.
func inodeOf(id uint64) uint64 { return inoBase | id }

// Link creates newname as a hard link to oldname, as os.Link does on
// Linux: both names then show one file, in the layer. A write, truncation,
// Chmod, Chown or Chtimes through one is seen through the other, and
// Stat(...).Sys().(*syscall.Stat_t).Nlink counts the names. A final
// symlink in oldname is not followed: its link is linked (linkat without
// AT_SYMLINK_FOLLOW).
//
// Errors are *os.LinkError wrapping the errno Linux gives: EEXIST when
// newname exists, ENOENT or ENOTDIR when a name cannot be resolved, EPERM
// when oldname is a directory, EXDEV when the names lie in different roots
// ([WithRoot]) or one lies outside the roots, ELOOP, and [ErrOutsideRoot]
// when newname lies outside the root (unless [AllowOutsideWrites] is
// given: then two outside names are linked by os.Link).
func (f *Fs) Link(oldname, newname string) error {
	if err := f.faultLink("link", oldname, newname); err != nil {
		return err
	}
	g, absOld := f.pick(oldname)
	h, absNew := f.pick(newname)
	if g != h {
		// linkat resolves both names before it compares their mounts.
		if _, err := g.stat("link", oldname, absOld, false); err != nil {
			return asLinkErr("link", oldname, newname, err)
		}
		_, err := h.stat("link", newname, absNew, false)
		if err == nil {
			return linkErr("link", oldname, newname, errExist)
		}
		return asLinkErr("link", oldname, newname, h.unreachedNewName(newname, absNew, err))
	}
	return g.link(oldname, newname, absOld, absNew)
}

// unreachedNewName is linkat's error for a new name in this root, absent
// from the view (Lstat said err), when the old one is in another: EXDEV
// once the name is resolved; ENOENT or ENOTDIR (err) where its directory
// cannot be reached or it ends in a slash.
func (l *layer) unreachedNewName(newname, abs string, err error) error {
	trimmed := strings.TrimRight(abs, "/")
	switch {
	case !errors.Is(err, fs.ErrNotExist):
		return err
	case trimmed != abs:
		return errNoEnt // a directory asked for, not there
	}
	if i := strings.LastIndexByte(trimmed, '/'); i > 0 {
		if _, err := l.stat("link", newname, trimmed[:i], true); err != nil {
			return err
		}
	}
	return errXDev
}

// outsideNewNameErr is linkat's error for a new name outside the root,
// at host, when the old name is inside: EXDEV, but only once the new
// name is resolved (as the kernel does before it compares the mounts),
// so a name that exists is EEXIST, one ending in a slash that does not
// is ENOENT, and one whose directory cannot be reached says why.
func outsideNewNameErr(host string) error {
	trimmed := strings.TrimRight(host, "/")
	_, err := os.Lstat(trimmed)
	switch {
	case err == nil:
		return errExist
	case !errors.Is(err, fs.ErrNotExist):
		return err // ENOTDIR, ELOOP, ENAMETOOLONG, EACCES on the way
	case trimmed != host:
		return errNoEnt // a directory asked for, not there
	}
	if i := strings.LastIndexByte(trimmed, '/'); i > 0 {
		if _, err := os.Stat(trimmed[:i]); err != nil {
			return err
		}
	}
	return errXDev
}

func (l *layer) link(oldname, newname, absOld, absNew string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	lo, err := l.resolve("link", oldname, absOld, false)
	if err != nil {
		return asLinkErr("link", oldname, newname, err)
	}
	var no node
	if lo.inside {
		if no, err = l.final(lo); err != nil {
			return asLinkErr("link", oldname, newname, err)
		}
		switch {
		case !no.exists():
			return linkErr("link", oldname, newname, errNoEnt)
		case lo.dirOnly && no.kind != kindDir:
			return linkErr("link", oldname, newname, errNotDir)
		}
	} else if !l.opts.outsideReads {
		return linkErr("link", oldname, newname, ErrOutsideRoot)
	} else if _, err := os.Lstat(lo.host); err != nil {
		return asLinkErr("link", oldname, newname, err)
	}
	ln, ok, err := l.writeEntryLoc("link", newname, absNew)
	if !ok {
		switch {
		case err != nil:
		case lo.inside:
			err = outsideNewNameErr(ln.host)
		default:
			err = os.Link(lo.host, ln.host)
		}
		return asLinkErr("link", oldname, newname, err)
	}
	if err := l.newNameLocked("link", oldname, newname, ln); err != nil {
		return err
	}
	if !lo.inside {
		return linkErr("link", oldname, newname, errXDev)
	}
	if err := l.mayLinkLocked(lo, ln, no); err != nil {
		return linkErr("link", oldname, newname, err)
	}
	if no.kind == kindDir {
		return linkErr("link", oldname, newname, errPerm)
	}
	if err := l.linkQuotaLocked(no); err != nil {
		return asLinkErr("link", oldname, newname, err)
	}
	e, err := l.copyUpLocked(lo.rel, no)
	if err != nil {
		return asLinkErr("link", oldname, newname, err)
	}
	l.setEntry(lo.rel, e)
	l.setEntry(ln.rel, e)
	l.linkedQuotaLocked(e)
	l.addNameLocked(e)
	l.touchDirLocked(parent(ln.rel), l.now())
	return nil
}

// identity returns the identity a layer entry shares with its other names
// (0 for a whiteout).
func (e entry) identity() uint64 {
	if e.kind == kindFile {
		return e.ino
	}
	if e.attrs != nil {
		return e.attrs.id
	}
	return 0
}

// namesLocked returns the number of layer names of the identity id.
func (l *layer) namesLocked(id uint64) uint32 {
	if l.links.names == nil || l.links.names.Len() == 0 {
		return 1
	}
	if n, ok := l.links.names.Get(id); ok {
		return n
	}
	return 1
}

// addNameLocked counts a new name of e's identity.
func (l *layer) addNameLocked(e entry) {
	id := e.identity()
	l.setNamesLocked(id, l.namesLocked(id)+1)
}

// setNamesLocked records that id has n > 1 names.
func (l *layer) setNamesLocked(id uint64, n uint32) {
	if l.links.names == nil {
		l.links.names = btree.NewMap[uint64, uint32](32)
	}
	l.links.names.Set(id, n)
}

// copyNames clones link counts for a snapshot or a fork (nil: none).
func copyNames(m *btree.Map[uint64, uint32]) *btree.Map[uint64, uint32] {
	if m == nil {
		return nil
	}
	return m.Copy()
}

// unlinkNameLocked counts a name of id gone, and reports whether the
// identity keeps other names.
func (l *layer) unlinkNameLocked(id uint64) bool {
	n := l.namesLocked(id)
	switch {
	case n <= 1:
		return false
	case n == 2:
		l.links.names.Delete(id)
	default:
		l.links.names.Set(id, n-1)
	}
	return true
}

// dropNameLocked forgets an entry taken out of the layer: a file's content
// goes with its last name (see dropBlobLocked).
func (l *layer) dropNameLocked(e entry) {
	switch {
	case e.kind == kindFile:
		l.dropBlobLocked(e.ino)
	case e.kind != kindDir && e.attrs != nil:
		l.unlinkNameLocked(e.attrs.id)
	}
}

// inodeLocked returns the inode number and link count a layer entry
// reports.
func (l *layer) inodeLocked(e entry) (uint64, uint32) {
	id := e.identity()
	if e.kind == kindDir {
		return inodeOf(id), 2
	}
	return inodeOf(id), l.namesLocked(id)
}

// handleNlinkLocked is the link count a handle's Stat reports: 0 once the
// file has no name left (unlinked while open, or the layer reset or
// restored without it), as os reports.
func (l *layer) handleNlinkLocked(h *file) uint32 {
	if h.detach {
		return 0
	}
	l.hmu.Lock()
	_, orphan := l.orphan[h.ino]
	l.hmu.Unlock()
	if orphan || l.blobLocked(h.ino) == nil {
		return 0
	}
	return l.namesLocked(h.ino)
}

// sameLinkedLocked reports whether the nodes at two paths of the view are
// names of one non-directory (rename then does nothing, as POSIX says).
func (l *layer) sameLinkedLocked(ra string, a node, rb string, b node) bool {
	switch {
	case !a.exists() || !b.exists() || a.kind == kindDir || a.layer != b.layer:
		return false
	case a.layer:
		return a.e.identity() != 0 && a.e.identity() == b.e.identity()
	}
	var err error
	if a.fi == nil {
		a, err = l.lookup(ra, true)
	}
	if b.fi == nil && err == nil {
		b, err = l.lookup(rb, true)
	}
	return err == nil && a.fi != nil && b.fi != nil && sameLower(a.fi, b.fi)
}

// copyUpLinkedLocked copies up a lower non-directory that has several
// names with every name of it the view shows (see linkState), and returns
// the entry of rel. A node seen before the copy-up (a listing's) finds the
// entry made then.
func (l *layer) copyUpLinkedLocked(rel string, n node, trunc bool) (entry, error) {
	if e, ok := l.paths.Get(rel); ok && e.kind == n.kind {
		return e, nil
	}
	e, err := l.copyUpOneLocked(rel, n, trunc)
	if err != nil {
		return entry{}, err
	}
	l.setEntry(rel, e)
	names := uint32(1)
	key, _ := lowerLinkID(n.fi)
	for _, p := range l.lowerNamesLocked(key) {
		if p == rel {
			continue
		}
		pn := l.nodeAtLocked(p)
		if !pn.exists() || pn.layer || !sameLower(pn.fi, n.fi) {
			continue // hidden, or replaced
		}
		l.dependLocked(p, pn.fi)
		if e.kind == kindFile {
			l.copied[p] = e.ino // read handles opened on p follow too
		}
		l.setEntry(p, e)
		names++
	}
	if names > 1 {
		l.setNamesLocked(e.identity(), names)
	}
	return e, nil
}

// lowerNamesLocked returns the root-relative names of the lower inode key,
// which has several, in path order.
func (l *layer) lowerNamesLocked(key devIno) []string {
	c := l.lower()
	if c.links == nil {
		c.links = make(map[devIno][]string)
		filepath.WalkDir(l.root, func(p string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				if err == nil && de.Name() == journalName && filepath.Dir(p) == l.root {
					return filepath.SkipDir
				}
				return nil
			}
			fi, err := de.Info()
			if err != nil {
				return nil
			}
			if k, nlink := lowerLinkID(fi); nlink > 1 {
				r, _ := filepath.Rel(l.root, p)
				c.links[k] = append(c.links[k], filepath.ToSlash(r))
			}
			return nil
		})
	}
	return c.links[key]
}

// keepLinksLocked copies up, before rel leaves the view, each lower
// non-directory at or below rel whose other names stay, so that they keep
// their file with one name fewer. Below a lower directory it records the
// subtree as Commit's dependencies on the way (dependBelowLocked, which
// names the linked files it meets) and reports so: the walk is the one a
// removal pays anyway.
func (l *layer) keepLinksLocked(rel string, visible bool, n node) (walked bool) {
	if !n.layer && n.exists() && n.kind != kindDir {
		if n.fi == nil { // a listing's node
			n, _ = l.lookup(rel, true)
		}
		if _, nlink := lowerLinkID(n.fi); nlink > 1 {
			l.copyUpLocked(rel, n) // a device node is left to the lower: it stays linked there
		}
		return false
	}
	if !visible {
		return false
	}
	low := n
	if n.layer {
		low = l.lowerNode(rel)
	}
	if low.kind != kindDir {
		return false
	}
	linked := l.dependBelowLocked(rel)
	for _, p := range linked {
		if pn := l.nodeAtLocked(p); pn.exists() && !pn.layer && pn.kind != kindDir {
			l.copyUpLocked(p, pn)
		}
	}
	return true
}

// remapLinks returns the link counts of m with identities renamed as
// remap says (Restore of another family's snapshot); identities remap
// does not know keep theirs.
func remapLinks(m *btree.Map[uint64, uint32], remap map[uint64]uint64) *btree.Map[uint64, uint32] {
	if m == nil {
		return nil
	}
	out := btree.NewMap[uint64, uint32](32)
	m.Scan(func(id uint64, n uint32) bool {
		if to, ok := remap[id]; ok {
			id = to
		}
		out.Set(id, n)
		return true
	})
	return out
}

// stageLinkLocked stages the slot s of an entry whose identity has a name
// staged already (or left in place) as a hard link to it, in the stage: the
// apply renames it into place, and a rename keeps the inode. It reports
// whether it did.
func (l *layer) stageLinkLocked(st *stage, s slot, e entry) (bool, error) {
	from, ok := st.links[e.identity()]
	if !ok {
		return false, nil
	}
	if s.lowDir() {
		st.trash(s)
	}
	return true, st.j.stageLink(from, st.place(s))
}

// linkedLocked records where the first name of a linked identity is, in
// the stage or in the tree (rel, root-relative), for its other names.
func (st *stage) linkedLocked(l *layer, e entry, rel string) {
	if l.namesLocked(e.identity()) > 1 {
		st.links[e.identity()] = rel
	}
}

// stageLink makes rel inside the stage a hard link to from.
func (j *journal) stageLink(from, rel string) error {
	if err := j.fault("stage", rel); err != nil {
		return err
	}
	return j.rt.Link(osName(from), osName(rel))
}

// linkToLocked returns the first name in path order, other than k, of the
// linked entry e at k ("" when e has no other name). names maps the
// identities of linked entries to their names: it is made at the first
// linked entry, in one scan of the layer.
func (l *layer) linkToLocked(k string, e entry, names *map[uint64][]string) string {
	if l.namesLocked(e.identity()) < 2 {
		return ""
	}
	if *names == nil {
		*names = make(map[uint64][]string)
		l.paths.Scan(func(p string, pe entry) bool {
			if id := pe.identity(); pe.kind != kindDir && pe.kind != kindWhiteout && l.namesLocked(id) > 1 {
				(*names)[id] = append((*names)[id], p)
			}
			return true
		})
	}
	for _, p := range (*names)[e.identity()] {
		if p != k {
			return p
		}
	}
	return ""
}

// relinkLocked gives every other name of a linked FIFO or socket e's new
// attrs (a metadata change through one name): their attrs are shared by
// pointer, and changed by replacing them. Cost: a scan of the layer, only
// for a linked entry.
func (l *layer) relinkLocked(e entry) {
	if e.kind == kindDir || l.namesLocked(e.identity()) < 2 {
		return
	}
	var keys []string
	l.paths.Scan(func(k string, pe entry) bool {
		if pe.kind == e.kind && pe.identity() == e.identity() {
			keys = append(keys, k)
		}
		return true
	})
	for _, k := range keys {
		l.setEntry(k, e)
	}
}

// linkFirstLocked returns, for the entry e at k, the first of its names
// met so far in path order when that is another one; first maps the
// identities of linked entries to their first names (nil until one is
// met).
func (l *layer) linkFirstLocked(k string, e entry, first *map[uint64]string) string {
	if e.kind == kindDir || e.kind == kindWhiteout || l.namesLocked(e.identity()) < 2 {
		return ""
	}
	if *first == nil {
		*first = make(map[uint64]string)
	}
	if p, ok := (*first)[e.identity()]; ok {
		return p
	}
	(*first)[e.identity()] = k
	return ""
}

// putLink is PutEntry of an entry with LinkTo: Path becomes one more name
// of the non-directory at LinkTo, literally (no symlink followed), which
// must be of the entry's type.
func (l *layer) putLink(e LayerEntry) error {
	rel := e.Path
	if !relpath.Below(e.LinkTo) || e.LinkTo == rel {
		return pathErr("put", e.Path, fs.ErrInvalid)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	pn, err := l.putParentLocked(rel)
	if err != nil {
		return err
	}
	src := l.nodeAtLocked(e.LinkTo)
	want := map[EntryType]kind{EntryFile: kindFile, EntrySymlink: kindSymlink, EntryFIFO: kindFIFO, EntrySocket: kindSocket}[e.Type]
	if !src.exists() || src.kind != want {
		return pathErr("put", e.Path, fmt.Errorf("link to %s: %w", e.LinkTo, fs.ErrInvalid))
	}
	se, err := l.copyUpLocked(e.LinkTo, src)
	if err != nil {
		return pathErr("put", e.Path, err)
	}
	l.setEntry(e.LinkTo, se)
	cur, err := l.lookup(rel, pn.under)
	if err != nil {
		return pathErr("put", e.Path, err)
	}
	if cur.layer && cur.e.identity() == se.identity() {
		return nil // already a name of it
	}
	if cur.exists() {
		l.unlinkLocked(rel, pn.under, cur)
	}
	l.setEntry(rel, se)
	l.addNameLocked(se)
	return nil
}

// goneHandle reports whether the view removed the name of the lower file
// o has open (and so its last: a lower file with other names is copied up
// with them before, and o then reads the layer's).
func (l *layer) goneHandle(o *osFile) bool {
	l.hmu.Lock() // goneLocked changes o.at under it too
	defer l.hmu.Unlock()
	return o.at == goneRel
}

// sysInfo is a FileInfo with another Sys.
type sysInfo struct {
	fs.FileInfo
	sys any
}

func (fi sysInfo) Sys() any { return fi.sys }

// newNameLocked returns the *os.LinkError of op (link or symlink) making
// the name at, which must not exist: EEXIST for an entry (or "." and
// ".."), ENOENT for a name that ends in a slash ("you asked for a
// directory").
func (l *layer) newNameLocked(op, oldname, newname string, at loc) error {
	if at.last != lastNorm {
		if err := l.dirCheck(at); err != nil {
			return asLinkErr(op, oldname, newname, err)
		}
		return linkErr(op, oldname, newname, errExist)
	}
	n, err := l.final(at)
	switch {
	case err != nil:
		return asLinkErr(op, oldname, newname, err)
	case n.exists():
		return linkErr(op, oldname, newname, errExist)
	case at.dirOnly:
		return linkErr(op, oldname, newname, errNoEnt)
	}
	return nil
}
