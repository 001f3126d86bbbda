package overlayfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// journalName is the directory, directly in the root, where Commit stages
// the new contents and writes its intent, and where Recover and New look
// for an unfinished commit. Only a holder of the root's commit lock (see
// lockRoot) makes or removes it: a journal seen while nobody holds the lock
// is an interrupted commit's.
const journalName = ".cowfs-commit"

// journalFormat names the intent format; Recover refuses any other.
const journalFormat = "cowfs-commit 1"

// The files and directories of a journal, relative to the root.
var (
	journalStage  = path.Join(journalName, "stage")  // stage/N: a new file, symlink or directory tree
	journalTrash  = path.Join(journalName, "trash")  // trash/N: what a step moved out of the way
	journalIntent = path.Join(journalName, "intent") // present: the commit point was passed
	journalTemp   = path.Join(journalName, "intent.tmp")
)

// stepOp is what one step of an intent does.
type stepOp string

const (
	opTrash stepOp = "trash" // rename Path to trash/N (done once trash/N exists)
	opPlace stepOp = "place" // rename stage/N to Path (done once stage/N is gone)
	opMeta  stepOp = "meta"  // set owner, mode and time of Path (idempotent)
)

// step is one step of an intent. Steps run in order: every trash, then every
// place, then every meta; a barrier of fsyncs separates the phases, so a
// step of a later phase is never on disk without all of the earlier ones.
type step struct {
	Op    stepOp      `json:"op"`
	Path  string      `json:"path"` // slash-separated, relative to the root; "." is the root
	N     int         `json:"n,omitempty"`
	Mode  fs.FileMode `json:"mode,omitempty"`  // meta: permission bits plus setuid, setgid, sticky
	UID   int         `json:"uid,omitempty"`   // meta: -1 keeps the owner
	GID   int         `json:"gid,omitempty"`   //
	MTime int64       `json:"mtime,omitempty"` // meta: Unix nanoseconds; 0 keeps the time
	Link  bool        `json:"link,omitempty"`  // meta of a symlink: owner only
}

type intent struct {
	Format string `json:"format"`
	Steps  []step `json:"steps"`
}

// faultHook lets tests fail (or stop) a commit before a given write: op is
// "stage", "seal", "trash", "place", "meta" or "finish".
type faultHook func(op, rel string) error

// journal is one commit's staging area and intent on one root.
type journal struct {
	rt     *os.Root
	in     intent
	n      int             // last staging number used
	synced map[string]bool // directories to fsync at the end of a phase
	hook   faultHook
	mtime  time.Time // the root's before the journal was made; restored by abort when set
}

// osName is the name os.Root takes for a root-relative slash path.
func osName(rel string) string {
	if rel == "" {
		return "."
	}
	return filepath.FromSlash(rel)
}

// openJournal creates the journal of a new commit on root.
func openJournal(root string, hook faultHook) (*journal, error) {
	rt, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	j := &journal{rt: rt, in: intent{Format: journalFormat}, synced: map[string]bool{}, hook: hook}
	if fi, err := rt.Stat("."); err == nil {
		j.mtime = fi.ModTime()
	}
	if err := rt.Mkdir(journalName, 0o700); err != nil {
		rt.Close()
		if errors.Is(err, fs.ErrExist) {
			return nil, interruptedErr("commit", root)
		}
		return nil, err
	}
	for _, d := range []string{journalStage, journalTrash} {
		if err := rt.Mkdir(osName(d), 0o700); err != nil {
			j.abort()
			return nil, err
		}
	}
	return j, nil
}

// interruptedErr says that root holds an unfinished journal.
func interruptedErr(op, root string) error {
	return pathErr(op, root, fmt.Errorf("%w: unfinished journal %s; call overlayfs.Recover on the root",
		ErrInterruptedCommit, journalName))
}

// checkJournal returns an error wrapping ErrInterruptedCommit, naming name,
// when the canonical root holds a journal. Cost: one Lstat, which also
// tells whether root is a directory: isDir is set when the lookup in it
// found nothing (ENOENT, where a non-directory gives ENOTDIR).
func checkJournal(op, name, root string) (isDir bool, err error) {
	_, err = os.Lstat(filepath.Join(root, journalName))
	if err == nil {
		if liveJournal(root) {
			return true, nil
		}
		return true, interruptedErr(op, name)
	}
	return errno(err) == errNoEnt, nil
}

// liveJournal reports whether the journal found in root belonged to a
// commit in progress, which it waits out: a commit holds the root's lock
// until its journal is gone, and a journal still there once the lock is
// free has lost its owner. Cost: an open and a flock, only where a
// journal was seen.
func liveJournal(root string) bool {
	lock, err := lockRoot(root, false, true)
	if err != nil {
		return false
	}
	defer lock.unlock()
	_, err = os.Lstat(filepath.Join(root, journalName))
	return errors.Is(err, fs.ErrNotExist)
}

func (j *journal) fault(op, rel string) error {
	if j.hook == nil {
		return nil
	}
	return j.hook(op, rel)
}

// next returns a fresh staging number.
func (j *journal) next() int {
	j.n++
	return j.n
}

func stageName(n int) string { return path.Join(journalStage, fmt.Sprint(n)) }
func trashName(n int) string { return path.Join(journalTrash, fmt.Sprint(n)) }

// stageDir creates an empty directory at rel inside the stage; its mode,
// owner and time come with a meta step once it is in place.
func (j *journal) stageDir(rel string) error {
	if err := j.fault("stage", rel); err != nil {
		return err
	}
	j.synced[rel] = true
	return j.rt.Mkdir(osName(rel), 0o700)
}

// stageFile creates a file at rel inside the stage, has write fill it,
// gives it its metadata and syncs it.
func (j *journal) stageFile(rel string, m meta, write func(*os.File) error) error {
	if err := j.fault("stage", rel); err != nil {
		return err
	}
	fh, err := j.rt.OpenFile(osName(rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = write(fh)
	if err == nil && m.uid >= 0 && m.gid >= 0 {
		if cerr := fh.Chown(m.uid, m.gid); cerr != nil && !errors.Is(cerr, syscall.EPERM) {
			err = cerr
		}
	}
	if err == nil {
		err = fh.Chmod(fileMode(m.perm)) // after chown, which clears setuid
	}
	if err == nil && !m.mtime.IsZero() {
		err = j.rt.Chtimes(osName(rel), time.Time{}, m.mtime)
	}
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

// stageSpecial creates a FIFO or socket node of kind k at rel inside the
// stage; its mode, owner and time come with a meta step once it is in place.
func (j *journal) stageSpecial(rel string, k kind) error {
	if err := j.fault("stage", rel); err != nil {
		return err
	}
	return mknodIn(j.rt, osName(rel), k == kindSocket)
}

// stageSymlink creates a symlink at rel inside the stage.
func (j *journal) stageSymlink(rel, target string, m meta) error {
	if err := j.fault("stage", rel); err != nil {
		return err
	}
	if err := j.rt.Symlink(target, osName(rel)); err != nil {
		return err
	}
	return lchown(j.rt, rel, m)
}

func lchown(rt *os.Root, rel string, m meta) error {
	if m.uid < 0 || m.gid < 0 {
		return nil
	}
	if err := rt.Lchown(osName(rel), m.uid, m.gid); err != nil && !errors.Is(err, syscall.EPERM) {
		return err
	}
	return nil
}

func (j *journal) add(s step) { j.in.Steps = append(j.in.Steps, s) }

// metaStep is the step that gives rel the metadata m.
func metaStep(rel string, m meta, link bool) step {
	s := step{Op: opMeta, Path: osSlash(rel), Mode: m.perm, UID: m.uid, GID: m.gid, Link: link}
	if !m.mtime.IsZero() {
		s.MTime = m.mtime.UnixNano()
	}
	return s
}

// osSlash is rel as an intent records it: "." for the root.
func osSlash(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// seal makes the staged contents and the intent durable and then passes
// the commit point: from the rename of the intent on, Recover rolls the
// commit forward.
func (j *journal) seal() error {
	if err := j.syncDirs(); err != nil {
		return err
	}
	// Phases in their order, each in its own order (see step).
	slices.SortStableFunc(j.in.Steps, func(a, b step) int { return phase(a.Op) - phase(b.Op) })
	if i := slices.IndexFunc(j.in.Steps, func(s step) bool { return s.Op == opMeta }); i >= 0 {
		slices.Reverse(j.in.Steps[i:]) // deepest first: a directory's time after its children's changes
	}
	data, err := json.Marshal(j.in)
	if err != nil {
		return err
	}
	if err := j.fault("seal", journalIntent); err != nil {
		return err
	}
	fh, err := j.rt.OpenFile(osName(journalTemp), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = fh.Write(data)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := j.rt.Rename(osName(journalTemp), osName(journalIntent)); err != nil {
		return err
	}
	return syncDir(j.rt, journalName)
}

func phase(op stepOp) int {
	switch op {
	case opTrash:
		return 0
	case opPlace:
		return 1
	}
	return 2
}

// syncDirs fsyncs the directories noted since the last call, and the
// journal's own.
func (j *journal) syncDirs() error {
	dirs := []string{journalStage, journalTrash, journalName, ""}
	for d := range j.synced {
		dirs = append(dirs, d)
	}
	clear(j.synced)
	slices.Sort(dirs)
	slices.Reverse(dirs) // children first
	for _, d := range slices.Compact(dirs) {
		if err := syncDir(j.rt, d); err != nil {
			return err
		}
	}
	return nil
}

// syncDir fsyncs the directory rel.
func syncDir(rt *os.Root, rel string) error {
	d, err := rt.Open(osName(rel))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil // a file system that cannot sync directories
	}
	return err
}

// apply runs the intent's steps. Each step can tell whether it already ran,
// so apply can be repeated after an interruption at any point (Recover).
func (j *journal) apply() error {
	cur := opTrash
	for _, s := range j.in.Steps {
		if s.Op != cur {
			if err := j.syncDirs(); err != nil { // the phase barrier
				return err
			}
			cur = s.Op
		}
		if err := j.applyStep(s); err != nil {
			return err
		}
	}
	return j.syncDirs()
}

func (j *journal) applyStep(s step) error {
	name := osName(s.Path)
	if err := j.fault(string(s.Op), s.Path); err != nil {
		return err
	}
	switch s.Op {
	case opTrash:
		if _, err := j.rt.Lstat(osName(trashName(s.N))); err == nil {
			return nil
		}
		if _, err := j.rt.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		j.synced[path.Dir(s.Path)] = true
		return escapeErr(j.rt.Rename(name, osName(trashName(s.N))))
	case opPlace:
		if _, err := j.rt.Lstat(osName(stageName(s.N))); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		j.synced[path.Dir(s.Path)] = true
		return escapeErr(j.rt.Rename(osName(stageName(s.N)), name))
	case opMeta:
		if _, err := j.rt.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return nil // removed by someone else since: nothing to give metadata to
		}
		m := meta{perm: s.Mode, uid: s.UID, gid: s.GID}
		if err := lchown(j.rt, s.Path, m); err != nil {
			return escapeErr(err)
		}
		if s.Link {
			return nil // symlink modes are fixed; times need AT_SYMLINK_NOFOLLOW
		}
		if err := j.rt.Chmod(name, fileMode(s.Mode)); err != nil {
			return escapeErr(err)
		}
		if s.MTime != 0 {
			t := time.Unix(0, s.MTime)
			if err := j.rt.Chtimes(name, time.Time{}, t); err != nil {
				return escapeErr(err)
			}
		}
		fi, err := j.rt.Lstat(name)
		switch {
		case err != nil:
		case fi.IsDir():
			j.synced[s.Path] = true
		case fi.Mode().IsRegular():
			return syncFile(j.rt, name)
		default:
			// A FIFO or socket cannot be opened to fsync it (a FIFO's
			// open blocks, a socket's fails); its directory's fsync
			// commits the file system's journal, inode changes included.
			j.synced[path.Dir(s.Path)] = true
		}
	}
	return nil
}

// syncFile fsyncs a file whose metadata changed in place.
func syncFile(rt *os.Root, name string) error {
	fh, err := rt.OpenFile(name, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return nil
		}
		return err
	}
	err = fh.Sync()
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

// escapeErr turns os.Root's refusal of a path that leaves the root into an
// error wrapping ErrOutsideRoot. os does not export that error, only its
// text.
func escapeErr(err error) error {
	const escapes = "path escapes from parent"
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == escapes:
		return &fs.PathError{Op: pe.Op, Path: pe.Path, Err: ErrOutsideRoot}
	case errors.As(err, &le) && le.Err != nil && le.Err.Error() == escapes:
		return &os.LinkError{Op: le.Op, Old: le.Old, New: le.New, Err: ErrOutsideRoot}
	}
	return err
}

// finish removes an applied journal: the intent first, durably, so that a
// crash during the cleanup cannot replay steps over the new tree.
func (j *journal) finish() error {
	if err := j.fault("finish", journalIntent); err != nil {
		return err
	}
	if err := j.rt.Remove(osName(journalIntent)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := syncDir(j.rt, journalName); err != nil {
		return err
	}
	j.mtime = time.Time{} // the commit's own changes to the root stand
	return j.abort()
}

// abort removes the journal without applying it (before the commit point,
// the tree was never touched), puts back the root's modification time when
// the journal knows it, and closes the root.
func (j *journal) abort() error {
	defer j.rt.Close()
	// The stage may hold directories without write permission for their
	// owner: os.RemoveAll would stop there.
	unlockTree(j.rt, journalName)
	if err := j.rt.RemoveAll(journalName); err != nil {
		return err
	}
	if !j.mtime.IsZero() {
		// A commit that wrote nothing leaves no trace, not even in the
		// root's modification time.
		j.rt.Chtimes(".", time.Time{}, j.mtime)
	}
	return syncDir(j.rt, "")
}

// unlockTree gives the owner write and search permission on the
// directories under rel, so that a non-root process can remove them.
func unlockTree(rt *os.Root, rel string) {
	fs.WalkDir(rt.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o700 != 0o700 {
				rt.Chmod(osName(p), fi.Mode().Perm()|0o700)
			}
		}
		return nil
	})
}

// Recover finishes or undoes a Commit on root that was interrupted (the
// process killed, the machine down, a write refused after the commit
// point). If the interrupted commit had passed its commit point (its intent
// was durably written), Recover rolls it forward: the tree becomes exactly
// the one Commit was writing. Otherwise it removes the staging: the tree is
// exactly the one before the Commit, which never touched it. Either way
// the journal is gone afterwards. Recover is idempotent: it can itself be
// interrupted and run again. Without a journal it does nothing.
//
// Recover takes the root's commit lock: while a Commit (of this process or
// another) holds it, Recover changes nothing and returns an error wrapping
// [ErrCommitInProgress].
func Recover(root string) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return pathErr("recover", root, err)
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fixErr("recover", root, err)
	}
	return recoverRoot(canon, nil)
}

func recoverRoot(root string, hook faultHook) error {
	lock, err := lockRoot(root, true, false)
	if err != nil {
		return pathErr("recover", root, err)
	}
	defer lock.unlock()
	rt, err := os.OpenRoot(root)
	if err != nil {
		return fixErr("recover", root, err)
	}
	j := &journal{rt: rt, synced: map[string]bool{}, hook: hook}
	if _, err := rt.Lstat(journalName); errors.Is(err, fs.ErrNotExist) {
		rt.Close()
		return nil
	}
	data, err := rt.ReadFile(osName(journalIntent))
	if errors.Is(err, fs.ErrNotExist) {
		if err := j.abort(); err != nil {
			return pathErr("recover", root, err)
		}
		return nil
	}
	if err == nil {
		err = json.Unmarshal(data, &j.in)
	}
	if err == nil && j.in.Format != journalFormat {
		err = fmt.Errorf("unknown journal format %q", j.in.Format)
	}
	if err == nil {
		err = j.apply()
	}
	if err == nil {
		return j.finish()
	}
	rt.Close()
	return pathErr("recover", root, err)
}
