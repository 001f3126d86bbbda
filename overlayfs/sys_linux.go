package overlayfs

import (
	"io/fs"
	"syscall"
)

// sysStat gives layer entries the *syscall.Stat_t that os gives real files,
// so code reading owners or link counts through Sys() keeps working.
func sysStat(fi *fileInfo) any {
	st := &syscall.Stat_t{
		Nlink: 1,
		Uid:   uint32(fi.uid),
		Gid:   uint32(fi.gid),
		Size:  fi.size,
		Mtim:  syscall.NsecToTimespec(fi.mtime.UnixNano()),
		Mode:  uint32(fi.mode.Perm()),
	}
	switch {
	case fi.mode.IsDir():
		st.Mode |= syscall.S_IFDIR
		st.Nlink = 2
	case fi.mode&fs.ModeSymlink != 0:
		st.Mode |= syscall.S_IFLNK
	case fi.mode&fs.ModeNamedPipe != 0:
		st.Mode |= syscall.S_IFIFO
	case fi.mode&fs.ModeSocket != 0:
		st.Mode |= syscall.S_IFSOCK
	default:
		st.Mode |= syscall.S_IFREG
	}
	if fi.mode&fs.ModeSetuid != 0 {
		st.Mode |= syscall.S_ISUID
	}
	if fi.mode&fs.ModeSetgid != 0 {
		st.Mode |= syscall.S_ISGID
	}
	if fi.mode&fs.ModeSticky != 0 {
		st.Mode |= syscall.S_ISVTX
	}
	return st
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
