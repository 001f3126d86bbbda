package overlayfs

import (
	"io/fs"
	"syscall"
	"time"

	"github.com/cowfs/cowfs/internal/unixmode"
	"golang.org/x/sys/unix"
)

// omitLooksNothingUp: Linux's utimensat with both times UTIME_OMIT (what
// os.Chtimes passes for two zero times) succeeds without looking the name
// up ("nothing to do, we must not even check the path").
const omitLooksNothingUp = true

// sysStat gives layer entries the *syscall.Stat_t that os gives real files,
// so code reading owners or link counts through Sys() keeps working.
func sysStat(fi *fileInfo) any {
	st := &syscall.Stat_t{
		Ino:  fi.ino,
		Uid:  uint32(fi.uid),
		Gid:  uint32(fi.gid),
		Size: fi.size,
		Mtim: syscall.NsecToTimespec(fi.mtime.UnixNano()),
		Mode: unixmode.Mode(fi.mode),
	}
	setUint(&st.Nlink, uint64(fi.nlink)) // uint64 on amd64, uint32 on arm64 and 386
	return st
}

// timedSys is sys, a lower's Sys(), with the modification time t where it
// is a *syscall.Stat_t (a copy: the lower's FileInfo is shared).
func timedSys(sys any, t time.Time) any {
	st, ok := sys.(*syscall.Stat_t)
	if !ok {
		return sys
	}
	c := *st
	c.Mtim = syscall.NsecToTimespec(t.UnixNano())
	return &c
}

// fileID identifies a lower file's version: any write or metadata change
// moves its ctime.
type fileID struct {
	dev, ino uint64
	ctime    int64
}

func identity(fi fs.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{dev: st.Dev, ino: st.Ino, ctime: st.Ctim.Nano()}
}

// plainDir tells, in three system calls, what New needs to know of a
// clean absolute root when no component of it is a symlink (then it is
// already canonical): that it is a directory, and whether it holds name.
// ok is false when this cannot be told so (a symlink on the way, any
// error, a kernel before openat2): the caller resolves the root as
// filepath.EvalSymlinks does, which costs an lstat per component.
func plainDir(abs, name string) (has, ok bool) {
	fd, err := unix.Openat2(unix.AT_FDCWD, abs, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return false, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	switch err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err {
	case nil:
		return true, true
	case unix.ENOENT:
		return false, true
	}
	return false, false
}

// setUint sets *p to v, for the Stat_t fields whose width differs
// between architectures.
func setUint[T ~uint32 | ~uint64](p *T, v uint64) { *p = T(v) }

// maxFileSize is the largest a layer file may grow by a truncation or a
// write past its end: half the machine's memory, tmpfs's default size.
// A layer file's bytes are in memory, holes included: past it, EFBIG, as
// past a file system's largest file, rather than an allocation the
// runtime cannot survive.
func maxFileSize() int64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil || si.Totalram == 0 {
		return 1 << 32
	}
	return int64(si.Totalram) * int64(max(si.Unit, 1)) / 2
}
