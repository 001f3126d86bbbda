package kernel

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// specialType returns the layer entry type of a FIFO or socket with the
// given st_mode, or false for any other type.
func specialType(mode uint32) (overlayfs.EntryType, bool) {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return overlayfs.EntryFIFO, true
	case unix.S_IFSOCK:
		return overlayfs.EntrySocket, true
	}
	return 0, false
}

// specialMode is the st_mode type bits of a FIFO or socket entry.
func specialMode(t overlayfs.EntryType) uint32 {
	if t == overlayfs.EntrySocket {
		return unix.S_IFSOCK
	}
	return unix.S_IFIFO
}

// describeType names an st_mode's file type for an error message.
func describeType(mode uint32, rdev uint64) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFCHR:
		return fmt.Sprintf("character device %d:%d", unix.Major(rdev), unix.Minor(rdev))
	case unix.S_IFBLK:
		return fmt.Sprintf("block device %d:%d", unix.Major(rdev), unix.Minor(rdev))
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	}
	return fmt.Sprintf("file type %#o", mode&unix.S_IFMT)
}

// skipError is the error for a file a layer cannot hold, at p.
func skipError(p string, mode uint32, rdev uint64) error {
	return &fs.PathError{Op: "import", Path: p, Err: fmt.Errorf("%s skipped: %w", describeType(mode, rdev), ErrUnsupportedType)}
}

// skippedError is what Import (and the copy fallback) return when they
// skipped files a layer cannot hold and imported everything else: the
// layer has the rest.
type skippedError struct{ errs []error }

func (e *skippedError) Error() string {
	return fmt.Sprintf("kernel: %d path(s) not imported (everything else was): %v", len(e.errs), errors.Join(e.errs...))
}

func (e *skippedError) Unwrap() []error { return e.errs }

// skipped returns the skip errors as one error, or nil for none.
func skipped(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return &skippedError{errs: errs}
}

// commitJournal is the name, directly in the root, that overlayfs's Commit
// keeps for its journal (its journalName).
const commitJournal = ".cowfs-commit"

// reservedError is the skip error of an entry at the root's commitJournal.
func reservedError(p string) error {
	return &fs.PathError{Op: "import", Path: p, Err: fmt.Errorf("skipped: %w", ErrReservedName)}
}
