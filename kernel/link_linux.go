package kernel

import (
	"io/fs"
	"path/filepath"

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
