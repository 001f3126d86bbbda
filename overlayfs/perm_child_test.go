//go:build unix

package overlayfs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/afero"
)

// permChildEnv, when set, makes the test binary the os side of the
// AsUser differential (TestAsUserDifferential): it names a JSON file of
// sequences to run with os, as the user the parent started it as, and it
// prints each operation's outcome as JSON.
const permChildEnv = "COWFS_PERM_CHILD"

// permOp is one operation of the AsUser differential. Names are relative
// to the sequence's root.
type permOp struct {
	Op       string
	A, B     string
	Flag     int
	Mode     uint32
	UID, GID int
	Zero     bool // chtimes: both times zero
}

type permSeq struct {
	Root string
	Ops  []permOp
}

// permChild runs the sequences of the spec file with os and prints the
// outcomes, one list per sequence.
func permChild(spec string) int {
	data, err := os.ReadFile(spec)
	var seqs []permSeq
	if err == nil {
		err = json.Unmarshal(data, &seqs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	syscall.Umask(0o022)
	out := make([][]string, len(seqs))
	for i, s := range seqs {
		for _, op := range s.Ops {
			out[i] = append(out[i], runPermOp(osLinker{&afero.OsFs{}}, s.Root, op))
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// permFs is what the differential drives: an afero.Fs that links.
type permFs interface {
	afero.Fs
	afero.Linker
	Link(oldname, newname string) error
}

// osLinker is afero's OsFs with os.Link.
type osLinker struct{ *afero.OsFs }

func (osLinker) Link(oldname, newname string) error { return os.Link(oldname, newname) }

// goMode converts a unix mode (0o2775) to an fs.FileMode.
func goMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m) & fs.ModePerm
	for bit, fm := range map[uint32]fs.FileMode{0o4000: fs.ModeSetuid, 0o2000: fs.ModeSetgid, 0o1000: fs.ModeSticky} {
		if m&bit != 0 {
			mode |= fm
		}
	}
	return mode
}

// permTime is the time Chtimes sets.
var permTime = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

// runPermOp runs op in root on fsys and returns its outcome: "ok" (with
// what was read, listed or stat'ed) or the errno's name.
func runPermOp(fsys permFs, root string, op permOp) string {
	a, b := root+"/"+op.A, root+"/"+op.B // not cleaned: "x/." stays
	var err error
	res := "ok"
	switch op.Op {
	case "open":
		var f afero.File
		if f, err = fsys.OpenFile(a, op.Flag, goMode(op.Mode)); err == nil {
			if op.Flag&(os.O_WRONLY|os.O_RDWR) != 0 {
				_, err = f.Write([]byte("w"))
			} else if fi, serr := f.Stat(); serr == nil && !fi.IsDir() {
				var data []byte
				data, err = io.ReadAll(f)
				res += ":" + string(data)
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	case "readdir":
		var f afero.File
		if f, err = fsys.Open(a); err == nil {
			var names []string
			names, err = f.Readdirnames(-1)
			slices.Sort(names)
			res += ":" + strings.Join(names, ",")
			f.Close()
		}
	case "readdirinfo":
		var f afero.File
		if f, err = fsys.Open(a); err == nil {
			var infos []fs.FileInfo
			infos, err = f.Readdir(-1)
			names := make([]string, len(infos))
			for i, fi := range infos {
				names[i] = fi.Name()
			}
			slices.Sort(names)
			res += ":" + strings.Join(names, ",")
			f.Close()
		}
	case "fsread", "fsreaddir", "fsstat":
		// The io/fs view: os.DirFS on the os side, IOFS on overlayfs's.
		var fsys2 fs.FS = os.DirFS(root)
		if v, ok := fsys.(interface{ IOFS() fs.FS }); ok {
			fsys2 = v.IOFS()
		}
		switch op.Op {
		case "fsread":
			var data []byte
			data, err = fs.ReadFile(fsys2, op.A)
			res += ":" + string(data)
		case "fsreaddir":
			var des []fs.DirEntry
			des, err = fs.ReadDir(fsys2, op.A)
			for _, d := range des {
				res += ":" + d.Name()
			}
		default:
			var fi fs.FileInfo
			if fi, err = fs.Stat(fsys2, op.A); err == nil {
				res += fmt.Sprintf(":%v", fi.Mode())
			}
		}
	case "mkdir":
		err = fsys.Mkdir(a, goMode(op.Mode))
	case "remove":
		err = fsys.Remove(a)
	case "removeall":
		err = fsys.RemoveAll(a)
	case "rename":
		err = fsys.Rename(a, b)
	case "chmod":
		err = fsys.Chmod(a, goMode(op.Mode))
	case "chown":
		err = fsys.Chown(a, op.UID, op.GID)
	case "chtimes":
		t := permTime
		if op.Zero {
			t = time.Time{}
		}
		err = fsys.Chtimes(a, t, t)
	case "symlink":
		err = fsys.SymlinkIfPossible(op.A, b) // the target as given
	case "link":
		err = fsys.Link(a, b)
	case "stat", "lstat":
		var fi fs.FileInfo
		if op.Op == "stat" {
			fi, err = fsys.Stat(a)
		} else {
			fi, _, err = fsys.(afero.Lstater).LstatIfPossible(a)
		}
		if err == nil {
			st := fi.Sys().(*syscall.Stat_t)
			res += fmt.Sprintf(":%v:%d:%d", fi.Mode(), st.Uid, st.Gid)
		}
	default:
		return "bad op " + op.Op
	}
	if err != nil {
		var e syscall.Errno
		if errors.As(err, &e) {
			return e.Error()
		}
		return "error: " + err.Error()
	}
	return res
}
