// Package overlayfs is a copy-on-write [afero.Fs] over a real directory
// tree, the root. Reads pass through to the root; every mutation stays in
// an in-memory layer. To the code using it, the Fs behaves like a writable
// copy of the root: same paths, same errors as package os on Linux. The
// root itself is never written (unless [Fs.Commit] is called).
//
// Afterwards the layer can be listed ([Fs.Changes]), rendered as a git
// patch ([Fs.WriteDiff]; paths in a .git directory, which git apply
// refuses, are left out of it and named in a note line), read entry by entry ([Fs.Layer]), snapshotted and
// forked in O(1) ([Fs.Snapshot], [Fs.Fork]), discarded ([Fs.Reset]) or
// written to the root ([Fs.Commit]).
//
// # Path names
//
// Names are OS paths exactly as os takes them: absolute, or relative to the
// process working directory at the time of the call. The root is made
// absolute and its symlinks resolved once, in [New]. A name is inside the
// root when, cleaned (with the symlinks of its longest existing ancestor
// resolved, so that /var and /private/var style aliases agree), it lies
// under the root. A name that reaches the root's directory, or one of its
// directories, by another path (a bind mount of the root, of a directory
// holding it or of a directory in it) is inside too, at the place it
// reaches: reads and writes through it see and change the layer, as the
// canonical name does, never the real root; ".." from the top of such an
// alias leads to the alias's own parent, as in the kernel. The layer has
// no mount points: an alias of a directory in the root names that path in
// the merged view (after the layer removes or renames the directory, the
// alias follows the path, where a bind mount would hold on to the
// directory), a Remove or Rename of an alias acts on the directory it
// shows, and a rename between an alias and another name in the same root
// stays in the layer, where the kernel says EXDEV. The resolver
// tells an alias by the device, inode and (on Linux) mount ID of the
// directories it walks through anyway, at no extra system call; it reads
// the mount table only where a name crosses into another mount of a
// root's file system. Inside the root, symlinks are resolved component by
// component in the merged view, so a symlink made in the layer works like a
// real one; after 40 symlinks resolution fails with ELOOP.
//
// Reads outside the root pass through to the real file system, unless
// [DenyOutsideReads] is given. Writes outside the root fail with an error
// wrapping [ErrOutsideRoot] (which also matches [fs.ErrPermission]),
// unless [AllowOutsideWrites] is given. This holds for names reaching
// outside through "..", and through symlinks inside the root that point
// outside it. Even with AllowOutsideWrites, the real root is never changed
// from outside. An outside name is resolved once, component by
// component: one that reaches a root by any path (a symlink on the way or
// at its end, a dangling symlink into the root, a bind mount) is written
// in the layer, at the place it reaches. The write itself then acts on
// exactly what was resolved (on Linux: opened with openat2's
// RESOLVE_NO_SYMLINKS and O_NOFOLLOW, and changed through that
// descriptor), so a component swapped for a symlink in between is never
// followed by the kernel: the name is resolved again and the new
// resolution decides. A RemoveAll or Rename of a directory that holds a
// root (RemoveAll(filepath.Dir(root)), "link-to-outside/..") or whose tree
// holds one or an alias of one or of one of its directories (a bind
// mount), compared by device, inode and mount ID, fails before anything
// is touched with a *fs.PathError or *os.LinkError wrapping
// syscall.EBUSY, as the kernel refuses to remove or move a mount point in
// use; a name inside one root that reaches another ([WithRoot]) through a
// symlink or an alias is never written.
//
// [Fs.IOFS] gives an [io/fs] view rooted at the root.
//
// # Semantics
//
// The layer follows the kernel's overlayfs and POSIX. Deleting a lower
// entry leaves a whiteout; RemoveAll of a lower directory hides its whole
// subtree; a directory created where a lower one was deleted is opaque: the
// lower's children never reappear. New files and directories get
// perm &^ umask, as os gives them, owned by the process (or the [AsUser]
// user); the umask and the owner are read from the process when the Fs (or a fork or an extra root
// of it) first creates something, and kept from then on, unless
// [WithUmask] sets the umask. A copy-up keeps mode, mtime and owner;
// Chmod, Chown and Chtimes of a lower entry copy up its metadata only.
// Opening a lower file for writing copies it up lazily: its bytes are read
// once, when something first needs them (a read, a write before the end, a
// truncation, a diff); O_TRUNC never reads them, and appends at the end
// are kept after them unread until then. Rename
// works for lower files and directories (the kernel says EXDEV; afero says
// EPERM); a renamed lower file keeps referring to the lower's bytes until
// written.
// Directory listings merge the layer and the lower and come back sorted by
// name from Readdir, Readdirnames and ReadDir alike. A directory's link
// count is the view's: 2 plus its subdirectories, as ext4, xfs and tmpfs
// count (a lower directory the layer put nothing in reports the lower's
// own), and 0 from a handle on a removed one. A directory's modification
// time moves when an entry is made, removed or renamed in it, as on
// Linux, without putting the directory in the layer: the changes, the
// patch and Commit are as they were; a Chtimes that leaves the mtime
// keeps it, and a handle on a removed directory reports the time it had
// when removed. [Fs.DirTimes] lists those times
// (package kernel writes them into an upper), [Fs.PutDirTime] keeps one
// (package kernel's Import, for the directories the kernel wrote in).
//
// OpenFile takes Linux's flags beyond os's: O_NOFOLLOW fails with ELOOP
// at a final symlink, O_DIRECTORY with ENOTDIR on anything but a
// directory (EINVAL with O_CREATE, as since Linux 6.4), and the access
// mode O_WRONLY|O_RDWR opens for neither reading nor writing (EBADF), as
// the kernel does. A layer file's bytes, holes included, are in memory:
// a Truncate, WriteAt or Write that would make it larger than half the
// machine's memory (tmpfs's default size; 4 GiB where that is not known)
// fails with EFBIG, as os does past its file system's largest file, and
// one whose end overflows an int64 with EINVAL, as Linux checks. Seek
// takes any offset, as on tmpfs (ext4 refuses one past 16 TiB).
//
// # Hard links
//
// [Fs.Link] makes hard links with os.Link's semantics. The names of one
// file share its content and metadata in the layer: a write, truncation,
// Chmod, Chown or Chtimes through one shows through every other; removing
// or renaming one keeps the others; renaming one name onto another of the
// same file does nothing, as POSIX says. The Sys() of a FileInfo is a
// *syscall.Stat_t whose Nlink counts the names in the view (0 on a handle
// whose file has no name left) and whose Ino (device 0, numbers from 1<<62
// up, never a lower file's) is the entry's own, shared only by its links;
// a lower entry reports the lower's device and inode until it is copied up.
// A lower file that already has several names keeps them linked: the
// first change to any of them (a write, a metadata change, a rename, a
// removal, a link) copies up the metadata of every name of it the view
// shows, found by one walk of the root (cached until the next Commit).
// This is what the kernel's overlayfs does with index=on, which keeps the
// names of a copied-up lower file linked (with index=off, the kernel's
// default, a copy-up breaks the link and the other names keep the old
// bytes); we follow index=on because the contract is os on a copy of the
// root, where links hold. The changes list a new name as an addition
// whose [Change].LinkTo names another name of its file; a git patch has
// no hard links, so [Fs.WriteDiff] writes every name's bytes (git apply
// makes independent files); [Fs.Commit] makes real hard links, one inode
// on disk, atomically with the rest. Snapshot, Restore and Fork carry
// links as any other state.
//
// # Permissions
//
// By default nothing is checked: the process may do everything the
// root's owner may (as root does on os). [AsUser](uid, gid, groups...)
// checks every operation as Linux checks it for a process of that
// identity without capabilities, with the lower's real owners and modes
// and the layer's: the owner's, else the group's (primary or
// supplementary), else the others' bits (the kernel's generic_permission:
// the classes do not fall through); search on every directory a name
// walks from the root (EACCES); read or write for an open as its flags
// ask (O_TRUNC asks for write), read to open a directory for listing;
// write and search on the parent to create (open with O_CREATE, Mkdir,
// SymlinkIfPossible, Link), remove, or rename (both parents); in a sticky
// directory only the owner of the entry or of the directory removes or
// renames it (EPERM); a directory moving to another parent needs write on
// itself; Link of a file the user does not own needs it to be a regular
// file, neither setuid nor executable setgid, that the user may read and
// write (fs.protected_hardlinks=1, the usual default: EPERM); Chmod, and
// Chtimes with a time, by the owner only (EPERM), Chmod dropping the
// setgid bit when the user is not in the entry's group; Chown by the
// owner only, keeping the owner and giving the group to one of the user's
// groups (EPERM otherwise; Chown(name, -1, -1) asks nothing). New entries
// are owned by uid and gid, or the parent's group in a setgid directory
// (where a new directory is setgid too, and a new group-executable file
// is not unless the user is in that group); a write or truncation by the
// user drops setuid, and setgid when group execution is on or the user is
// not in the file's group. RemoveAll removes what os.RemoveAll would as
// that user and fails with its first error. The errors come in the
// kernel's order: EEXIST before a parent's write permission, EACCES and
// EPERM before ENOTEMPTY, ENOTDIR and EISDIR of a rename's target before
// the write a moving directory needs. The io/fs view ([Fs.IOFS]) goes
// through the same checks.
//
// Not checked under AsUser: names outside the root (they go to os, which
// checks them as the process), the directories above the root, ACLs and the fs.protected_symlinks,
// protected_regular and protected_fifos rules, and Chtimes with two zero
// times (which Linux lets anyone do, even on a missing name; overlayfs
// treats it as a metadata change of an existing entry). Handles check at
// open, as the kernel does (Readdir's FileInfos need search on the
// directory, as os's lstat of each entry does). The cost when on
// is a lookup of each walked directory's metadata (cached for lower
// directories) and one of the entry's, and a read-only open of a lower
// file takes the general path (BenchmarkAsUserCost: a Stat 1.0x to 1.2x,
// an open and close 1.4x to 1.5x of the same without AsUser); without
// AsUser, one pointer test per operation.
//
// Not kept: access times and directory modification times changing with
// their entries. The layer holds
// no device nodes: a lower character or block device reads, stats and
// deletes as on os, but Chmod, Chown, Chtimes, an open for writing and a
// Rename of it (or of a directory holding it) fail with an error wrapping
// [ErrSpecialFile], leaving it as it is, rather than turn it into a
// regular file.
//
// # Quotas and injected faults
//
// [WithQuota](bytes, inodes) makes the layer fill up as a tmpfs mounted
// with size=bytes,nr_inodes=inodes+1 would (tmpfs counts its root, the
// layer's root is not counted): file data in 4 KiB pages, a page for
// every 4 KiB block written (holes take none), a copied-up file at its
// whole size; an inode per file, directory, symlink, FIFO or socket the
// layer holds, and per extra hard link, as tmpfs charges (whiteouts take
// none); a symlink target longer than 128
// bytes takes a page. A write past the limit writes what fits and fails
// with ENOSPC (a short write; WriteAt then returns 0, as os.File.WriteAt
// does); a create past the inode limit fails with ENOSPC. Truncate,
// Remove, RemoveAll, Reset and Commit free; Snapshot and Restore save and
// restore the count; a Fork counts on its own; [Fs.Usage] reports it.
// A test checks all of it against a real tmpfs after every operation.
//
// [WithFaults](inject) calls inject(op, name) before each operation, op
// as os spells *fs.PathError.Op: open, stat, lstat, mkdir, remove
// (Remove and RemoveAll), rename, symlink, link (given the new name),
// readlink, chmod, chown, chtimes; on handles read, write, seek, stat,
// readdirent, sync, truncate, close. A non-nil error is returned in os's
// shape (an *fs.PathError, or an *os.LinkError for rename, symlink and
// link, wrapping it) and the operation has no effect; a [ShortIO] makes a
// read or write move N bytes first. Handles are wrapped only when
// WithFaults is given: without either option neither costs anything but
// a nil check (BenchmarkOptionCost).
//
// # Concurrency
//
// An Fs is safe for concurrent use by many goroutines. Handles are too: a
// Close racing another call on the handle lets that call finish, as os
// does.
// Mutations are serialized by one lock per root (per Fs, without
// [WithRoot]); reads (Stat, Open for reading, listings) take it shared and
// run in parallel. Two goroutines racing on the first write or append to a lower
// file never lose bytes: the copy-up happens once, under the lock. A lower
// file opened for reading is not put in Go's netpoller (os ends up leaving a
// regular file out too): a lower FIFO or terminal opened for reading without
// O_NONBLOCK blocks a thread in its reads, and its deadlines are not
// supported.
//
// The lower must not change while an Fs uses it: its directories are cached
// as seen once. Commit checks every path it touches (see Commit), and a
// Commit through one Fs of a family (an Fs and its forks) makes all of
// them drop what they saw of the lower before it returns (as do Reset and
// Restore). When the lower changes anyway, each answer is the lower's as
// it was before the change or as it is after, and a listing of a
// directory is what later lookups in it go by: a name a listing showed is
// not denied after it.
//
// # Commit
//
// [Fs.Commit] writes the layer to the root in three steps.
//
// Check: every path the commit touches must still be what the layer saw:
// lower files read for a copy-up, deleted or renamed away (device, inode,
// size, mtime, ctime), the whole subtree of a deleted directory, paths the
// layer creates (still absent), and the parents it writes into (still real
// directories: not a symlink, not a file). On any difference nothing is
// written, and the [*CommitError] (wrapping [ErrConflict], and
// [ErrOutsideRoot] where a swapped-in symlink leads out of the root) names
// every such path.
//
// Stage: the new files, symlinks and directories are written into the
// journal directory <root>/.cowfs-commit/ (a new directory with its whole
// subtree), each file fsynced, holes left as holes; then the intent, the
// list of renames and metadata changes that put them in place, is written
// and fsynced, and renamed to its final name: that rename is the commit
// point. Up to it the tree is untouched.
//
// Apply: the old entries in the way move into the journal, the staged
// entries move into place, modes, owners and times are set, with an fsync
// of the touched directories between those phases; then the journal is
// removed. Every step can tell whether it already ran.
//
// The commit lock: from the conflict check to the journal's removal, a
// Commit holds an exclusive flock on the root directory (no file is
// added for it), in this process or another, through this Fs or any
// other. Commits on one root therefore run one at a time, and one that
// waited checks the tree the other left: it reports the conflict, never
// loses an update. With several roots the locks are taken in the order of
// the roots' paths. A journal on disk whose root nobody holds locked is
// an interrupted commit's; [New] finding a journal while a commit holds
// the lock waits for that commit instead, and [Recover] refuses, changing
// nothing, with an error wrapping [ErrCommitInProgress]. (Without flock,
// on Windows, commits are serialized within the process only.)
//
// Every write goes through an [os.Root] on the root, resolving one
// component at a time, so no symlink, in the layer or swapped in on disk
// before or during the commit, carries a write outside the root; such an
// attempt fails with an error wrapping ErrOutsideRoot.
//
// The guarantee: if the process dies or the machine goes down at any
// moment, [Recover] on the root leaves the tree exactly as it was before
// the commit (interrupted before the commit point) or exactly as the commit
// makes it (after), and removes the journal. [New] refuses a root that
// holds a journal, with an error wrapping [ErrInterruptedCommit]. A commit
// whose staging fails (a full disk, an I/O error, a read-only root: EROFS)
// removes its journal, puts back the root directory's modification
// time, and returns the error with the layer intact; a
// commit refused after its commit point leaves the journal for Recover.
// Surviving power loss relies on the file system keeping fsynced
// operations in order, as ext4, xfs and btrfs do.
//
// The cost: each new or rewritten file is written once, into the journal,
// and fsynced; a file whose metadata alone changed is not rewritten; the
// directories touched are fsynced once per phase: a few times what a loop
// of os.WriteFile with fsync pays (BenchmarkCommit measures both). Files renamed in the layer (which
// still refer to the lower's bytes) are read into memory first. With
// several roots ([WithRoot]), each root is atomic on its own. A path on
// another file system mounted inside the root cannot be renamed into and
// is refused before anything is written.
//
// # Errors
//
// Errors are *[fs.PathError] and *[os.LinkError] carrying the name the
// caller passed (never the host path resolved from it), wrapping the errno
// Linux would give: [syscall.ENOENT], [syscall.ENOTDIR],
// [syscall.ENOTEMPTY], [syscall.EISDIR], [syscall.ELOOP] and so on, so
// errors.Is(err, fs.ErrNotExist) and friends work as with os.
//
// # Costs
//
// The layer is a copy-on-write B-tree keyed by root-relative path: lookups
// are O(log n), Snapshot, Restore and Fork are O(1), Changes is O(layer),
// listing a directory costs the lower's ReadDir plus that directory's layer
// children. Renaming a directory is O(size of its subtree), without reading
// file contents. A lookup that misses in a lower directory costs an lstat
// until the overlay lists the directory's names, at the second miss in a
// small directory (at most 4 KiB) or the 16th in a bigger one; from then
// on a miss there (creating a new file) costs no system call. Stat and
// Lstat lstat a lower name whatever the listing says, as os does: for a
// name that exists the listing would only add a lookup.
//
// # Where things live
//
// fs.go: [Fs], the layer type (one root's state and locks), the family
// (what an Fs and its forks share, the epoch of the lower among it) and
// [New]; roots.go: [WithRoot] and the choice of a name's root; resolve.go:
// the resolver, the only route from a name to a location (symlinks in the
// merged view); cleandirs.go: the layer's entries (pathMap, wrapping the
// B-tree), what they leave free per directory (dirStates: the entries
// directly in a directory by name, which settle a lookup there without a
// search), and the resolver's one fast path (fastLoc) through real lower
// directories free of layer entries; lookup.go: one path in the merged
// view and the one cache of the lower (lowerCache, good for one epoch);
// lowersys_*.go: the lower's lstat and open for reading, in fewer
// allocations and system calls than os's (lstatHost and the resolver's
// lstatNamed, openLower); the rules for
// root-relative paths are package internal/relpath's; node.go: the
// kinds, layer entries and merged-view nodes; blob.go: file contents;
// layer.go: subtrees of the layer and root-relative path helpers;
// copyup.go: copy-up of metadata, and of content when a write needs it;
// ops.go: Stat, Mkdir, Symlink, Readlink, Chmod, Chown, Chtimes, Remove and
// RemoveAll; dirtimes.go: the modification times of the directories the
// layer changed; rootguard.go: outside writes that would remove or move a root;
// outside_*.go: outside writes done on what the resolver decided;
// alias.go, alias_*.go: names that reach a root by another path;
// open.go: opening, and the count of a layer file's open handles (each
// handle holds it; a file opened again keeps it at zero, with the content
// the last handle saw, so that the next open searches nothing); file.go,
// file_dir.go, file_os.go: the handles on a
// layer file, a directory and a real file; file_copy.go: io.Copy between
// handles (os's copy_file_range path); handles.go:
// how open handles follow renames and removals (and a removed
// directory's time); readdir.go and info.go: merged
// listings and FileInfo; readdir_*.go: reading a lower directory (getdents
// and fstatat on Linux, os's calls elsewhere); namesort.go: the order of a
// listing's names;
// rename.go: [Fs.Rename]; link.go, link_*.go: [Fs.Link] and the link
// counts, and the copy-up of a lower file's other names; changes.go,
// between.go and patch.go: [Fs.Changes], [Fs.ChangesBetween] and the git
// patch (patch.go also decides which paths git refuses);
// entries.go: [Fs.Layer] and [Fs.PutEntry]; extfile*.go: content kept by
// reference; snapshot.go: [Fs.Snapshot], [Fs.Restore] and [Fs.Fork];
// commit.go: [Fs.Commit] and its staging; commitlock_*.go: the commit
// lock; conflicts.go: what the layer
// depends on in the lower, and Commit's conflict check; journal.go: the
// commit journal and [Recover]; lowerstate.go: [LowerState]; iofs.go:
// [Fs.IOFS]; errors.go: sentinels and error constructors; umask.go: the
// umask and owner of new entries, read at the first creation; clock.go:
// the times of changes; quota.go: [WithQuota], [Fs.Usage] and the
// counting (its hooks: newBlobLocked, dropBlobLocked, setEntry and
// deleteEntry, the write, truncate and O_TRUNC paths, the creates);
// quota_sites.go: where open handles are, for the directories a removed
// file's handle keeps counted (hooks: handle, Close, unlinkLocked,
// moveLocked);
// faults.go: [WithFaults], [ShortIO] and the handle wrapper; perm.go:
// [AsUser] and its checks (hooks in resolve.go's walk, open.go, ops.go,
// rename.go, link.go, file.go's write and truncate paths, file_dir.go's
// Readdir and iofs.go's ReadDir);
// perm_removeall.go: RemoveAll as that user; sys_*.go,
// device_*.go, mknod_*.go: what differs by platform.
package overlayfs
