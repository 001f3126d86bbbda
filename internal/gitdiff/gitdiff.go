package gitdiff

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
)

// ErrInvalidChange is wrapped by the error Write returns when a Change cannot
// be rendered: a malformed path, a path given twice, a mode that is neither a
// regular file nor a symlink, or two changes that contradict each other (a
// file at "P" and a file under "P/" on the same side).
var ErrInvalidChange = errors.New("gitdiff: invalid change")

// File is one side of a change: a regular file or a symlink.
type File struct {
	// Mode is fs.ModeSymlink|perm for a symlink. For a regular file only the
	// owner's executable bit matters: git records 100755 when it is set and
	// 100644 otherwise. Any other type bit is an error.
	Mode fs.FileMode

	// Content returns the file's bytes, or the symlink's target. Write calls
	// it at most once, and only while it renders this change.
	Content func() ([]byte, error)
}

// Change is the change of one path. Old == nil: created; New == nil: deleted.
// Both non-nil: modified (content and/or mode, or a type change between a
// regular file and a symlink, which is rendered as a deletion plus a creation
// of the same path, as git does).
type Change struct {
	// Path is slash-separated, relative to the root, without a leading
	// slash and without "." or ".." or empty elements.
	Path     string
	Old, New *File
}

// Git's object modes.
const (
	modeRegular    = 0o100644
	modeExecutable = 0o100755
	modeSymlink    = 0o120000
)

// gitMode maps a File's mode to git's, as git's canon_mode does.
func gitMode(m fs.FileMode) (uint32, error) {
	switch m.Type() {
	case 0:
		if m&0o100 != 0 {
			return modeExecutable, nil
		}
		return modeRegular, nil
	case fs.ModeSymlink:
		return modeSymlink, nil
	}
	return 0, fmt.Errorf("mode %v is neither a regular file nor a symlink", m)
}

// Write renders changes as one git patch in an order `git apply` accepts:
// path order, except that where a path changes between directory and file,
// every deletion under "P/" comes before the creation of "P" (git apply does
// not reorder). Changes with Old and New equal (same bytes and same git mode)
// produce nothing. The caller may pass changes in any order; changes is not
// modified.
//
// Write stops at the first error: an invalid change (wrapping
// ErrInvalidChange), an error from a Content function, or a write error.
// What was written before the error is not a complete patch.
func Write(w io.Writer, changes []Change) error {
	sorted := slices.Clone(changes)
	slices.SortFunc(sorted, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	if err := validate(sorted); err != nil {
		return err
	}
	ew := &errWriter{w: w}
	bw := bufio.NewWriterSize(ew, 64<<10)
	e := encoder{w: bw}
	done := make([]bool, len(sorted))
	for i := range sorted {
		if done[i] {
			continue
		}
		c := &sorted[i]
		if c.New != nil {
			// Deletions under "P/" go first, so that git apply sees the
			// directory emptied before a file or symlink "P" is created.
			prefix := c.Path + "/"
			j, _ := slices.BinarySearchFunc(sorted[i+1:], prefix, func(c Change, p string) int {
				return strings.Compare(c.Path, p)
			})
			for j += i + 1; j < len(sorted) && strings.HasPrefix(sorted[j].Path, prefix); j++ {
				if err := e.change(&sorted[j]); err != nil {
					return err
				}
				done[j] = true
			}
		}
		if err := e.change(c); err != nil {
			return err
		}
		done[i] = true
		if ew.err != nil {
			return ew.err
		}
	}
	return bw.Flush()
}

// errWriter remembers the first write error so that Write can stop early.
type errWriter struct {
	w   io.Writer
	err error
}

func (ew *errWriter) Write(p []byte) (int, error) {
	if ew.err != nil {
		return 0, ew.err
	}
	n, err := ew.w.Write(p)
	ew.err = err
	return n, err
}

// validate checks paths, modes and the consistency of sorted changes.
func validate(sorted []Change) error {
	// The paths that are files on the old and on the new side: a path
	// under one of them on the same side is a contradiction.
	oldFiles, newFiles := map[string]bool{}, map[string]bool{}
	for i := range sorted {
		c := &sorted[i]
		if err := checkPath(c.Path); err != nil {
			return fmt.Errorf("%w: path %q: %v", ErrInvalidChange, c.Path, err)
		}
		if i > 0 && sorted[i-1].Path == c.Path {
			return fmt.Errorf("%w: path %q given twice", ErrInvalidChange, c.Path)
		}
		for _, f := range []*File{c.Old, c.New} {
			if f == nil {
				continue
			}
			if _, err := gitMode(f.Mode); err != nil {
				return fmt.Errorf("%w: %q: %v", ErrInvalidChange, c.Path, err)
			}
			if f.Content == nil {
				return fmt.Errorf("%w: %q: nil Content", ErrInvalidChange, c.Path)
			}
		}
		for _, s := range []struct {
			f     *File
			files map[string]bool
			side  string
		}{{c.Old, oldFiles, "old"}, {c.New, newFiles, "new"}} {
			if s.f == nil {
				continue
			}
			// Sorted order puts every ancestor before its descendants.
			for i := range len(c.Path) {
				if c.Path[i] == '/' && s.files[c.Path[:i]] {
					return fmt.Errorf("%w: %q is under %q, a file on the %s side", ErrInvalidChange, c.Path, c.Path[:i], s.side)
				}
			}
			s.files[c.Path] = true
		}
	}
	return nil
}

// checkPath rejects names git cannot address relative to a root.
func checkPath(p string) error {
	if p == "" {
		return errors.New("empty")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return errors.New("contains NUL")
	}
	for elem := range strings.SplitSeq(p, "/") {
		switch elem {
		case "":
			return errors.New("empty element or leading or trailing slash")
		case ".", "..":
			return errors.New(`"." or ".." element`)
		}
	}
	return nil
}

// side is one loaded side of a change.
type side struct {
	mode uint32
	data []byte
}

func load(path string, f *File) (*side, error) {
	if f == nil {
		return nil, nil
	}
	mode, _ := gitMode(f.Mode) // validated
	data, err := f.Content()
	if err != nil {
		return nil, fmt.Errorf("gitdiff: reading %q: %w", path, err)
	}
	return &side{mode: mode, data: data}, nil
}

type encoder struct {
	w       *bufio.Writer
	scratch []byte
	differ  lineDiffer
	linesA  []string
	linesB  []string
}

func (e *encoder) change(c *Change) error {
	old, err := load(c.Path, c.Old)
	if err != nil {
		return err
	}
	new, err := load(c.Path, c.New)
	if err != nil {
		return err
	}
	switch {
	case old == nil && new == nil:
		return nil
	case old != nil && new != nil && (old.mode == modeSymlink) != (new.mode == modeSymlink):
		// A type change: git apply wants a deletion and a creation.
		if err := e.file(c.Path, old, nil); err != nil {
			return err
		}
		return e.file(c.Path, nil, new)
	}
	return e.file(c.Path, old, new)
}

// file renders one diff --git section; old and new are not both nil and
// are of the same type when both are present.
func (e *encoder) file(path string, old, new *side) error {
	if old != nil && new != nil && old.mode == new.mode && bytes.Equal(old.data, new.data) {
		return nil
	}
	w := e.w
	aName := quoteName("a/", path)
	bName := quoteName("b/", path)
	w.WriteString("diff --git ")
	w.WriteString(aName)
	w.WriteByte(' ')
	w.WriteString(bName)
	w.WriteByte('\n')
	switch {
	case old == nil:
		fmt.Fprintf(w, "new file mode %06o\n", new.mode)
	case new == nil:
		fmt.Fprintf(w, "deleted file mode %06o\n", old.mode)
	case old.mode != new.mode:
		fmt.Fprintf(w, "old mode %06o\nnew mode %06o\n", old.mode, new.mode)
		if bytes.Equal(old.data, new.data) {
			return nil
		}
	}
	var oldData, newData []byte
	if old != nil {
		oldData = old.data
	}
	if new != nil {
		newData = new.data
	}
	binary := isBinary(oldData) || isBinary(newData)
	oldID, newID := nullID, nullID
	if old != nil {
		oldID = blobID(oldData)
	}
	if new != nil {
		newID = blobID(newData)
	}
	// Binary patches need full ids: git apply checks both.
	idLen := 7
	if binary {
		idLen = len(nullID)
	}
	w.WriteString("index ")
	w.WriteString(oldID[:idLen])
	w.WriteString("..")
	w.WriteString(newID[:idLen])
	if old != nil && new != nil && old.mode == new.mode {
		fmt.Fprintf(w, " %06o", old.mode)
	}
	w.WriteByte('\n')
	if binary {
		w.WriteString("GIT binary patch\n")
		if err := e.literal(newData); err != nil {
			return err
		}
		return e.literal(oldData)
	}
	if len(oldData) == 0 && len(newData) == 0 {
		return nil // a new or deleted empty file has no hunk
	}
	if old == nil {
		w.WriteString("--- /dev/null\n")
	} else {
		w.WriteString("--- ")
		w.WriteString(aName)
		if strings.IndexByte(path, ' ') >= 0 {
			w.WriteByte('\t') // as git: tells where an unquoted name ends
		}
		w.WriteByte('\n')
	}
	if new == nil {
		w.WriteString("+++ /dev/null\n")
	} else {
		w.WriteString("+++ ")
		w.WriteString(bName)
		if strings.IndexByte(path, ' ') >= 0 {
			w.WriteByte('\t')
		}
		w.WriteByte('\n')
	}
	e.hunks(oldData, newData)
	return nil
}
