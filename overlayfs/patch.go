package overlayfs

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cowfs/cowfs/internal/gitdiff"
)

// WriteDiff writes the layer of the root (the primary one, with WithRoot:
// see WriteDiffFor) as a git patch, paths relative to the root, in
// path order (except that where a path turns from a directory into a file,
// the deletions under it come first: git apply does not reorder). A file
// or symlink that moved is written as a rename, as git diff writes it
// (similarity index, rename from, rename to; with edits down to git's
// default 50% similarity), and a moved directory as its files' renames.
//
// The guarantee: in a copy of the root, `git apply` of the patch
// reproduces every file and symlink of the view byte for byte, with its
// executable bit, and `git apply -R` undoes it. A git patch cannot carry
// empty directories, directory modes, times, owners, or any mode bit of a
// file other than the executable bit; those changes are left out. For the
// same reason one case cannot apply: a file written where the lower has a
// directory holding only (possibly nested) empty directories, since git
// apply cannot remove directories a patch cannot name.
//
// Git cannot express FIFOs or sockets either: a special file added,
// deleted or changed is left out, and so is a file or symlink written where
// the lower has one (git apply cannot remove it first; likewise a file
// written where the lower has a directory holding one). Every other change
// is written; Changes lists them all. Git has no hard links either: each
// name of a linked file (Fs.Link) is written as a file of its own, and
// git apply makes independent files of them.
//
// Memory: a binary file (one with a NUL byte) of 1 MiB or more whose
// content is not in the layer's memory (a lower file appended to, renamed
// or chmodded, content kept by reference) is hashed, compared and encoded
// in chunks; its holes are read as zeros, never held. What WriteDiff
// holds is bounded by a constant plus the largest text file it diffs.
func (f *Fs) WriteDiff(w io.Writer) error { return f.primary().writeDiff(w) }

func (l *layer) writeDiff(w io.Writer) error {
	l.freeze()
	cs, err := l.changes()
	if err != nil {
		return err
	}
	return writePatch(w, cs)
}

// writePatch writes cs as a git patch (see WriteDiff), with its note on
// the paths in .git it leaves out.
func writePatch(w io.Writer, cs []change) error {
	gcs, gitPaths := patchChanges(cs)
	if len(gitPaths) > 0 {
		more := ""
		if len(gitPaths) > 1 {
			more = fmt.Sprintf(" and %d more", len(gitPaths)-1)
		}
		// One line, the name quoted: nothing in it can start a diff.
		if _, err := fmt.Fprintf(w, "cowfs: %d paths in .git left out of this patch (git apply refuses them): %s%s\n\n",
			len(gitPaths), strconv.Quote(gitPaths[0]), more); err != nil {
			return err
		}
	}
	return gitdiff.Write(w, gcs)
}

// freeze makes the current contents immutable to later writes through f
// (they clone first), so they can be read without holding the lock.
func (l *layer) freeze() {
	l.mu.Lock()
	l.gen = l.fam.gen.Add(1)
	l.mu.Unlock()
}

// patchChanges keeps the file and symlink sides of changes: git knows
// nothing else. A change from a FIFO or socket to a file or symlink is left
// out whole: the patch could only create over a path git cannot clear.
// Changes of paths git refuses (see gitRefuses) are left out, their paths
// returned in gitPaths, where a patch would name them.
func patchChanges(cs []change) (out []gitdiff.Change, gitPaths []string) {
	for _, c := range cs {
		if c.old.kind.special() {
			continue
		}
		if gitRefuses(c.Path) {
			if patchFile(c.old) != nil || patchFile(c.new) != nil {
				gitPaths = append(gitPaths, c.Path)
			}
			continue
		}
		gc := gitdiff.Change{Path: c.Path, Old: patchFile(c.old), New: patchFile(c.new)}
		if gc.Old != nil || gc.New != nil {
			out = append(out, gc)
		}
	}
	return out, gitPaths
}

// gitRefuses reports whether git refuses p (slash-separated) as a path of
// a patch or an index entry: one of its components is ".git", in any case,
// or a name NTFS takes for it, as git's verify_path with core.protectNTFS
// (the default) decides (is_ntfs_dotgit): ".git" or "git~1", in any case,
// followed only by dots and spaces up to the end, a backslash or a colon.
func gitRefuses(p string) bool {
	for c := range strings.SplitSeq(p, "/") {
		var rest string
		switch {
		case len(c) >= 4 && strings.EqualFold(c[:4], ".git"):
			rest = c[4:]
		case len(c) >= 5 && strings.EqualFold(c[:5], "git~1"):
			rest = c[5:]
		default:
			continue
		}
		for i := 0; ; i++ {
			if i == len(rest) || rest[i] == '\\' || rest[i] == ':' {
				return true
			}
			if rest[i] != '.' && rest[i] != ' ' {
				break
			}
		}
	}
	return false
}

// patchFile is the git side of s. Content not in memory (still in the
// lower, or kept by reference) is given as a stream too, so that a big
// binary or sparse file is hashed and encoded in chunks, never loaded
// whole: memory stays bounded by the largest text file diffed.
func patchFile(s side) *gitdiff.File {
	if s.kind != kindFile && s.kind != kindSymlink {
		return nil
	}
	f := &gitdiff.File{Mode: s.mode, Content: s.content}
	switch {
	case s.kind != kindFile:
	case s.lazy:
		f.Open, f.Size = s.open, s.size
	case s.ext != nil:
		ext, size := s.ext, s.size
		f.Open = func() (io.ReadCloser, error) { return io.NopCloser(io.NewSectionReader(ext.f, 0, size)), nil }
		f.Size = size
	}
	return f
}
