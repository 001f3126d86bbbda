package overlayfs

import (
	"io/fs"
	"math"
	"math/bits"
	"syscall"

	"github.com/tidwall/btree"
)

// pageSize is the unit tmpfs allocates file data in (on amd64 and most
// arm64 kernels).
const pageSize = 4096

// pagesOf is the number of pages n bytes of dense data take.
func pagesOf(n int64) int64 { return (n + pageSize - 1) / pageSize }

// quota is WithQuota's limits; zero is no limit.
type quota struct {
	on     bool
	bytes  int64 // as given
	pages  int64 // bytes rounded up to pages, as tmpfs rounds size=
	inodes int64
}

// WithQuota bounds what the layer may hold as a tmpfs mounted with
// size=bytes,nr_inodes=inodes+1 would (tmpfs counts its root directory,
// which the layer's root is not: inodes is the number of entries the layer
// may add). Zero (or less) means no limit for that count, as for tmpfs;
// WithQuota(0, 0) counts ([Fs.Usage]) without limiting.
//
// The counting rule, which a test checks against a real tmpfs:
//   - File data is counted in 4 KiB pages: a file takes a page for every
//     4 KiB block in which a byte was written, so holes (a Truncate that
//     extends, a WriteAt past the end) take none until written. A file
//     copied up from the lower takes the pages of its whole size, once, at
//     the copy-up (an open for writing, a Chmod, Chown or Chtimes, a
//     Rename); an O_TRUNC open of a lower file copies none, as the
//     kernel's overlay does, and one of a layer file frees them.
//   - Each file, directory, symlink, FIFO and socket the layer holds is an
//     inode (a copied-up lower directory too), and so is each further
//     name a [Fs.Link] gives it, as tmpfs charges a hard link; whiteouts
//     and the root directory's own entry are not. A symlink whose target is longer than
//     128 bytes also takes a page, as in tmpfs.
//   - Truncating, removing, Reset and a Commit (which empties the layer)
//     free what they drop; Snapshot and Restore save and restore the count;
//     a Fork starts with its parent's count and counts on its own after.
//     With several roots ([WithRoot]) each root's layer counts on its own,
//     as one tmpfs per root.
//
// A Link past the inode limit fails with ENOSPC too.
//
// A write that would pass the byte limit writes what fits (up to the last
// page that can be allocated) and returns that count with an
// *fs.PathError wrapping syscall.ENOSPC, the short write a full tmpfs
// gives; a write that fits nothing writes nothing. A create (Create,
// OpenFile with O_CREATE, Mkdir, MkdirAll, SymlinkIfPossible) past the
// inode limit fails with ENOSPC, and so does a copy-up that would pass
// either limit. Entries a Rename of a lower directory copies up, and
// entries put with [Fs.PutEntry] or imported by package kernel, are
// counted but never refused.
//
// As in tmpfs, a file removed while a handle is open keeps its pages and
// its inode until the last handle closes, and writes through such a
// handle are counted (and refused past the limit); a directory removed
// above the name a handle was opened by keeps its inode until that handle
// closes. A snapshot or a fork taken meanwhile counts neither.
//
// The cost when on: every write, truncate and create does a few integer
// operations, and a file with holes keeps a bitmap of its pages (a bit per
// page, copied when it changes).
func WithQuota(bytes, inodes int64) Option {
	return func(o *options) {
		o.quota = quota{on: true, bytes: max(bytes, 0), pages: pagesOf(max(bytes, 0)), inodes: max(inodes, 0)}
	}
}

// Quota returns the limits given with [WithQuota] (zero: no limit) and
// whether it was given.
func (f *Fs) Quota() (bytes, inodes int64, ok bool) {
	q := f.opts.quota
	return q.pages * pageSize, q.inodes, q.on
}

// Usage is what a layer holds, counted as [WithQuota] counts it.
type Usage struct {
	Bytes  int64 // file data, in whole 4 KiB pages
	Inodes int64 // files, directories, symlinks and special files the layer added
}

// Usage returns what the layer holds, summed over its roots, as
// [WithQuota] counts it. Without WithQuota nothing is counted and it is
// zero.
func (f *Fs) Usage() Usage {
	var u Usage
	for _, g := range f.layers {
		g.mu.RLock()
		u.Bytes += g.q.pages * pageSize
		u.Inodes += g.q.inodes
		g.mu.RUnlock()
	}
	return u
}

// errNoSpace is a full quota's error.
var errNoSpace = &fs.PathError{Op: "quota", Err: syscall.ENOSPC}

// quotaState is a layer's count. The layer keeps it under mu, and
// Snapshot, Restore and Fork save and copy it with the entries.
type quotaState struct {
	pages  int64
	inodes int64
	holes  *btree.Map[uint64, pageSet] // files with holes: their pages; nil until one has
}

// saved returns a copy of q that does not change with it, in O(1).
func (q quotaState) saved() quotaState {
	if q.holes != nil {
		q.holes = q.holes.Copy()
	}
	return q
}

// remapped is saved for a layer that renumbered the identities of the
// files it counts (a Restore across families).
func (q quotaState) remapped(remap map[uint64]uint64) quotaState {
	if q.holes == nil {
		return q
	}
	holes := btree.NewMap[uint64, pageSet](32)
	q.holes.Scan(func(ino uint64, s pageSet) bool {
		holes.Set(remap[ino], s)
		return true
	})
	q.holes = holes
	return q
}

// pageSet is the set of pages of a file with holes, a bit per page. It is
// never changed once stored (snapshots share it).
type pageSet []uint64

func densePages(n int64) pageSet {
	s := make(pageSet, (n+63)/64)
	for i := range n / 64 {
		s[i] = math.MaxUint64
	}
	if n%64 != 0 {
		s[n/64] = 1<<(n%64) - 1
	}
	return s
}

func (s pageSet) has(p int64) bool { return p/64 < int64(len(s)) && s[p/64]&(1<<(p%64)) != 0 }

func (s pageSet) count() int64 {
	var n int
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return int64(n)
}

// with returns s plus the pages [from, to].
func (s pageSet) with(from, to int64) pageSet {
	ns := make(pageSet, max(int64(len(s)), to/64+1))
	copy(ns, s)
	for p := from; p <= to; p++ {
		ns[p/64] |= 1 << (p % 64)
	}
	return ns
}

// below returns s without the pages from n on.
func (s pageSet) below(n int64) pageSet {
	ns := make(pageSet, min(int64(len(s)), (n+63)/64))
	copy(ns, s)
	if n%64 != 0 && n/64 < int64(len(ns)) {
		ns[n/64] &= 1<<(n%64) - 1
	}
	return ns
}

// counting reports whether the layer counts (WithQuota was given).
func (l *layer) counting() bool { return l.opts.quota.on }

// availPages returns how many more pages the layer may take.
func (l *layer) availPages() int64 {
	if l.opts.quota.pages == 0 {
		return math.MaxInt64
	}
	return max(l.opts.quota.pages-l.q.pages, 0)
}

// inodeQuotaLocked returns errNoSpace when the layer may hold no more
// inodes.
func (l *layer) inodeQuotaLocked() error {
	if l.counting() && l.opts.quota.inodes != 0 && l.q.inodes >= l.opts.quota.inodes {
		return errNoSpace
	}
	return nil
}

// copyUpQuotaLocked returns errNoSpace when a copy-up of an entry (a file
// of size bytes, unless trunc: about to be emptied) would pass a limit.
func (l *layer) copyUpQuotaLocked(rel string, k kind, size int64, trunc bool) error {
	if rel == "" {
		return nil // the root's own entry takes nothing
	}
	if err := l.inodeQuotaLocked(); err != nil {
		return err
	}
	if l.counting() && k == kindFile && !trunc && pagesOf(size) > l.availPages() {
		return errNoSpace
	}
	return nil
}

// symlinkQuotaLocked returns errNoSpace when a symlink to target would
// pass a limit.
func (l *layer) symlinkQuotaLocked(target string) error {
	if err := l.inodeQuotaLocked(); err != nil {
		return err
	}
	if _, pages := entryInodes(".", entry{kind: kindSymlink, attrs: &attrs{target: target}}); l.counting() && pages > l.availPages() {
		return errNoSpace
	}
	return nil
}

// linkQuotaLocked returns errNoSpace when a new name of n (copied up
// first if it is the lower's) would pass the inode limit: tmpfs counts an
// inode for each name of a file.
func (l *layer) linkQuotaLocked(n node) error {
	need := int64(1)
	if !n.layer {
		need++ // the copy-up
	}
	if l.counting() && l.opts.quota.inodes != 0 && l.q.inodes+need > l.opts.quota.inodes {
		return errNoSpace
	}
	return nil
}

// linkedQuotaLocked counts a new name of the file e (setEntry counts the
// names of other entries).
func (l *layer) linkedQuotaLocked(e entry) {
	switch {
	case !l.counting():
	case e.kind == kindFile:
		l.q.inodes++
	case l.namesLocked(e.identity()) == 1:
		// setEntry counted the new name's page while the identity had
		// one name: a long symlink's page is shared.
		_, pages := entryInodes(".", e)
		l.q.pages -= pages
	}
}

// unlinkedQuotaLocked frees a name of a file that keeps others.
func (l *layer) unlinkedQuotaLocked() {
	if l.counting() {
		l.q.inodes--
	}
}

// newFileQuotaLocked counts a new file identity (newBlobLocked), a copied
// up one at its whole size.
func (l *layer) newFileQuotaLocked(size int64) {
	if l.counting() {
		l.q.inodes++
		l.q.pages += pagesOf(size)
	}
}

// dropFileQuotaLocked frees the file ino, unlinked, with no handle open
// on it (or at its last close): its pages and its inode.
// Callers hold l.mu and l.hmu.
func (l *layer) dropFileQuotaLocked(ino uint64) {
	if b, ok := l.blobs.Get(ino); ok && l.counting() {
		l.q.dropFile(ino, b.len())
	}
}

// dropFile takes the file ino of size bytes out of q.
func (q *quotaState) dropFile(ino uint64, size int64) {
	q.inodes--
	if q.holes != nil {
		if s, ok := q.holes.Get(ino); ok {
			q.pages -= s.count()
			q.holes.Delete(ino)
			return
		}
	}
	q.pages -= pagesOf(size)
}

// savedQuotaLocked is the count a snapshot or a fork starts from: the
// layer's, without the files unlinked while open and the removed
// directories above open handles, which it counts until their last close
// (the copy has neither their names nor the handles).
// Callers hold l.mu.
func (l *layer) savedQuotaLocked() quotaState {
	q := l.q.saved()
	l.hmu.Lock()
	defer l.hmu.Unlock()
	for ino, counted := range l.orphan {
		if b, ok := l.blobs.Get(ino); ok && counted {
			q.dropFile(ino, b.len())
		}
	}
	q.inodes -= l.pinnedLocked()
	return q
}

// freedLocked reports whether ino was unlinked and its space freed: an
// orphan the quota no longer counts.
func (l *layer) freedLocked(ino uint64) bool {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	counted, orphan := l.orphan[ino]
	return orphan && !counted
}

// writeQuotaLocked returns how many of n bytes written at off into the
// file ino of size bytes fit, and counts their pages: all of them and nil,
// or fewer and errNoSpace.
func (l *layer) writeQuotaLocked(ino uint64, size, off int64, n int) (int, error) {
	if !l.counting() || n == 0 || l.freedLocked(ino) {
		return n, nil
	}
	end := off + int64(n)
	var s pageSet
	sparse := false
	if l.q.holes != nil {
		s, sparse = l.q.holes.Get(ino)
	}
	if !sparse && off <= pagesOf(size)*pageSize {
		// Dense, and stays so: the pages past the old end are new.
		have := pagesOf(size)
		grow := pagesOf(max(end, size)) - have
		if grow <= l.availPages() {
			l.q.pages += grow
			return n, nil
		}
		fit := min(max((have+l.availPages())*pageSize-off, 0), int64(n))
		l.q.pages += pagesOf(max(off+fit, size)) - have
		return int(fit), errNoSpace
	}
	if !sparse {
		s = densePages(pagesOf(size))
	}
	avail := l.availPages()
	var added int64
	stop := end
	for p := off / pageSize; p <= (end-1)/pageSize; p++ {
		if s.has(p) {
			continue
		}
		if added == avail {
			stop = max(p*pageSize, off)
			break
		}
		added++
	}
	if stop > off {
		s = s.with(off/pageSize, (stop-1)/pageSize)
	}
	l.q.pages += added
	l.setHolesLocked(ino, s, max(size, stop))
	if stop < end {
		return int(stop - off), errNoSpace
	}
	return n, nil
}

// setHolesLocked keeps s as the pages of ino, a file of size bytes,
// unless it has no hole.
func (l *layer) setHolesLocked(ino uint64, s pageSet, size int64) {
	if s.count() == pagesOf(size) {
		if l.q.holes != nil {
			l.q.holes.Delete(ino)
		}
		return
	}
	if l.q.holes == nil {
		l.q.holes = btree.NewMap[uint64, pageSet](32)
	}
	l.q.holes.Set(ino, s)
}

// resizeQuotaLocked counts the file ino going from old bytes to size: a
// shrink frees the pages past the new end, a growth adds a hole.
func (l *layer) resizeQuotaLocked(ino uint64, old, size int64) {
	if !l.counting() || old == size || l.freedLocked(ino) {
		return
	}
	var s pageSet
	sparse := false
	if l.q.holes != nil {
		s, sparse = l.q.holes.Get(ino)
	}
	switch {
	case size < old && !sparse:
		l.q.pages -= pagesOf(old) - pagesOf(size)
	case size < old:
		ns := s.below(pagesOf(size))
		l.q.pages -= s.count() - ns.count()
		l.setHolesLocked(ino, ns, size)
	case !sparse && pagesOf(size) > pagesOf(old):
		l.setHolesLocked(ino, densePages(pagesOf(old)), size)
	}
}

// entryInodes is what a non-file entry at k takes: inodes and pages.
// Files are counted by identity (newFileQuotaLocked), and the root's
// entry is the tmpfs root, counted by nobody.
func entryInodes(k string, e entry) (inodes, pages int64) {
	switch {
	case k == "", e.kind == kindFile, e.kind == kindWhiteout, e.kind == kindNone:
		return 0, 0
	case e.kind == kindSymlink && len(e.target()) > 128:
		return 1, 1
	}
	return 1, 0
}

// entryUseLocked is entryInodes for an entry being set or deleted: the
// page of a long symlink belongs to its identity, counted while it has
// one name (see linkedQuotaLocked).
func (l *layer) entryUseLocked(k string, e entry) (inodes, pages int64) {
	inodes, pages = entryInodes(k, e)
	if pages != 0 && e.attrs != nil && l.namesLocked(e.attrs.id) > 1 {
		pages = 0
	}
	return inodes, pages
}

// setEntry sets the entry at k, counting a directory, symlink or special
// file it adds or replaces.
func (l *layer) setEntry(k string, e entry) {
	prev, replaced := l.paths.Set(k, e)
	if l.counting() {
		in, pg := l.entryUseLocked(k, e)
		if replaced {
			pin, ppg := l.entryUseLocked(k, prev)
			in, pg = in-pin, pg-ppg
		}
		l.q.inodes += in
		l.q.pages += pg
	}
}

// deleteEntry deletes the entry at k, freeing a directory, symlink or
// special file it held.
func (l *layer) deleteEntry(k string) (entry, bool) {
	prev, ok := l.paths.Delete(k)
	if ok && l.counting() {
		in, pg := l.entryUseLocked(k, prev)
		l.q.inodes -= in
		l.q.pages -= pg
	}
	return prev, ok
}

// quotaWrite cuts p, about to be written at off (the end, for an append)
// through h, to what the quota lets in: the error is errNoSpace (as the
// handle's error) when p was cut. Callers hold h.fs.mu.
func (h *file) quotaWrite(p []byte, off int64, appnd bool) ([]byte, error) {
	if !h.fs.counting() || len(p) == 0 || h.detach {
		return p, nil
	}
	b, err := h.current(true)
	if err != nil {
		return p, nil // the write reports it
	}
	if appnd {
		off = b.len()
	}
	n, err := h.fs.writeQuotaLocked(h.ino, b.len(), off, len(p))
	if err != nil {
		return p[:n], pathErr("write", h.name, syscall.ENOSPC)
	}
	return p, nil
}

// quotaResize counts h's file going from old bytes to size.
func (h *file) quotaResize(old, size int64) {
	if !h.detach {
		h.fs.resizeQuotaLocked(h.ino, old, size)
	}
}
