//go:build linux

package overlayfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/cowfs/cowfs/internal/unixmode"
	"golang.org/x/sys/unix"
)

// readLowerDir reads the open lower directory d from its offset to its
// end, in the order getdents gives, with what mode asks for: the names,
// their types, or an lstat of each relative to the directory (as os's
// Readdir takes them). It makes the same system calls as os's Readdir,
// Readdirnames and ReadDir (getdents, and an fstatat per entry for
// infos), but no allocation per name: the names are substrings of one
// string. Errors are os's.
func readLowerDir(d *os.File, mode listMode) (lowerEntries, error) {
	rc, err := d.SyscallConn()
	if err != nil {
		return lowerEntries{}, &fs.PathError{Op: "readdirent", Path: d.Name(), Err: err}
	}
	var le lowerEntries
	var lerr error
	err = rc.Read(func(fd uintptr) bool {
		le, lerr = readDirFd(int(fd), d.Name(), mode)
		return true
	})
	if err != nil {
		return lowerEntries{}, &fs.PathError{Op: "readdirent", Path: d.Name(), Err: err}
	}
	if lerr != nil || mode != listTypes {
		return le, lerr
	}
	return le, le.lstatUnknown(d.Name())
}

// direntBuf is the size of the buffer getdents fills: os's (the kernel's
// cost is per entry, not per call, so a bigger one gains nothing).
const direntBuf = 8192

// The fields of a struct linux_dirent64, the same on every architecture.
const (
	direntReclen = int(unsafe.Offsetof(syscall.Dirent{}.Reclen))
	direntType   = int(unsafe.Offsetof(syscall.Dirent{}.Type))
	direntName   = int(unsafe.Offsetof(syscall.Dirent{}.Name))
)

// lowerEntries are a lower directory's entries, sorted by name, with
// what the listing mode asks for. The names are substrings of one string,
// text, which holds each entry as its d_type byte, its name and a zero
// byte; entry i's name is text[ks[i].idx:ks[i].end].
type lowerEntries struct {
	text  string
	ks    []keyed
	stats []*lowerInfo // listInfos: entry i's lstat
}

func (le *lowerEntries) len() int          { return len(le.ks) }
func (le *lowerEntries) name(i int) string { return le.text[le.ks[i].idx:le.ks[i].end] }

// typ returns entry i's type bits (typeUnknown when getdents did not say).
func (le *lowerEntries) typ(i int) fs.FileMode {
	return typeOfDirent(le.text[le.ks[i].idx-1])
}

// info returns entry i's lstat, an allocation of its own as os's are: a
// caller that keeps one keeps no other alive.
func (le *lowerEntries) info(i int) fs.FileInfo {
	return le.stats[i]
}

// readDirFd reads the directory fd (named name, for errors) from its
// offset to its end, and lstats its entries when mode asks for infos.
func readDirFd(fd int, name string, mode listMode) (lowerEntries, error) {
	le, err := readDirents(fd, name)
	if err != nil || mode != listInfos {
		return le, err
	}
	return le, le.lstatAt(fd, name)
}

// readDirents reads the directory fd (named name, for errors) from its
// offset to its end and sorts its entries by name.
func readDirents(fd int, name string) (lowerEntries, error) {
	var buf [direntBuf]byte
	var text []byte
	count := 0
	for {
		n, err := unix.Getdents(fd, buf[:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return lowerEntries{}, &fs.PathError{Op: "readdirent", Path: name, Err: err}
		}
		if n <= 0 {
			break
		}
		if text == nil {
			text = make([]byte, 0, n) // names are shorter than their records
		}
		var c int
		var ok bool
		text, c, ok = appendDirents(text, buf[:n])
		count += c
		if !ok {
			break // a malformed record: os stops listing there too
		}
	}
	if uint64(len(text)) >= 1<<32 {
		return lowerEntries{}, &fs.PathError{Op: "readdirent", Path: name, Err: syscall.EOVERFLOW}
	}
	var le lowerEntries
	if len(text) > 0 {
		// text is not written again: its bytes are the string's.
		le.text = unsafe.String(&text[0], len(text))
	}
	buf2 := make([]keyed, 2*count) // the entries, then the sort's scratch
	le.ks = buf2[:count:count]
	off := 0
	for i := range le.ks {
		end := off + 1 + strings.IndexByte(le.text[off+1:], 0)
		le.ks[i] = keyed{idx: uint32(off + 1), end: uint32(end)}
		off = end + 1
	}
	text2 := le.text
	sortNames(le.ks, buf2[count:], func(k keyed) string { return text2[k.idx:k.end] })
	return le, nil
}

// appendDirents appends the entries of the getdents records in buf to
// text, each as its d_type byte, its name and a zero byte, leaving out "."
// and "..", and returns how many it appended and whether every record was
// well formed. Growing text, it at least doubles it, for a linear cost.
func appendDirents(text, buf []byte) ([]byte, int, bool) {
	count := 0
	for len(buf) > direntName {
		reclen := int(binary.NativeEndian.Uint16(buf[direntReclen:]))
		if reclen <= direntName || reclen > len(buf) {
			return text, count, false
		}
		rec := buf[direntName:reclen]
		typ := buf[direntType]
		buf = buf[reclen:]
		if i := bytes.IndexByte(rec, 0); i >= 0 {
			rec = rec[:i]
		}
		if string(rec) == "." || string(rec) == ".." {
			continue
		}
		if need := len(rec) + 2; cap(text)-len(text) < need {
			text = slices.Grow(text, max(cap(text), need))
		}
		text = append(text, typ)
		text = append(text, rec...)
		text = append(text, 0)
		count++
	}
	return text, count, len(buf) == 0
}

// lstatAt lstats every entry relative to the directory fd, as os's
// Readdir does, into one slice; an entry gone since it was listed is left
// out, as os leaves it out.
func (le *lowerEntries) lstatAt(fd int, name string) error {
	le.stats = make([]*lowerInfo, 0, len(le.ks))
	k := 0
	for i, e := range le.ks {
		info := new(lowerInfo)
		st := (*unix.Stat_t)(unsafe.Pointer(&info.st))
		err := lstatEntry(fd, le.text, e, st)
		for err == syscall.EINTR {
			err = lstatEntry(fd, le.text, e, st)
		}
		switch {
		case err == syscall.ENOENT:
			continue
		case err != nil:
			le.ks = le.ks[:k]
			return &fs.PathError{Op: "fstatat", Path: name, Err: err}
		}
		info.name = le.name(i)
		le.stats = append(le.stats, info)
		le.ks[k] = e
		k++
	}
	le.ks = le.ks[:k]
	return nil
}

// The Stat_t of x/sys/unix that Fstatat fills is the Stat_t of syscall
// that os's infos carry: both are the kernel's struct stat.
var _ [unsafe.Sizeof(unix.Stat_t{}) - unsafe.Sizeof(syscall.Stat_t{})]byte
var _ [unsafe.Sizeof(syscall.Stat_t{}) - unsafe.Sizeof(unix.Stat_t{})]byte

// typeOfDirent returns the type bits of a d_type, as os's ReadDir reads
// it; typeUnknown when the file system does not say.
func typeOfDirent(t byte) fs.FileMode {
	switch t {
	case syscall.DT_REG:
		return 0
	case syscall.DT_DIR:
		return fs.ModeDir
	case syscall.DT_LNK:
		return fs.ModeSymlink
	case syscall.DT_FIFO:
		return fs.ModeNamedPipe
	case syscall.DT_SOCK:
		return fs.ModeSocket
	case syscall.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case syscall.DT_BLK:
		return fs.ModeDevice
	}
	return typeUnknown
}

// typeUnknown marks an entry whose type getdents did not give.
const typeUnknown = ^fs.FileMode(0)

// lstatUnknown finds the types getdents did not give as os's ReadDir
// finds them: by an lstat of the directory's name joined with the entry's;
// an entry gone since it was listed is left out, as os leaves it out. The
// type found is written over the entry's d_type byte.
func (le *lowerEntries) lstatUnknown(dir string) error {
	var text []byte // a copy of le.text, made at the first unknown type
	k := 0
	for i, e := range le.ks {
		if le.typ(i) == typeUnknown {
			fi, err := os.Lstat(dir + "/" + le.name(i))
			switch {
			case errors.Is(err, fs.ErrNotExist):
				continue
			case err != nil:
				le.ks = le.ks[:k]
				return err
			}
			if text == nil {
				text = []byte(le.text)
			}
			text[e.idx-1] = direntOfType(fi.Mode().Type())
		}
		le.ks[k] = e
		k++
	}
	le.ks = le.ks[:k]
	if text != nil {
		le.text = string(text)
	}
	return nil
}

// direntOfType returns the d_type of type bits.
func direntOfType(t fs.FileMode) byte {
	for _, d := range []byte{syscall.DT_REG, syscall.DT_DIR, syscall.DT_LNK, syscall.DT_FIFO, syscall.DT_SOCK, syscall.DT_CHR, syscall.DT_BLK} {
		if typeOfDirent(d) == t {
			return d
		}
	}
	return syscall.DT_UNKNOWN
}

// lowerInfo is a lower entry's lstat, as os reports it.
type lowerInfo struct {
	name string
	st   syscall.Stat_t
}

func (fi *lowerInfo) Name() string       { return fi.name }
func (fi *lowerInfo) Size() int64        { return fi.st.Size }
func (fi *lowerInfo) IsDir() bool        { return fi.st.Mode&syscall.S_IFMT == syscall.S_IFDIR }
func (fi *lowerInfo) Sys() any           { return &fi.st }
func (fi *lowerInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Unix()) }

// Mode converts st_mode as os does.
func (fi *lowerInfo) Mode() fs.FileMode { return unixmode.FileMode(uint32(fi.st.Mode)) }

// lstatEntry lstats entry k of text (see lowerEntries) relative to the
// directory fd, as os's Readdir does.
func lstatEntry(fd int, text string, k keyed, st *unix.Stat_t) error {
	return unix.Fstatat(fd, text[k.idx:k.end], st, unix.AT_SYMLINK_NOFOLLOW)
}
