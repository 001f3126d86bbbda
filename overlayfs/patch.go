package overlayfs

import (
	"io"

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
func (f *Fs) WriteDiff(w io.Writer) error { return f.primary().writeDiff(w) }

func (l *layer) writeDiff(w io.Writer) error {
	l.freeze()
	cs, err := l.changes()
	if err != nil {
		return err
	}
	return gitdiff.Write(w, patchChanges(cs))
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
func patchChanges(cs []change) []gitdiff.Change {
	var out []gitdiff.Change
	for _, c := range cs {
		if c.old.kind.special() {
			continue
		}
		gc := gitdiff.Change{Path: c.Path, Old: patchFile(c.old), New: patchFile(c.new)}
		if gc.Old != nil || gc.New != nil {
			out = append(out, gc)
		}
	}
	return out
}

func patchFile(s side) *gitdiff.File {
	if s.kind != kindFile && s.kind != kindSymlink {
		return nil
	}
	return &gitdiff.File{Mode: s.mode, Content: s.content}
}
