package kernel

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cowfs/cowfs/internal/unixmode"
	"golang.org/x/sys/unix"
)

// makeReadable gives the owner read permission (and search, on
// directories) wherever this process lacks it below dir, Run's upper or
// copy: a command may leave directories and files its own user cannot read
// (chmod 0), which only a privileged caller could import, and one such
// path would cost the whole run. It returns the modes the command left on
// what it changed, by slash-separated path relative to dir ("." for dir),
// for the import to take instead of the ones it now finds. Symlinks and
// special files need no read permission; what cannot be changed is left
// for the import to report.
func makeReadable(dir string) map[string]fs.FileMode {
	if os.Geteuid() == 0 {
		return nil // reads past permissions
	}
	var modes map[string]fs.FileMode
	// The modes given back by inode: a file under several hard links is
	// changed at the first name met, and the others are the same file.
	type fileID struct{ dev, ino uint64 }
	left := map[fileID]fs.FileMode{}
	var walk func(rel string)
	walk = func(rel string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return
		}
		need, add := uint32(unix.R_OK), uint32(0o400)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			need, add = unix.R_OK|unix.X_OK, 0o500
		case unix.S_IFREG:
		default:
			return
		}
		id := fileID{uint64(st.Dev), st.Ino}
		m, seen := left[id]
		if !seen && unix.Faccessat(unix.AT_FDCWD, p, need, unix.AT_EACCESS) != nil && unix.Chmod(p, st.Mode&0o7777|add) == nil {
			m, seen = specialPerm(unixmode.FileMode(st.Mode)), true
			left[id] = m
		}
		if seen {
			if modes == nil {
				modes = map[string]fs.FileMode{}
			}
			modes[rel] = m
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return
		}
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			walk(joinRel(rel, e.Name()))
		}
	}
	walk(".")
	return modes
}
