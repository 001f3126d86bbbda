package overlayfs

import (
	"io/fs"
	"os"
	"slices"
	"syscall"
	"time"
)

// errAccess is what Linux says when a permission bit is missing; errPerm
// (EPERM) when only the owner may.
const errAccess = syscall.EACCES

// AsUser makes the Fs check every operation as Linux checks it for a
// process of user uid, primary group gid and supplementary groups, with no
// capabilities (see the package documentation, "Permissions"): the
// read, write and search bits of owner, group or other (the first class
// that matches, as in the kernel's generic_permission), search on every
// directory a name walks, write and search on the parent to create,
// remove, rename or link, the sticky bit, and Chmod, Chown and Chtimes by
// the owner only. New entries are owned by uid and gid (or the parent's
// group under a setgid directory). Without AsUser nothing is checked, as
// for root.
//
// Owners and modes are the lower's (its files' real owners) and the
// layer's; on Windows, where files have no owners, every lower entry is
// another user's. Names outside the root are not checked: they go to os,
// which checks them as the process.
func AsUser(uid, gid int, groups ...int) Option {
	u := &asUser{uid: uid, gid: gid, groups: slices.Clone(groups)}
	return func(o *options) { o.as = u }
}

// asUser is the user AsUser checks operations as. It never changes.
type asUser struct {
	uid, gid int
	groups   []int
}

// The bits a permission check asks for, as in the mode's "other" triple.
const (
	mayExec  fs.FileMode = 1
	mayWrite fs.FileMode = 2
	mayRead  fs.FileMode = 4
)

// inGroup reports whether the user is in group gid.
func (u *asUser) inGroup(gid int) bool {
	return gid == u.gid || slices.Contains(u.groups, gid)
}

// may reports whether the user has the permissions want on an entry of
// metadata m: the owner's bits if it owns the entry, else the group's if
// it is in its group, else the others' (the classes do not fall through).
func (u *asUser) may(m meta, want fs.FileMode) bool {
	p := m.perm & fs.ModePerm
	switch {
	case m.uid == u.uid:
		p >>= 6
	case u.inGroup(m.gid):
		p >>= 3
	}
	return p&want == want
}

// searchLocked is the resolver's check of the directory dir it looks a
// name up in: search permission (EACCES). Callers test l.opts.as first.
func (l *layer) searchLocked(dir string) error {
	if m, ok := l.dirMetaLocked(dir); ok && !l.opts.as.may(m, mayExec) {
		return errAccess
	}
	return nil
}

// searchUpLocked reports whether the AsUser user may search every
// directory from the root down to rel's: the resolver's fast path (a
// real lower directory chain, no symlink on the way) keeps its result
// then; else the walk finds which directory refuses.
func (l *layer) searchUpLocked(rel string) bool {
	for dir := parent(rel); ; dir = parent(dir) {
		if l.searchLocked(dir) != nil {
			return false
		}
		if dir == "" {
			return true
		}
	}
}

// maySearchLocked reports whether the AsUser user may search the
// directory dir (always, without AsUser).
func (l *layer) maySearchLocked(dir string) bool {
	return l.opts.as == nil || l.searchLocked(dir) == nil
}

// nodeMetaLocked returns the owner and mode of the node n at rel.
func (l *layer) nodeMetaLocked(rel string, n node) meta {
	switch {
	case n.layer && n.e.kind == kindFile:
		if b := l.blobLocked(n.e.ino); b != nil {
			return b.meta
		}
		return meta{}
	case n.layer:
		return n.e.meta()
	case n.fi != nil:
		return metaOf(n.fi)
	}
	fi, err := os.Lstat(l.host(rel))
	if err != nil {
		return meta{}
	}
	return metaOf(fi)
}

// accessOf returns the permissions an open with flag asks for, as Linux
// counts them: O_TRUNC asks for write even on a read-only open.
func accessOf(flag int) fs.FileMode {
	var want fs.FileMode
	switch flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		want = mayRead
	case os.O_WRONLY:
		want = mayWrite
	default:
		want = mayRead | mayWrite
	}
	if flag&os.O_TRUNC != 0 {
		want |= mayWrite
	}
	return want
}

// mayOpenLocked reports whether an open with flag of n at rel passes
// AsUser's checks (always, without AsUser): the mode's bits for an
// existing entry, write on the parent for one to create.
func (l *layer) mayOpenLocked(rel string, n node, flag int) bool {
	return l.opts.as == nil || l.mayOpenAs(rel, n, flag)
}

func (l *layer) mayOpenAs(rel string, n node, flag int) bool {
	if !n.exists() {
		return l.mayCreateAs(rel) == nil
	}
	return l.opts.as.may(l.nodeMetaLocked(rel, n), accessOf(flag))
}

// mayCreateLocked returns the error of creating an entry at rel as the
// AsUser user (nil without AsUser): write and search on its directory.
func (l *layer) mayCreateLocked(rel string) error {
	if l.opts.as == nil {
		return nil
	}
	return l.mayCreateAs(rel)
}

func (l *layer) mayCreateAs(rel string) error {
	if m, ok := l.dirMetaLocked(parent(rel)); ok && !l.opts.as.may(m, mayWrite|mayExec) {
		return errAccess
	}
	return nil
}

// mayDeleteLocked returns the error of removing n at rel (unlink, rmdir,
// or as either end of a rename) as the AsUser user, nil without AsUser:
// EACCES without write and search on its directory, EPERM in a sticky
// directory when the user owns neither the entry nor the directory (the
// kernel's may_delete and check_sticky).
func (l *layer) mayDeleteLocked(rel string, n node) error {
	if l.opts.as == nil {
		return nil
	}
	return l.mayDeleteAs(rel, n)
}

func (l *layer) mayDeleteAs(rel string, n node) error {
	u := l.opts.as
	pm, ok := l.dirMetaLocked(parent(rel))
	if !ok {
		return nil
	}
	if !u.may(pm, mayWrite|mayExec) {
		return errAccess
	}
	if pm.perm&fs.ModeSticky != 0 && pm.uid != u.uid && l.nodeMetaLocked(rel, n).uid != u.uid {
		return errPerm
	}
	return nil
}

// mayRenameLocked returns the error of moving no at lo onto ln (where nn
// is, or nothing) as the AsUser user, nil without AsUser, in the kernel's
// order (vfs_rename): removing the source, then removing the target or
// creating there (see also mayMoveDirLocked).
func (l *layer) mayRenameLocked(lo, ln loc, no, nn node) error {
	if l.opts.as == nil {
		return nil
	}
	return l.mayRenameAs(lo, ln, no, nn)
}

func (l *layer) mayRenameAs(lo, ln loc, no, nn node) error {
	if err := l.mayDeleteAs(lo.rel, no); err != nil {
		return err
	}
	if nn.exists() {
		if err := l.mayDeleteAs(ln.rel, nn); err != nil {
			return err
		}
	} else if err := l.mayCreateAs(ln.rel); err != nil {
		return err
	}
	return nil
}

// mayMoveDirLocked returns the error of moving the directory no at lo to
// another parent as the AsUser user, nil without AsUser: its ".." changes,
// which needs write on it (EACCES). The kernel checks it after the types
// of source and target, before the target's emptiness.
func (l *layer) mayMoveDirLocked(lo, ln loc, no node) error {
	if l.opts.as == nil {
		return nil
	}
	return l.mayMoveDirAs(lo, ln, no)
}

func (l *layer) mayMoveDirAs(lo, ln loc, no node) error {
	if no.kind != kindDir || parent(lo.rel) == parent(ln.rel) {
		return nil
	}
	if !l.opts.as.may(l.nodeMetaLocked(lo.rel, no), mayWrite) {
		return errAccess
	}
	return nil
}

// mayLinkLocked returns the error of linking no at lo as ln as the AsUser
// user, nil without AsUser, in the kernel's order (do_linkat): the
// protected_hardlinks rule first (EPERM unless the user owns the file or
// it is a regular file, neither setuid nor executable setgid, that the
// user may read and write: the default of most distributions), then
// creating in ln's directory.
func (l *layer) mayLinkLocked(lo, ln loc, no node) error {
	if l.opts.as == nil {
		return nil
	}
	return l.mayLinkAs(lo, ln, no)
}

func (l *layer) mayLinkAs(lo, ln loc, no node) error {
	u := l.opts.as
	m := l.nodeMetaLocked(lo.rel, no)
	safe := no.kind == kindFile && m.perm&fs.ModeSetuid == 0 &&
		m.perm&(fs.ModeSetgid|0o010) != fs.ModeSetgid|0o010 && u.may(m, mayRead|mayWrite)
	if !safe && m.uid != u.uid {
		return errPerm
	}
	return l.mayCreateAs(ln.rel)
}

// metaCheck is what AsUser asks of a metadata change, given the entry's
// metadata before it; nil when anyone may.
type metaCheck func(u *asUser, m meta) error

// ownerOnly is Chmod's check: only the owner changes the mode (EPERM).
func ownerOnly(u *asUser, m meta) error {
	if m.uid != u.uid {
		return errPerm
	}
	return nil
}

// chownCheck returns Chown's check: the owner may give the file to one of
// its own groups (or keep its group), and nobody gives it to another user
// (EPERM); -1 asks nothing.
func chownCheck(uid, gid int) metaCheck {
	return func(u *asUser, m meta) error {
		if uid != -1 && (m.uid != u.uid || uid != m.uid) {
			return errPerm
		}
		if gid != -1 && (m.uid != u.uid || gid != m.gid && !u.inGroup(gid)) {
			return errPerm
		}
		return nil
	}
}

// chtimesCheck returns Chtimes's check: explicit times are the owner's
// to set (EPERM); two zero times change nothing and ask nothing.
func chtimesCheck(atime, mtime time.Time) metaCheck {
	if atime.IsZero() && mtime.IsZero() {
		return nil
	}
	return ownerOnly
}

// mayChangeLocked runs check on the metadata of n at rel as the AsUser
// user; nil without AsUser.
func (l *layer) mayChangeLocked(rel string, n node, check metaCheck) error {
	if l.opts.as == nil {
		return nil
	}
	return l.mayChangeAs(rel, n, check)
}

func (l *layer) mayChangeAs(rel string, n node, check metaCheck) error {
	if check == nil {
		return nil
	}
	return check(l.opts.as, l.nodeMetaLocked(rel, n))
}

// chmodBits returns the mode bits a Chmod to mode leaves on an entry of
// metadata m: as Linux, the setgid bit is dropped when the user is not in
// the entry's group.
func (u *asUser) chmodBits(mode fs.FileMode, m meta) fs.FileMode {
	mode &= permBits
	if u != nil && !u.inGroup(m.gid) {
		mode &^= fs.ModeSetgid
	}
	return mode
}

// stripSetgid drops the setgid bit a new group-executable non-directory
// m asked for in a setgid directory of a group the user is not in (m.gid
// is the directory's group now), as Linux's mode_strip_sgid does. Without
// AsUser (u nil) it does nothing.
func (u *asUser) stripSetgid(m *meta, isDir bool) {
	if u != nil && !isDir && m.perm&(fs.ModeSetgid|0o010) == fs.ModeSetgid|0o010 && !u.inGroup(m.gid) {
		m.perm &^= fs.ModeSetgid
	}
}

// killPrivs drops what a write or truncation by the user drops from a
// regular file's mode, as Linux's file_remove_privs does for a process
// without CAP_FSETID: the setuid bit, and the setgid bit when group
// execution is on or the user is not in the file's group. Without AsUser
// (u nil) it does nothing.
func (u *asUser) killPrivs(m *meta) {
	if u == nil {
		return
	}
	m.perm &^= fs.ModeSetuid
	if m.perm&fs.ModeSetgid != 0 && (m.perm&0o010 != 0 || !u.inGroup(m.gid)) {
		m.perm &^= fs.ModeSetgid
	}
}

// dirOpenErr is the error of opening name as a directory (O_DIRECTORY, as
// os.ReadDir does) when a plain open of it failed with err: under AsUser a
// non-directory the user may not read is ENOTDIR, which the kernel finds
// before the permission.
func (f *Fs) dirOpenErr(name string, err error) error {
	if f.opts.as == nil || errno(err) != errAccess {
		return err
	}
	if fi, serr := f.Stat(name); serr == nil && !fi.IsDir() {
		return pathErr("open", name, errNotDir)
	}
	return err
}
