package overlayfs

import (
	"io/fs"
	"os"
	"path/filepath"
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

// depOf captures a lower file's identity. For a directory, the mtime and
// ctime move when an entry is added, removed or renamed inside it, so a
// change to what the layer hid or deleted there is seen too.
func depOf(fi fs.FileInfo) dep {
	return dep{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime(), id: identity(fi)}
}

// same reports whether the lower still is what d recorded.
func (d dep) same(fi fs.FileInfo) bool { return depOf(fi) == d }

// dependBelowLocked records every entry under the lower directory rel,
// which the layer is deleting or hiding: an edit or a new entry anywhere in
// it then shows as a conflict, instead of being deleted silently by Commit.
// Cost: one Lstat per entry, as os.RemoveAll pays.
func (f *Fs) dependBelowLocked(rel string) {
	top := f.host(rel)
	filepath.WalkDir(top, func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == top {
			return nil
		}
		fi, err := de.Info()
		if err != nil {
			return nil
		}
		r, _ := filepath.Rel(f.root, p)
		f.dependLocked(filepath.ToSlash(r), fi)
		return nil
	})
}

// dependLocked records the first state of a lower path the layer relies on.
func (f *Fs) dependLocked(rel string, fi fs.FileInfo) {
	if _, ok := f.deps.Get(rel); !ok {
		f.deps.Set(rel, depOf(fi))
	}
}

// refreshDepLocked records the lower's new state at rel after Commit itself
// changed it, so that a later Commit does not take its own write for
// someone else's.
func (f *Fs) refreshDepLocked(rel string) {
	if _, ok := f.deps.Get(rel); !ok {
		return
	}
	if fi, err := os.Lstat(f.host(rel)); err == nil {
		f.deps.Set(rel, depOf(fi))
	} else {
		f.deps.Delete(rel)
	}
}
