package overlayfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrOutsideRoot is wrapped by the error of a write to a path outside the
// root under the default policy, and matched by the error of a write that a
// name in one root reaches into another (see WithRoot) under any policy.
// errors.Is(err, fs.ErrPermission) is true for it as well, so code written
// against os treats it as a permission failure.
var ErrOutsideRoot error = outsideRootError{}

// ErrConflict is wrapped by the error of Commit when a lower file the layer
// depends on changed on disk since the layer read it.
var ErrConflict = errors.New("overlayfs: lower changed since it was read")

// ErrSpecialFile is wrapped by the error of an open that would do I/O on a
// FIFO the layer holds, or open any FIFO for writing: the layer keeps a
// FIFO's type and metadata, not a pipe, and a write would leave the
// layer (a unix socket fails to open with ENXIO, as on os); and by the error of an operation that would copy a lower
// character or block device into the layer (Chmod, Chown, Chtimes, an open
// for writing, a Rename of it or of a directory holding it), which holds
// no device nodes. errors.Is(err, errors.ErrUnsupported) is true for it as
// well.
var ErrSpecialFile error = specialFileError{}

// errDeviceNode is the error of an operation that would copy a lower
// character or block device into the layer, which holds no device nodes;
// it matches ErrSpecialFile (and errors.ErrUnsupported).
var errDeviceNode error = deviceNodeError{}

type deviceNodeError struct{}

func (deviceNodeError) Error() string {
	return "overlayfs: a device node cannot be copied up into the layer"
}

func (deviceNodeError) Is(target error) bool {
	return target == ErrSpecialFile || target == errors.ErrUnsupported
}

type specialFileError struct{}

func (specialFileError) Error() string {
	return "overlayfs: a FIFO is opened only read-only, on the lower"
}

func (specialFileError) Is(target error) bool { return target == errors.ErrUnsupported }

// ErrInterruptedCommit is wrapped by the error of New (and of Commit) on a
// root that holds the journal of an unfinished Commit, and by the error of
// a Commit stopped after its commit point. Recover on the root finishes or
// undoes that commit.
var ErrInterruptedCommit = errors.New("overlayfs: interrupted commit")

// ErrCommitInProgress is wrapped by the error of Recover on a root where a
// Commit (in this process or another) holds the commit lock: its journal is
// not interrupted, only unfinished. It matches [syscall.EBUSY] too.
var ErrCommitInProgress error = commitBusyError{}

type commitBusyError struct{}

func (commitBusyError) Error() string        { return "overlayfs: a commit is in progress on the root" }
func (commitBusyError) Is(target error) bool { return target == syscall.EBUSY }

// errOtherRoot is the error of a write that a name inside one root of an
// Fs reaches into another root (WithRoot) through a symlink or an alias:
// that root's layer is written only through names the Fs gives to it, so
// the write is refused, whatever the outside policy. It matches
// ErrOutsideRoot (and fs.ErrPermission).
var errOtherRoot error = otherRootError{}

type otherRootError struct{}

func (otherRootError) Error() string {
	return "write into another overlay root through this one"
}

func (otherRootError) Is(target error) bool {
	return target == ErrOutsideRoot || target == fs.ErrPermission
}

// errOutsideRead is the error of a read outside the root under
// DenyOutsideReads. It matches ErrOutsideRoot (and fs.ErrPermission) but
// says what was refused: a read, not a write.
var errOutsideRead error = outsideReadError{}

type outsideReadError struct{}

func (outsideReadError) Error() string { return "read outside the overlay root (DenyOutsideReads)" }

func (outsideReadError) Is(target error) bool {
	return target == ErrOutsideRoot || target == fs.ErrPermission
}

// outsideErr is the error of an open outside the root that the policy
// refuses: a read's under DenyOutsideReads, a write's otherwise.
func outsideErr(flag int) error {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) == 0 {
		return errOutsideRead
	}
	return ErrOutsideRoot
}

type outsideRootError struct{}

func (outsideRootError) Error() string { return "write outside the overlay root" }

func (outsideRootError) Is(target error) bool { return target == fs.ErrPermission }

// outsideErr is the error of op on name, outside the root under the
// default policy. For a relative name, most often a test that writes
// "gen.txt" from the package directory, the error says where the name was
// taken from, the root, and how to name a file in it; it matches
// ErrOutsideRoot and fs.ErrPermission all the same.
func (l *layer) outsideErr(op, name string) error {
	if filepath.IsAbs(name) {
		return pathErr(op, name, ErrOutsideRoot)
	}
	cwd, _ := os.Getwd()
	return pathErr(op, name, relOutsideError{cwd: cwd, root: l.root})
}

// relOutsideError is ErrOutsideRoot for a relative name.
type relOutsideError struct{ cwd, root string }

func (e relOutsideError) Error() string {
	return fmt.Sprintf("write outside the overlay root: a relative name is taken from the working directory %s, "+
		"not from the root %s; name the file under the root (filepath.Join(root, name); in a test env.Path(name) "+
		"or env.Root()), or start the test in the root (helpers.Chdir())", e.cwd, e.root)
}

func (relOutsideError) Is(target error) bool {
	return target == ErrOutsideRoot || target == fs.ErrPermission
}

// errNegativeOffset is what os says for ReadAt/WriteAt at a negative offset;
// it also matches syscall.EINVAL.
var errNegativeOffset error = negativeOffsetError{}

type negativeOffsetError struct{}

func (negativeOffsetError) Error() string        { return "negative offset" }
func (negativeOffsetError) Is(target error) bool { return target == syscall.EINVAL }

// errFileClosing is what os says when a closed handle is listed: not
// os.ErrClosed, as poll's error is not translated on that path.
var errFileClosing = errors.New("use of closed file")

// errWriteAtInAppendMode mirrors os's error for WriteAt on an O_APPEND handle.
var errWriteAtInAppendMode = errors.New("os: invalid use of WriteAt on file opened with O_APPEND")

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

func linkErr(op, oldname, newname string, err error) error {
	return &os.LinkError{Op: op, Old: oldname, New: newname, Err: err}
}

// asLinkErr turns a resolver error into the LinkError rename reports.
func asLinkErr(op, oldname, newname string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return linkErr(op, oldname, newname, err)
}

// fixErr rewrites the path of an error returned by os for a host path into
// the name the caller passed, so errors never leak the resolved host path.
func fixErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if op == "" {
			op = pe.Op
		}
		return &fs.PathError{Op: op, Path: name, Err: pe.Err}
	}
	return err
}

// nameErr reports err, a bare errno or an error of os for a host path, as
// a *fs.PathError for the caller's name.
func nameErr(op, name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: op, Path: name, Err: pe.Err}
	}
	return pathErr(op, name, err)
}

// errno returns the syscall.Errno inside err, or 0.
func errno(err error) syscall.Errno {
	e, _ := errors.AsType[syscall.Errno](err) // unlike errors.As, no allocation
	return e
}
