// Package gitdiff renders changes to files and symlinks as one git patch
// that `git apply` reproduces byte for byte, and `git apply -R` reverses.
//
// It is the encoder behind (*overlayfs.Fs).WriteDiff, kept apart so that it
// can be tested against git on plain trees. Call Write with the changes;
// each side is a File whose content is read lazily, once.
//
// # Path names
//
// A Change's Path is slash-separated and relative to the root the patch
// applies in: no leading slash, no empty, "." or ".." elements, no NUL.
// The patch names it "a/Path" and "b/Path", C-quoted as git quotes them
// with core.quotePath at its default: a name with a control byte, DEL, '"',
// '\\' or any byte of 0x80 and above is written in double quotes, with
// \a \b \t \n \v \f \r \" \\ or a three-digit octal escape, the "a/" prefix
// inside the quotes. Spaces are not quoted; as git does, the "---" and
// "+++" lines of a name with a space end with a tab.
//
// # Format
//
// Each changed path gets a "diff --git" section with at least one extended
// header line (git skips a section without one): "new file mode",
// "deleted file mode", "old mode"/"new mode", and "index". Modes are git's:
// 100644, 100755 (the owner's executable bit set) and 120000 for a symlink,
// whose content is its target without a trailing newline. A change between
// a regular file and a symlink is a deletion followed by a creation of the
// same path.
//
// Text hunks have three lines of context; changes at most six unchanged
// lines apart share a hunk, as in git. Lines are compared whole, so CRLF,
// CR-only and invalid UTF-8 content and very long lines pass through as
// they are; a last line without a newline is followed by
// "\ No newline at end of file". A new or deleted empty file has no hunk.
// The index line of a text section has abbreviated ids (git apply does not
// check them).
//
// Content with a NUL byte anywhere (git's rule looks only at the first
// 8000 bytes) goes into a "GIT binary patch" with two "literal" hunks, the
// new content and then the old, so that `git apply -R` works too; both are
// zlib-deflated and encoded in git's base85 with a length character per
// line. The index line then carries the full 40-hex blob ids, which git
// apply checks against the file it patches and against its result.
//
// # Renames
//
// A deletion and a creation are written as one rename, as git diff writes
// it with its defaults (diff.renames, -M50%): "similarity index N%",
// "rename from" and "rename to" after the mode lines, then the index line
// and hunks only when the content changed. Pairs are found as git's
// diffcore-rename finds them: exact renames first (same blob; a symlink
// only with a symlink), preferring a source with the same basename; then
// sources and destinations whose basename is unique among those left, at
// 75%; then, when at most 1000×1000 pairs are left (diff.renameLimit),
// the best-scoring pairs of at least 50%. The score is git's
// (diffcore-delta: the bytes of the destination found in the source in
// chunks cut at each LF or 64 bytes, over the larger size), so the
// similarity index is the one git prints. A directory that moves is the
// renames of its files. One case is kept as a deletion and a creation: a
// symlink whose old path (or, for -R, new path) has files under it on the
// other side, because git apply does not learn a renamed symlink's mode
// before it checks that no file is written beyond a symlink.
//
// # Line diff
//
// Lines are diffed with github.com/sergi/go-diff (Myers' algorithm, no
// time limit, so the output never depends on machine speed), after common
// leading and trailing lines are set aside and lines that occur on one side
// only are marked changed up front, as git's xdiff does: two unrelated files
// then cost linear time. The diff is minimal. Where a group of changed lines
// could slide (repeated lines around it), it is placed as git places it,
// including git's default indent heuristic, so that hunks match
// `git diff --no-index` when git's diff is minimal too.
//
// Two fallbacks keep a diff exact but not minimal: past about 1.1 million
// distinct lines in the changed region of one file (go-diff's limit), and
// when Myers' O((N+M)·D) work for N and M lines with D changed ones would
// pass about 4·10⁷ (around a second; for example two 10,000-line files
// drawn from ten distinct lines), the changed region is rewritten whole.
// Both depend only on the input, never on time.
//
// # Memory
//
// A File of 1 MiB or more that has an Open function is first read through
// it in chunks up to its first NUL byte. With one (binary, as every file
// with a hole is), it is never held whole: its blob id is hashed, its
// equality with the other side decided (by size, then blob id) and its
// literal hunk deflated and encoded chunk by chunk, 256 KiB at a time, and
// it pairs in a rename only exactly (same blob id), never by similarity.
// Without one (text) it is loaded with Content, to be diffed by lines. So
// what Write holds is a constant plus the largest text file it diffs (and
// the Content of files without Open).
//
// # Order
//
// Sections come in path order (bytewise, which is git's order), except that
// where a path changes between directory and file (or symlink), every
// deletion under "P/" comes before the creation of "P": git apply does not
// reorder, and a creation of "P" followed by deletions under "P/" is what
// `git diff --no-index` prints and git apply cannot always take.
//
// # What a patch cannot carry
//
// Directories (so no empty directories, and no directory modes), times,
// owners, and any permission bit but the owner's executable bit. git apply
// also refuses some names no matter how they are quoted (a ".git" element,
// and with core.protectNTFS, on by default, its NTFS aliases), cannot
// create "P/x" while "P" is a symlink loop on disk, and cannot write a file
// "P" where the tree it applies to has a directory "P" that still holds
// directories once the patch's deletions are done (empty directories, which
// a patch cannot name, fail it with "Directory not empty"). git apply warns about
// trailing whitespace in added lines (CR-only files are full of it) unless
// run with --whitespace=nowarn; the warning changes no bytes.
//
// # Applying
//
// Paths are relative to the root, so run `git apply` with the root (or a
// copy of it) as working directory. If that directory is a subdirectory of
// a git work tree, git takes paths relative to the top of the work tree and
// silently skips the ones outside the current directory, exiting 0: apply
// from the top with --directory=<root relative to the top>, or set
// GIT_CEILING_DIRECTORIES. This package's tests run git outside any
// repository, with GIT_CONFIG_NOSYSTEM=1 and GIT_CONFIG_GLOBAL=/dev/null.
//
// # Concurrency
//
// Write keeps no state between calls and may be called from many goroutines;
// the Content functions of one call are called from the calling goroutine,
// one at a time: first those of every deletion and creation when there
// are both (rename detection reads them all before writing), then the
// rest in output order.
//
// # Errors
//
// Write returns an error wrapping ErrInvalidChange for a malformed path, a
// path given twice, a mode that is neither regular nor symlink, a nil
// Content, or changes that contradict each other (a file "P" and a file
// "P/x" on the same side). Errors from Content and from the writer are
// returned wrapped with %w. A patch cut short by an error is incomplete.
//
// # Where things live
//
// gitdiff.go: [File], [Change], [Write] and the order of the sections;
// text.go: the line diff and its hunks; compact.go: where groups of
// changed lines slide to, as git's xdiff puts them; binary.go: binary
// detection, blob ids and the literal hunks; rename.go: rename detection;
// stream.go: content read in chunks from a size on, so that a large binary
// file is never held whole; quote.go: git's C quoting of names.
package gitdiff
