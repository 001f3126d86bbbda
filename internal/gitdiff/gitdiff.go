package gitdiff

import (
	"bufio"
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
	// it at most once: while it renders this change, or, for a deletion or
	// creation, before writing anything when the changes hold both (to
	// detect renames).
	Content func() ([]byte, error)

	// Open, when set for a regular file, streams the same bytes as
	// Content, Size of them. A file of 1 MiB or more with Open is read
	// through it in chunks: if it holds a NUL byte it is hashed, compared
	// and written into the binary patch chunk by chunk, never loaded whole
	// (Content is not called); a text file is loaded with Content, to be
	// diffed by lines. Open may be called several times.
	Open func() (io.ReadCloser, error)
	Size int64
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

// Write renders changes as one git patch in an order `git apply` accepts,
// with a deletion and a creation written as a rename where git would find
// one (see the package documentation): path order (a rename at its new
// path), except that where a path changes between directory and file,
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
	pre, renames, err := detectRenames(sorted)
	if err != nil {
		return err
	}
	renamedFrom := make(map[int]bool, len(renames))
	for _, r := range renames {
		renamedFrom[r.src] = true
	}
	// emit renders change j: nothing for the source of a rename (its
	// destination carries it), the rename at its destination.
	emit := func(j int) error {
		if renamedFrom[j] {
			return nil
		}
		if r, ok := renames[j]; ok {
			return e.rename(sorted[r.src].Path, sorted[j].Path, pre[r.src], pre[j], r.score)
		}
		return e.change(&sorted[j], pre[j])
	}
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
				if err := emit(j); err != nil {
					return err
				}
				done[j] = true
			}
		}
		if err := emit(i); err != nil {
			return err
		}
		done[i] = true
		if ew.err != nil {
			return ew.err
		}
	}
	return bw.Flush()
}

// detectRenames loads the deletions and creations, when there are both,
// and pairs them as git does (see rename.go). pre holds the loaded side
// of each of them by index (the old side of a deletion, the new side of
// a creation), so that no Content is called twice.
func detectRenames(sorted []Change) (pre map[int]*side, renames map[int]rename, err error) {
	var srcs, dsts []*candidate
	for i := range sorted {
		c := &sorted[i]
		switch {
		case c.Old != nil && c.New == nil:
			// git apply learns a symlink's mode from a pure rename only
			// when it reads the file, after checking that nothing the
			// patch writes lies beyond a symlink: a symlink renamed away
			// from "P" while "P/x" is written would fail there.
			if c.Old.Mode.Type() == fs.ModeSymlink && underAny(sorted, i, func(c *Change) bool { return c.New != nil }) {
				continue
			}
			srcs = append(srcs, &candidate{idx: i, path: c.Path})
		case c.Old == nil && c.New != nil:
			// The same, for git apply -R.
			if c.New.Mode.Type() == fs.ModeSymlink && underAny(sorted, i, func(c *Change) bool { return c.Old != nil }) {
				continue
			}
			dsts = append(dsts, &candidate{idx: i, path: c.Path})
		}
	}
	if len(srcs) == 0 || len(dsts) == 0 {
		return nil, nil, nil
	}
	pre = make(map[int]*side, len(srcs)+len(dsts))
	for _, cs := range [][]*candidate{srcs, dsts} {
		for _, cd := range cs {
			f := sorted[cd.idx].Old
			if f == nil {
				f = sorted[cd.idx].New
			}
			if cd.s, err = load(cd.path, f); err != nil {
				return nil, nil, err
			}
			if cd.id, err = cd.s.blobID(); err != nil {
				return nil, nil, fmt.Errorf("gitdiff: reading %q: %w", cd.path, err)
			}
			pre[cd.idx] = cd.s
		}
	}
	return pre, findRenames(srcs, dsts), nil
}

// underAny reports whether some change under sorted[i].Path+"/" satisfies f.
func underAny(sorted []Change, i int, f func(*Change) bool) bool {
	prefix := sorted[i].Path + "/"
	for j := i + 1; j < len(sorted) && sorted[j].Path < prefix+"\xff"; j++ {
		if strings.HasPrefix(sorted[j].Path, prefix) && f(&sorted[j]) {
			return true
		}
	}
	return false
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

// side is one loaded side of a change: its bytes, or for a big binary
// file, the File to stream them from (see File.Open).
type side struct {
	mode uint32
	data []byte
	big  *File
	size int64  // of big
	id   string // blob id, once computed
}

func load(path string, f *File) (*side, error) {
	if f == nil {
		return nil, nil
	}
	mode, _ := gitMode(f.Mode) // validated
	if f.Open != nil && f.Size >= streamMin && mode != modeSymlink {
		bin, err := probe(f)
		if err != nil {
			return nil, fmt.Errorf("gitdiff: reading %q: %w", path, err)
		}
		if bin {
			return &side{mode: mode, big: f, size: f.Size}, nil
		}
	}
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

// change renders c; loaded is its one side already loaded for rename
// detection, or nil.
func (e *encoder) change(c *Change, loaded *side) error {
	var old, new *side
	var err error
	switch {
	case loaded != nil && c.Old != nil:
		old = loaded
	case loaded != nil:
		new = loaded
	default:
		if old, err = load(c.Path, c.Old); err != nil {
			return err
		}
		if new, err = load(c.Path, c.New); err != nil {
			return err
		}
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
	same := false
	if old != nil && new != nil {
		var err error
		if same, err = sameContent(old, new); err != nil {
			return fmt.Errorf("gitdiff: reading %q: %w", path, err)
		}
	}
	if same && old.mode == new.mode {
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
		if same {
			return nil
		}
	}
	return e.body(path, path, aName, bName, old, new)
}

// body renders the index line and the content change of a section whose
// header is written: a binary patch or text hunks. aPath and bPath are the
// old and new names (they differ for a rename), aName and bName the same
// quoted with their "a/" and "b/" prefixes.
func (e *encoder) body(aPath, bPath, aName, bName string, old, new *side) error {
	w := e.w
	var oldData, newData []byte
	binary := false
	oldID, newID := nullID, nullID
	for _, s := range []struct {
		side *side
		data *[]byte
		id   *string
	}{{old, &oldData, &oldID}, {new, &newData, &newID}} {
		if s.side == nil {
			continue
		}
		*s.data = s.side.data
		binary = binary || s.side.binary()
		id, err := s.side.blobID()
		if err != nil {
			return fmt.Errorf("gitdiff: reading %q: %w", bPath, err)
		}
		*s.id = id
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
		if err := e.literalSide(new); err != nil {
			return err
		}
		return e.literalSide(old)
	}
	if len(oldData) == 0 && len(newData) == 0 {
		return nil // a new or deleted empty file has no hunk
	}
	if old == nil {
		w.WriteString("--- /dev/null\n")
	} else {
		w.WriteString("--- ")
		w.WriteString(aName)
		if strings.IndexByte(aPath, ' ') >= 0 {
			w.WriteByte('\t') // as git: tells where an unquoted name ends
		}
		w.WriteByte('\n')
	}
	if new == nil {
		w.WriteString("+++ /dev/null\n")
	} else {
		w.WriteString("+++ ")
		w.WriteString(bName)
		if strings.IndexByte(bPath, ' ') >= 0 {
			w.WriteByte('\t')
		}
		w.WriteByte('\n')
	}
	e.hunks(oldData, newData)
	return nil
}
