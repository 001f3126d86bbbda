package kernel

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cowfs/cowfs/internal/sparse"
	"golang.org/x/sys/unix"
)

// byReference is the size from which overlayfs.Fs.PutEntry keeps an
// *os.File's content by reference instead of reading it (its extThreshold).
const byReference = 1 << 20

// privateContent returns what the layer may keep of the imported file r of
// size bytes: content kept by reference must never change afterwards, so
// a large file is given as is only when nothing else can reach it: owned
// (Run's own upper or copy, in its private temporary directory, whose
// command and its processes are gone) and of one link (a command's hard
// link into a WithWritable directory has two). Otherwise it is a private
// copy: a reflink (FICLONE) in an unlinked file beside it where the
// filesystem can, else a sparse copy into an unlinked file there or in the
// temporary directory. Small files are read into the layer at once and are
// returned as is.
func privateContent(r *os.File, size int64, owned bool, near string) (*os.File, error) {
	if size < byReference {
		return r, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(r.Fd()), &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: r.Name(), Err: err}
	}
	if owned && st.Nlink == 1 {
		return r, nil
	}
	return privateCopy(r, near)
}

// privateCopy copies r into an unlinked temporary file in directory near
// (on r's filesystem, so that a reflink can work) or else in the temporary
// directory, by reflink where the filesystem can.
func privateCopy(r *os.File, near string) (*os.File, error) {
	var errs []error
	for _, dir := range []string{near, os.TempDir()} {
		fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			errs = append(errs, &os.PathError{Op: "open O_TMPFILE", Path: dir, Err: err})
			continue
		}
		w := os.NewFile(uintptr(fd), r.Name()+" (private copy)")
		if unix.IoctlFileClone(fd, int(r.Fd())) == nil {
			return w, nil
		}
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			w.Close()
			return nil, err
		}
		if _, err := sparse.Copy(w, r); err != nil {
			w.Close()
			errs = append(errs, fmt.Errorf("private copy of %s in %s: %w", r.Name(), dir, err))
			continue
		}
		return w, nil
	}
	return nil, errors.Join(errs...)
}
