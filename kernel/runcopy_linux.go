package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cowfs/cowfs/internal/sparse"
	"github.com/cowfs/cowfs/internal/unixmode"
	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// runCopy is Run without an overlay: the command runs in a copy of the view
// and the difference is imported, stacked on the view like an upper dir.
// Confined, it starts through the hook (see runHook), which applies
// Landlock and execs the command; the real root is checked unchanged
// afterwards in any case.
func runCopy(ctx context.Context, f *overlayfs.Fs, cmd *exec.Cmd, cfg runConfig) error {
	mode := Mode{Kind: ModeCopy, Fallback: cfg.fallback}
	abi, err := confinement(cfg, &mode)
	if err != nil {
		return err
	}
	var exe string
	if abi > 0 {
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("kernel: Run: cannot re-execute this program to confine the command (%v): %w", err, ErrUnconfined)
		}
	}
	tmp, done, err := ownedTempDir(cfg.tempDir, copyDirPrefix)
	if err != nil {
		return err
	}
	defer done()
	tmpDir, err := privateTemp(tmp)
	if err != nil {
		return err
	}
	cp := filepath.Join(tmp, "root")
	writable, err := writablePaths(cp, tmpDir, f.Root(), cfg.writable)
	if err != nil {
		return err
	}
	// The host is read-only in the command's mount namespace but for the
	// run's directory (the copy, TMPDIR) and the extra writable paths.
	namespaces := copyNamespaces(f.Root(), append([]string{tmp}, writable[2:]...), cfg.network, !cfg.unconfined)
	if abi == 0 {
		writable = nil
	}
	before := f.LowerState()
	vc := &viewCopy{f: f, dst: cp, inode: map[string]uint64{}, ownerLost: map[string]bool{}, absent: map[string]bool{}}
	if err := vc.copyDir("."); err != nil {
		return err
	}
	c := cloneCmd(ctx, cmd)
	c.Dir, c.Path = workDir(f.Root(), cp, cmd.Dir, cmd.Path)
	// As os/exec, which stats Dir before it forks only without a
	// SysProcAttr; the child's chdir (in superviseStart) fails otherwise.
	if cmd.Dir == "" || cmd.SysProcAttr == nil {
		if err := enterable(c.Dir, cmd.Dir, cp, f.Root()); err != nil {
			return err
		}
	}
	c.Env = append(c.Env, RootEnv+"="+cp, "TMPDIR="+tmpDir)
	c.Env = withoutOptionalLocks(c.Env)
	mode.Root, mode.Dir = cp, c.Dir
	var sup *supervised
	var hookErr *runStatus
	if abi > 0 {
		req := runRequest{NoMount: true, Path: c.Path, Landlock: abi, Writable: writable,
			UID: os.Geteuid(), GID: os.Getegid(), ChownEPERM: os.Geteuid() != 0, Network: cfg.network}
		c.Path, c.Args = exe, append([]string{exe}, c.Args...)
		// Confined, the namespaces are required: without a mount
		// namespace the host is not read-only (Landlock leaves chmod,
		// chown, utimes and xattrs of the host's files to the command),
		// without the others the network, /dev and processes are the
		// host's.
		sup, hookErr, err = startHooked(c, req, namespaces, true, "exec")
	} else if sup, err = superviseStart(c, namespaces, false, "exec"); err == nil {
		if err = sup.started(); err != nil {
			sup.wait()
		}
	}
	var se *startError
	if errors.As(err, &se) && se.stage == "namespace" && abi > 0 {
		return fmt.Errorf("kernel: Run: copy fallback without namespaces (%v) would leave the host writable: %w", se.err, ErrUnconfined)
	}
	if errors.As(err, &se) {
		return asProgram(se.err, cmd)
	}
	if err != nil {
		return asProgram(err, cmd)
	}
	if hookErr == nil && cfg.report != nil {
		cfg.report(mode)
	}
	runErr := sup.wait()
	if hookErr != nil {
		return asProgram(hookErr.err(), cmd)
	}
	if err := realRootChanged(before, "in a copy"); err != nil {
		return errors.Join(runErr, err)
	}
	vc.modes = makeReadable(cp)
	entries, err := vc.diff()
	if err != nil {
		return errors.Join(runErr, err)
	}
	root, err := os.OpenRoot(cp)
	if err != nil {
		return errors.Join(runErr, err)
	}
	defer root.Close()
	snap := f.Snapshot()
	apply := newUpperApplier(root, cp, f, true)
	defer apply.close()
	for _, e := range entries {
		if err := apply.apply(e); err != nil {
			f.Restore(snap)
			return errors.Join(runErr, err)
		}
	}
	// The root's own mode and owner, as an upper's root, where the copy's
	// owner could be set to the view's (else it differs by construction).
	if !vc.ownerLost["."] {
		if err := importRoot(cp, f, vc.modes); err != nil {
			f.Restore(snap)
			return errors.Join(runErr, err)
		}
	}
	return errors.Join(runErr, skipped(vc.skips))
}

// realRootChanged checks the real root against its identities before the
// command ran (how the command ran, for the message): an error wrapping
// overlayfs.ErrConflict that names every changed path, or nil.
func realRootChanged(before *overlayfs.LowerState, how string) error {
	changed := before.Changed()
	if len(changed) == 0 {
		return nil
	}
	return fmt.Errorf("kernel: Run: the real root changed while the command ran %s, nothing imported: %s: %w",
		how, strings.Join(changed, ", "), overlayfs.ErrConflict)
}

// withoutOptionalLocks adds GIT_OPTIONAL_LOCKS=0 to env unless env sets
// it: git then skips the writes it makes only opportunistically, chiefly
// git status refreshing the index's stat cache. In a copy every file has
// a new inode and ctime, so a read-only git status would otherwise rewrite
// .git/index (a change with different bytes); a plain run, or the overlay
// mode, which keeps the lower's inodes and ctimes, writes nothing.
func withoutOptionalLocks(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "GIT_OPTIONAL_LOCKS=") {
			return env
		}
	}
	return append(env, "GIT_OPTIONAL_LOCKS=0")
}

// viewCopy is a real directory copy of an overlay view.
type viewCopy struct {
	f         *overlayfs.Fs
	dst       string
	inode     map[string]uint64      // copied directories: replaced ones get new inodes
	ownerLost map[string]bool        // chown refused: the owner cannot be compared
	absent    map[string]bool        // device nodes of the view that could not be made in the copy
	skips     []error                // what the diff found that a layer cannot hold
	modes     map[string]fs.FileMode // modes the command left, where makeReadable changed them
	links     copyLinks              // hard links of the view and of the copy (link_linux.go)
}

func (vc *viewCopy) view(rel string) string {
	return filepath.Join(vc.f.Root(), filepath.FromSlash(rel))
}

func (vc *viewCopy) real(rel string) string {
	return filepath.Join(vc.dst, filepath.FromSlash(rel))
}

func (vc *viewCopy) viewNames(rel string) ([]string, error) {
	d, err := vc.f.Open(vc.view(rel))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}

func (vc *viewCopy) copyDir(rel string) error {
	fi, err := vc.f.Lstat(vc.view(rel))
	if err != nil {
		return err
	}
	p := vc.real(rel)
	if err := os.Mkdir(p, 0o700); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return err
	}
	vc.inode[rel] = st.Ino
	names, err := vc.viewNames(rel)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := vc.copyEntry(joinRel(rel, name)); err != nil {
			return err
		}
	}
	return vc.setMeta(rel, fi)
}

func (vc *viewCopy) copyEntry(rel string) error {
	fi, err := vc.f.Lstat(vc.view(rel))
	if err != nil {
		return err
	}
	if done, err := vc.copyLink(rel, fi); done {
		return err
	}
	switch {
	case fi.IsDir():
		return vc.copyDir(rel)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := vc.f.ReadlinkIfPossible(vc.view(rel))
		if err != nil {
			return err
		}
		if err := os.Symlink(target, vc.real(rel)); err != nil {
			return err
		}
	case fi.Mode().IsRegular():
		r, err := vc.f.Open(vc.view(rel))
		if err != nil {
			return err
		}
		w, err := os.OpenFile(vc.real(rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			r.Close()
			return err
		}
		_, err = sparse.Copy(w, r) // holes stay holes: the copy costs no more disk than the view
		r.Close()
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	default:
		// FIFOs, sockets and devices are copied as what they are. A device
		// node the copy cannot make (mknod needs privilege) is left out and
		// not taken for a deletion.
		var rdev uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			rdev = st.Rdev
		}
		if err := unix.Mknod(vc.real(rel), unixmode.Mode(fi.Mode())&unix.S_IFMT|0o600, int(rdev)); err != nil {
			if fi.Mode()&(fs.ModeDevice|fs.ModeCharDevice) != 0 {
				vc.absent[rel] = true
				return nil
			}
			return &fs.PathError{Op: "mknod", Path: vc.real(rel), Err: err}
		}
	}
	return vc.setMeta(rel, fi)
}

func (vc *viewCopy) setMeta(rel string, fi fs.FileInfo) error {
	p := vc.real(rel)
	if uid, gid, ok := ownerOf(fi); ok {
		if err := os.Lchown(p, uid, gid); err != nil {
			if !errors.Is(err, fs.ErrPermission) && !errors.Is(err, syscall.EINVAL) {
				return err
			}
			vc.ownerLost[rel] = true
		}
	} else {
		vc.ownerLost[rel] = true
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		if err := unix.Chmod(p, unixmode.Perm(fi.Mode())); err != nil {
			return &fs.PathError{Op: "chmod", Path: p, Err: err}
		}
	}
	ts := timespecs(fi.ModTime(), fi.ModTime())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "utimensat", Path: p, Err: err}
	}
	return nil
}

// ownerOf reads the owner from a FileInfo of the view.
func ownerOf(fi fs.FileInfo) (uid, gid int, ok bool) {
	switch s := fi.Sys().(type) {
	case *syscall.Stat_t:
		return int(s.Uid), int(s.Gid), true
	case interface{ Owner() (int, int) }:
		uid, gid := s.Owner()
		return uid, gid, true
	}
	return 0, 0, false
}

// diff lists, parent-first, the entries that stack the copy's current state
// on the view, in the form Import applies.
func (vc *viewCopy) diff() ([]upperEntry, error) {
	var out []upperEntry
	err := vc.diffDir(".", true, false, &out)
	return out, err
}

// diffDir compares the children of copy dir rel with the view's; when the
// view has no directory there (or it was replaced) every child is new.
func (vc *viewCopy) diffDir(rel string, viewDir, replaced bool, out *[]upperEntry) error {
	ents, err := os.ReadDir(vc.real(rel))
	if err != nil {
		return err
	}
	var copyNames, viewNames []string
	for _, e := range ents {
		copyNames = append(copyNames, e.Name())
	}
	if viewDir && !replaced {
		if viewNames, err = vc.viewNames(rel); err != nil {
			return err
		}
	}
	i, j := 0, 0
	for i < len(copyNames) || j < len(viewNames) {
		switch {
		case j == len(viewNames) || (i < len(copyNames) && copyNames[i] < viewNames[j]):
			if r := joinRel(rel, copyNames[i]); r == commitJournal {
				vc.skips = append(vc.skips, reservedError(vc.view(r)))
			} else if err := vc.diffEntry(r, false, out); err != nil {
				return err
			}
			i++
		case i == len(copyNames) || viewNames[j] < copyNames[i]:
			if r := joinRel(rel, viewNames[j]); !vc.absent[r] {
				*out = append(*out, upperEntry{rel: r, typ: overlayfs.EntryWhiteout})
			}
			j++
		default:
			if err := vc.diffEntry(joinRel(rel, copyNames[i]), true, out); err != nil {
				return err
			}
			i++
			j++
		}
	}
	return nil
}

func (vc *viewCopy) diffEntry(rel string, inView bool, out *[]upperEntry) error {
	p := vc.real(rel)
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	e := upperEntry{rel: rel, mode: specialPerm(unixmode.FileMode(st.Mode)), uid: int(st.Uid), gid: int(st.Gid), mtime: time.Unix(st.Mtim.Unix()), size: st.Size}
	if m, ok := vc.modes[rel]; ok {
		e.mode = m
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		e.typ = overlayfs.EntryDir
	case unix.S_IFREG:
		e.typ = overlayfs.EntryFile
	case unix.S_IFLNK:
		e.typ = overlayfs.EntrySymlink
		t, err := os.Readlink(p)
		if err != nil {
			return err
		}
		e.target = t
	default:
		t, ok := specialType(st.Mode)
		if !ok {
			if inView {
				if vfi, err := vc.f.Lstat(vc.view(rel)); err == nil && unixmode.Mode(vfi.Mode())&unix.S_IFMT == st.Mode&unix.S_IFMT {
					return nil // the view's own device node or special file, as copied
				}
			}
			vc.skips = append(vc.skips, skipError(filepath.Join(vc.f.Root(), filepath.FromSlash(rel)), st.Mode, st.Rdev))
			return nil
		}
		e.typ = t
	}
	var vfi fs.FileInfo
	if inView {
		var err error
		if vfi, err = vc.f.Lstat(vc.view(rel)); err != nil {
			return err
		}
	}
	if e.typ != overlayfs.EntryDir {
		if e.linkTo = vc.links.diffLink(rel, &st, vfi); e.linkTo != "" {
			*out = append(*out, e)
			return nil
		}
	}
	if e.typ == overlayfs.EntryDir {
		viewDir := vfi != nil && vfi.IsDir()
		replaced := viewDir && vc.inode[rel] != st.Ino
		e.opaque = replaced
		if !viewDir || replaced || !vc.sameMeta(rel, e, vfi) {
			*out = append(*out, e)
		}
		return vc.diffDir(rel, viewDir, replaced, out)
	}
	if vfi != nil && vc.sameMeta(rel, e, vfi) {
		same, err := vc.sameContent(rel, e, vfi)
		if err != nil || same {
			return err
		}
	}
	vc.links.emitted(rel)
	*out = append(*out, e)
	return nil
}

func (vc *viewCopy) sameMeta(rel string, e upperEntry, vfi fs.FileInfo) bool {
	vm := vfi.Mode()
	var typ overlayfs.EntryType
	switch {
	case vm.IsDir():
		typ = overlayfs.EntryDir
	case vm&fs.ModeSymlink != 0:
		typ = overlayfs.EntrySymlink
	case vm.IsRegular():
		typ = overlayfs.EntryFile
	default:
		typ, _ = specialType(unixmode.Mode(vm))
	}
	if typ != e.typ || !vfi.ModTime().Equal(e.mtime) {
		return false
	}
	if typ != overlayfs.EntrySymlink && vm&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != e.mode {
		return false
	}
	if !vc.ownerLost[rel] {
		if uid, gid, ok := ownerOf(vfi); ok && (uid != e.uid || gid != e.gid) {
			return false
		}
	}
	return true
}

func (vc *viewCopy) sameContent(rel string, e upperEntry, vfi fs.FileInfo) (bool, error) {
	switch e.typ {
	case overlayfs.EntrySymlink:
		t, err := vc.f.ReadlinkIfPossible(vc.view(rel))
		return t == e.target, err
	case overlayfs.EntryFile:
		if vfi.Size() != e.size {
			return false, nil
		}
		a, err := vc.f.Open(vc.view(rel))
		if err != nil {
			return false, err
		}
		defer a.Close()
		b, err := os.Open(vc.real(rel))
		if err != nil {
			return false, err
		}
		defer b.Close()
		return sameReaders(a, b)
	}
	return true, nil
}

func sameReaders(a, b io.Reader) (bool, error) {
	ba, bb := make([]byte, 32<<10), make([]byte, 32<<10)
	for {
		na, erra := io.ReadFull(a, ba)
		nb, errb := io.ReadFull(b, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		endA := erra == io.EOF || erra == io.ErrUnexpectedEOF
		endB := errb == io.EOF || errb == io.ErrUnexpectedEOF
		if erra != nil && !endA {
			return false, erra
		}
		if errb != nil && !endB {
			return false, errb
		}
		if endA || endB {
			return endA == endB, nil
		}
	}
}
