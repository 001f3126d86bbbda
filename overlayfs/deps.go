package overlayfs

import (
	"io/fs"
	"time"
)

// dep is what the layer assumed about a lower path when it came to depend
// on it: read for a copy-up, deleted, renamed away, or hidden by an opaque
// directory. Commit refuses to write when the lower no longer matches.
type dep struct {
	mode  fs.FileMode
	size  int64
	mtime time.Time
	id    fileID // device, inode and change time where the platform has them
}

func depOf(fi fs.FileInfo) dep {
	d := dep{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime(), id: identity(fi)}
	if fi.IsDir() {
		// A directory's size and times change with its entries; the layer
		// depends on what it lists, checked separately.
		d.size, d.mtime, d.id.ctime = 0, time.Time{}, 0
	}
	return d
}

// dependLocked records the first state of a lower path the layer relies on.
func (f *Fs) dependLocked(rel string, fi fs.FileInfo) {
	if _, ok := f.deps.Get(rel); !ok {
		f.deps.Set(rel, depOf(fi))
	}
}
