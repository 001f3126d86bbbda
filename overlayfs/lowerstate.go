package overlayfs

import (
	"io/fs"
	"path/filepath"
	"slices"
)

// LowerState is the identity of every path of the real tree under the
// root at one moment, as Commit's conflict check sees it: type and mode,
// size, modification time, and device, inode and change time where the
// platform has them. A tool that lets something else work on a copy of the
// view (package kernel's copy fallback) takes one before and checks it
// after, to prove the real tree was left alone.
type LowerState struct {
	root string
	ids  map[string]dep
}

// LowerState records the identity of the root and of every path under it.
// Directories it cannot list count as having no entries. Cost: one Lstat
// per path.
func (f *Fs) LowerState() *LowerState {
	return &LowerState{root: f.Root(), ids: scanLower(f.Root())}
}

func scanLower(root string) map[string]dep {
	ids := map[string]dep{}
	filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: the same on every scan
		}
		fi, err := de.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		ids[filepath.ToSlash(rel)] = depOf(fi)
		return nil
	})
	return ids
}

// Changed returns, in path order, the root-relative slash paths ("." for
// the root) at which the real tree differs from s now: changed, created or
// removed since s was taken. Nil means the tree is as it was.
func (s *LowerState) Changed() []string {
	now := scanLower(s.root)
	var out []string
	for p, d := range now {
		if old, ok := s.ids[p]; !ok || old != d {
			out = append(out, p)
		}
	}
	for p := range s.ids {
		if _, ok := now[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
