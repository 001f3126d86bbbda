package kernel

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cowfs/cowfs/overlayfs"
)

// link materializes an entry that is one more name of an earlier one
// (LinkTo, first in the layer's path order, so made already) as a hard
// link to it in the upper: the kernel's overlay shows one file under both
// names, as the layer does. Its metadata is the earlier entry's, set then.
func (m *materializer) link(e overlayfs.LayerEntry) error {
	// Through the upper's own root: the stack of open directories keeps
	// one branch open, and the two names may lie on two.
	top, err := m.dirs.get(".")
	if err != nil {
		return err
	}
	if err := top.root.Link(filepath.FromSlash(e.LinkTo), filepath.FromSlash(e.Path)); err != nil {
		return &fs.PathError{Op: "link", Path: m.upperPath(e.Path), Err: underlying(err)}
	}
	return nil
}

// importLinks tells the names of one inode of an upper directory apart:
// the first met (in path order) is imported with its content, the others
// as links to it (LayerEntry.LinkTo). Kernel whiteouts, which may all be
// one inode, are not files and never come here.
type importLinks map[[2]uint64]string

// linkTo returns the first name of the inode (dev, ino) when it has
// several (nlink > 1) and rel is not that first, and records rel
// otherwise.
func (il importLinks) linkTo(rel string, dev, ino, nlink uint64) string {
	if nlink < 2 {
		return ""
	}
	k := [2]uint64{dev, ino}
	if first, ok := il[k]; ok {
		return first
	}
	il[k] = rel
	return ""
}

// copyLinks keeps hard links through Run's copy fallback: the copy of the
// view links the names the view shows as one file (view), and the diff
// of the copy after the command tells the names of one inode apart
// (copied), as Import does for an upper.
type copyLinks struct {
	view    map[[2]uint64]string // view device and inode -> first name copied
	copied  importLinks          // copy's inodes, as Import's
	changed map[string]bool      // names the diff emits with content or metadata
	viewIno map[string][2]uint64 // names of linked files -> their view device and inode
}

// copyLink makes rel in the copy a hard link to an earlier name of the same
// view file, and reports whether it did.
func (vc *viewCopy) copyLink(rel string, fi fs.FileInfo) (bool, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || fi.IsDir() || st.Nlink < 2 {
		return false, nil
	}
	k := [2]uint64{st.Dev, st.Ino}
	cl := &vc.links
	if cl.view == nil {
		cl.view, cl.viewIno = map[[2]uint64]string{}, map[string][2]uint64{}
	}
	cl.viewIno[rel] = k
	first, ok := cl.view[k]
	if !ok {
		cl.view[k] = rel
		return false, nil
	}
	return true, os.Link(vc.real(first), vc.real(rel))
}

// diffLink returns, for a name of the copy whose inode has an earlier name
// (first), that name when rel must be imported as a link to it: unless the
// view already shows both as one file and the first is unchanged (then
// nothing changed at rel either). vfi is the view's Lstat of rel, or nil.
func (cl *copyLinks) diffLink(rel string, st *unix.Stat_t, vfi fs.FileInfo) string {
	if cl.copied == nil {
		cl.copied = importLinks{}
	}
	first := cl.copied.linkTo(rel, st.Dev, st.Ino, uint64(st.Nlink))
	if first == "" {
		return ""
	}
	if vfi != nil && !cl.changed[first] {
		if k, ok := cl.viewIno[rel]; ok && cl.viewIno[first] == k {
			return "" // linked in the view already, and unchanged
		}
	}
	return first
}

// emitted records that the diff imports rel with its content or metadata.
func (cl *copyLinks) emitted(rel string) {
	if cl.changed == nil {
		cl.changed = map[string]bool{}
	}
	cl.changed[rel] = true
}
