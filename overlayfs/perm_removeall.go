package overlayfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// removeAllAs is RemoveAll as the AsUser user: os.RemoveAll's own
// algorithm (os/removeall_at.go) on the checked operations, so that it
// stops, and fails, where os would for that user: Remove, else open the
// parent, then from it unlink the name, and where that fails on a
// directory remove what it holds (which needs read on it) and rmdir it,
// carrying on past entries it may not remove and returning the first
// error. Names outside the root go to os.RemoveAll as before, and the
// root itself is refused whole as before.
func (l *layer) removeAllAs(name, abs string) error {
	if name == "" || name == "." || len(name) >= 2 && name[len(name)-1] == '.' && os.IsPathSeparator(name[len(name)-2]) {
		return l.removeAll(name, abs)
	}
	if at, err := l.locate(name, abs); err == nil && (!at.inside || at.rel == "") {
		return l.removeAll(name, abs) // outside, or the root: refused whole (EBUSY)
	}
	err := l.remove(name, abs)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	dir, base := splitPath(name)
	pabs := ""
	if abs != "" {
		pabs, _ = splitPath(abs)
	}
	p, err := l.openRead(dir, pabs, os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	p.Close()
	if err := l.removeAllFromAs(dir, pabs, base); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Path = dir + "/" + pe.Path
		}
		return err
	}
	return nil
}

// locate resolves name, under the read lock, to tell inside from outside.
func (l *layer) locate(name, abs string) (loc, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.resolveEntry("unlinkat", name, abs)
}

// removeAllFromAs is os's removeAllFrom: base in the directory dir.
// Errors name base (the caller prefixes its directory).
func (l *layer) removeAllFromAs(dir, dabs, base string) error {
	name, abs := dir+"/"+base, ""
	if dabs != "" {
		abs = dabs + "/" + base
	}
	uErr := l.unlinkAs(name, abs)
	if uErr == nil || errors.Is(uErr, fs.ErrNotExist) {
		return nil
	}
	switch e := errno(uErr); e {
	case syscall.EISDIR, syscall.EPERM, syscall.EACCES:
	default:
		return &fs.PathError{Op: "unlinkat", Path: base, Err: e}
	}
	// openat(O_DIRECTORY|O_NOFOLLOW): a symlink or a non-directory gives
	// back unlink's error.
	fi, err := l.stat("open", name, abs, false)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err == nil && !fi.IsDir():
		return &fs.PathError{Op: "unlinkat", Path: base, Err: errno(uErr)}
	}
	var recurseErr error
	var d interface {
		Readdirnames(int) ([]string, error)
		Close() error
	}
	if err == nil {
		d, err = l.openRead(name, abs, os.O_RDONLY)
	}
	if err != nil {
		recurseErr = &fs.PathError{Op: "openfdat", Path: base, Err: errno(err)}
	} else {
		names, rerr := d.Readdirnames(-1)
		d.Close()
		if rerr != nil {
			return &fs.PathError{Op: "readdirnames", Path: base, Err: errno(rerr)}
		}
		for _, n := range names {
			if err := l.removeAllFromAs(name, abs, n); err != nil {
				var pe *fs.PathError
				if errors.As(err, &pe) {
					pe.Path = base + "/" + pe.Path
				}
				if recurseErr == nil {
					recurseErr = err
				}
			}
		}
	}
	err = l.remove(name, abs)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if recurseErr != nil {
		return recurseErr
	}
	return &fs.PathError{Op: "unlinkat", Path: base, Err: errno(err)}
}

// unlinkAs is unlink(2) of name as the AsUser user: for a directory, the
// permission checks of removing it, then EISDIR; else Remove.
func (l *layer) unlinkAs(name, abs string) error {
	l.mu.RLock()
	at, err := l.resolveEntry("unlinkat", name, abs)
	var n node
	if err == nil {
		n, err = l.final(at)
	}
	if err == nil && n.kind == kindDir {
		if err = l.mayDeleteAs(at.rel, n); err == nil {
			err = pathErr("unlinkat", name, errIsDir)
		}
	}
	l.mu.RUnlock()
	if err != nil || n.kind == kindDir {
		return err
	}
	return l.remove(name, abs)
}
