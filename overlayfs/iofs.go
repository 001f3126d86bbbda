package overlayfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

var (
	_ fs.ReadDirFS  = ioFS{}
	_ fs.ReadFileFS = ioFS{}
	_ fs.StatFS     = ioFS{}
	_ fs.SubFS      = ioFS{}
	_ fs.ReadLinkFS = ioFS{}
	_ io.Seeker     = ioFile{}
	_ io.ReaderAt   = ioFile{}
)

// IOFS returns an io/fs view of the overlay rooted at Root(): names are
// slash-separated and unrooted ("dir/a.txt"), as fs.ValidPath requires.
// Errors carry those names. Symlinks are followed in the merged view.
func (f *Fs) IOFS() fs.FS { return ioFS{f: f} }

type ioFS struct {
	f   *Fs
	dir string // root-relative directory of a Sub view
}

// host maps a valid io/fs name to the overlay's host path.
func (v ioFS) host(op, name string) (string, error) {
	if !fs.ValidPath(name) || strings.IndexByte(name, 0) >= 0 {
		return "", pathErr(op, name, fs.ErrInvalid) // as os.DirFS: a NUL is invalid too
	}
	rel := v.dir
	if name != "." {
		rel = join(v.dir, name)
	}
	return v.f.primary().host(rel), nil
}

func (v ioFS) Open(name string) (fs.File, error) {
	h, err := v.host("open", name)
	if err != nil {
		return nil, err
	}
	fh, err := v.f.Open(h)
	if err != nil {
		return nil, fixErr("", name, err)
	}
	return ioFile{fh.(fs.ReadDirFile), name}, nil
}

func (v ioFS) ReadDir(name string) ([]fs.DirEntry, error) {
	h, err := v.host("readdir", name)
	if err != nil {
		return nil, err
	}
	fh, err := v.f.OpenFile(h, os.O_RDONLY|oDirectory, 0) // as os.ReadDir: a file is ENOTDIR at open
	if err != nil {
		return nil, fixErr("", name, v.f.dirOpenErr(h, err)) // os.DirFS's op: open, or readdirent below
	}
	defer fh.Close()
	des, err := fh.(fs.ReadDirFile).ReadDir(-1)
	return des, fixErr("", name, err)
}

func (v ioFS) ReadFile(name string) ([]byte, error) {
	h, err := v.host("readfile", name)
	if err != nil {
		return nil, err
	}
	fh, err := v.f.Open(h)
	if err != nil {
		return nil, fixErr("", name, err) // as os.DirFS: the op is open, or read below
	}
	defer fh.Close()
	data, err := io.ReadAll(fh)
	return data, fixErr("", name, err)
}

func (v ioFS) Stat(name string) (fs.FileInfo, error) {
	h, err := v.host("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := v.f.Stat(h)
	if err != nil {
		return nil, fixErr("stat", name, err)
	}
	return renameInfo(fi, path.Base(name)), nil
}

func (v ioFS) Lstat(name string) (fs.FileInfo, error) {
	h, err := v.host("lstat", name)
	if err != nil {
		return nil, err
	}
	fi, err := v.f.Lstat(h)
	if err != nil {
		return nil, fixErr("lstat", name, err)
	}
	return renameInfo(fi, path.Base(name)), nil
}

func (v ioFS) ReadLink(name string) (string, error) {
	h, err := v.host("readlink", name)
	if err != nil {
		return "", err
	}
	t, err := v.f.ReadlinkIfPossible(h)
	return t, fixErr("readlink", name, err)
}

func (v ioFS) Sub(dir string) (fs.FS, error) {
	if !fs.ValidPath(dir) {
		return nil, pathErr("sub", dir, fs.ErrInvalid)
	}
	if dir == "." {
		return v, nil
	}
	return ioFS{f: v.f, dir: join(v.dir, dir)}, nil
}

// ioFile reports errors under the io/fs name.
type ioFile struct {
	fs.ReadDirFile
	name string
}

func (h ioFile) Stat() (fs.FileInfo, error) {
	fi, err := h.ReadDirFile.Stat()
	if err != nil {
		return nil, fixErr("", h.name, err)
	}
	return renameInfo(fi, path.Base(h.name)), nil
}

func (h ioFile) Read(p []byte) (int, error) {
	n, err := h.ReadDirFile.Read(p)
	if err != nil && err != io.EOF {
		err = fixErr("", h.name, err)
	}
	return n, err
}

func (h ioFile) ReadDir(n int) ([]fs.DirEntry, error) {
	des, err := h.ReadDirFile.ReadDir(n)
	if err != nil && err != io.EOF {
		err = fixErr("", h.name, err)
	}
	return des, err
}

func (h ioFile) Close() error { return fixErr("", h.name, h.ReadDirFile.Close()) }

// Seek and ReadAt are there as on os.DirFS's files (*os.File): http.FS
// needs Seek, and fstest.TestFS checks both when they are.
func (h ioFile) Seek(off int64, whence int) (int64, error) {
	sk, ok := h.ReadDirFile.(io.Seeker)
	if !ok {
		return 0, pathErr("seek", h.name, errors.ErrUnsupported)
	}
	n, err := sk.Seek(off, whence)
	return n, fixErr("", h.name, err)
}

func (h ioFile) ReadAt(p []byte, off int64) (int, error) {
	ra, ok := h.ReadDirFile.(io.ReaderAt)
	if !ok {
		return 0, pathErr("read", h.name, errors.ErrUnsupported)
	}
	n, err := ra.ReadAt(p, off)
	if err != nil && err != io.EOF {
		err = fixErr("", h.name, err)
	}
	return n, err
}

// renameInfo reports fi under name.
func renameInfo(fi fs.FileInfo, name string) fs.FileInfo {
	if fi.Name() == name {
		return fi
	}
	return renamedInfo{fi, name}
}
