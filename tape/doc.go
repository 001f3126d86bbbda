// Package tape records every operation made through an afero.Fs on a
// content-hashed tape, reads tapes back, and compares two tapes to prove a
// test deterministic or to name the first place where two runs differ.
//
// A [Recorder] writes one tape. [Recorder.Wrap] decorates any afero.Fs
// (afero.OsFs, afero.MemMapFs, an overlay) so that each call is forwarded
// and then recorded; [Recorder.Close] writes the trailer. [Read] parses a
// tape, [Compare] and [Classify] compare two. The format is specified in
// FORMAT.md, next to this file, precisely enough for another tool to read
// and write tapes. A Recorder writes format 1.5, whose trailer holds one
// running BLAKE3 of the lines before it and the digest of the final state,
// and whose names may be any byte string (a name that is not UTF-8 is
// written Go-quoted, "bad\xff", see FORMAT.md); Read reads 1.0 to 1.5 and
// checks each trailer by the rule of the tape's own minor version (the
// final state changed in 1.4 and 1.5: a 1.4 digest is checked by 1.4's
// rules, older ones not at all).
//
// # Path names
//
// Records hold slash-separated paths relative to the root given to Wrap
// ("." is the root itself). Relative names are resolved against the working
// directory at call time, as os does. A name that is not lexically under
// the root (in its Abs or its EvalSymlinks spelling) is recorded as
// [OutsidePath]; the absolute name is never written, so tapes of two runs
// over two temporary roots compare equal. Symlinks are not resolved: the
// path is the name the caller used. Symlink targets that are absolute names
// inside the root are written with [RootPrefix] in place of the root.
//
// # What is recorded
//
// Every call on the Fs (Create, Open, OpenFile, Mkdir, MkdirAll, Remove,
// RemoveAll, Rename, Stat, LstatIfPossible, SymlinkIfPossible,
// ReadlinkIfPossible, Chmod, Chown, Chtimes) makes one record, failures
// included, with the outcome of a failure ([ErrorOutcome]), never as
// message text. Fs.Name is not recorded.
//
// A handle makes one record, at Close: the content version it read (BLAKE3
// and size) with the byte spans read, the resulting content after its
// writes or truncation (BLAKE3 and size; an append records the new whole
// content), the sorted listing of a directory it read, and the classes of
// the calls on it that failed. Buffer sizes of bufio or io.Copy therefore
// never show. A handle has ReadFrom, WriteTo and ReadDir exactly when the
// inner handle has them; its ReadFrom and WriteTo copy through its Write
// and Read, so the bytes are hashed as they pass. File.Stat makes an
// "fstat" record when called. Handles still open when the Recorder closes
// are flushed with End "unclosed". A handle whose name was removed or
// renamed over (through the same Fs) while it was open has no name in the
// root at Close: its record's To is [OutsidePath], so that the final state
// does not take what it wrote for the name's.
//
// What a subprocess changed (package helpers, Env.Run) is recorded by
// [Recorder.RecordCommand] after it finished: one command record per
// changed path, in path order (the OpCmd ops: a write with the BLAKE3 and
// size of the new content, a removal, a mkdir, a symlink target, a mode
// change, a FIFO or socket), tagged with the command's argv, the root
// replaced by [RootPrefix].
//
// # Hashing cost
//
// Hashes are computed while the bytes flow through Read, ReadAt, Write and
// WriteAt, with pooled hashers; no byte the caller reads or writes in order
// is read again. The recorder reads file bytes itself only where the
// caller's own traffic does not determine the hash, and then each byte at
// most once:
//
//   - bytes the caller skipped (a partial read, a Seek or ReadAt past
//     unread bytes, an append to an existing file, a write after a hole);
//   - the whole result, once, at Close, when a write or truncate landed
//     inside bytes already hashed (WriteAt in the middle of a file,
//     Seek back and overwrite). This read-back is unavoidable for a
//     content hash and is counted in the benchmarks.
//
// A handle opened write-only reads those bytes through a fresh read-only
// Open of its current name (renames made through the same Fs are
// followed when both name the file the same way, both relative or both
// absolute). If that fails, for instance because the file was removed
// while open, the record says so in Unhashed instead of holding a hash;
// so does a handle whose name another file was renamed over (reading the
// name would hash that file).
// The recorder assumes nothing else changes a file while a handle to it is
// open.
//
// A content version is hashed once per Recorder: a read-only handle on a
// file of a real file system (its FileInfo.Sys is a *syscall.Stat_t with an
// inode number) takes the file's device, inode, size, mtime and ctime
// before its first byte is read, from its Stat when the caller made one or
// from one Stat of its own; when an earlier handle hashed that version, the
// record reuses the hash and the recorder neither hashes the bytes the
// caller reads nor reads the rest. A hash is kept for reuse only when a
// Stat after hashing shows the same version and its timestamps were more
// than a tenth of a second (two seconds where the file system keeps whole
// seconds) older than the clock when the key was taken, so a write in the
// same timestamp tick cannot go unseen. A handle does not reuse a hash
// when a write through the recorder (a Write, WriteAt or Truncate on
// another handle, an open with O_TRUNC, a command record) began after its
// key was taken: before its first read it hashes the bytes it reads, after
// it the whole file as it is at Close, read back once. In-memory file
// systems and overlay layer entries have no inode and are always hashed.
//
// # Comparison
//
// [Compare] compares two tapes in one of four modes: [ModePath] (per path,
// the same operations and outcomes in the same order; the default),
// [ModeGlobal] (all records in order), [ModeSet] (the same multiset),
// [ModeFinal] (the same end state, [Tape.Final]: the same end tree reached
// by another route, such as a temporary file made and removed where a
// record proved that the root did not hold it, or a chmod before a rename
// instead of after, reads the same; two different end trees never do: a
// change through a name that may be a symlink leaves a residue line when
// the name goes, and a created file's mode counts. Its exception: changes
// through two names of one object in the start tree, whose order it does
// not keep. FORMAT.md, "Final state"). Records are compared by
// their canonical line ([Record.Canon]), which drops only the sequence
// number. The first divergence is found by aligning the two sequences
// (patience anchors, then Myers' diff), so one extra record in the middle is
// one hunk and the records after it still match. [CompareAll] is the one
// comparison engine (compare.go, alignment in align.go): it returns every
// hunk; [Compare] returns the first, [Classify] tells [Identical],
// [InterleavingOnly] and [Data] apart, and [Diff] returns the class with
// every hunk of a mode, which is what replay diff and replay check print.
//
// A Recorder given [WithReference] compares each record with a reference
// tape as it is made and calls back at the first divergence with the stack
// of the offending call, so a test can fail right there.
//
// # Concurrency
//
// A Recorder and the file systems it wraps are safe for use by many
// goroutines. Each record takes its sequence number when it is written,
// under one lock; lines appear in sequence order, one Write per line, so a
// process that dies leaves a readable prefix ([Tape.Truncated]) with every
// record made before. Calls on one handle are serialized by the handle,
// except the I/O of ReadAt.
//
// A Write per line is a system call per record when w is a file, which
// doubled the cost of a recorded Stat. [WithBuffer] writes whole lines
// from a buffer instead: when it passes a size, when a timer armed by the
// oldest line waiting fires, at [Recorder.Flush] and at Close. A process
// that dies without Close then leaves a prefix of whole lines lacking at
// most the records of the last interval (FORMAT.md, "Truncated tapes").
// Package helpers records so.
//
// # Errors
//
// The wrapped Fs returns exactly the errors of the inner Fs; recording
// never changes a result. Create, Open and OpenFile call the inner method
// of the same name (afero.MemMapFs's Create and OpenFile give different
// modes, afero.CopyOnWriteFs's Open and OpenFile different directories).
// The wrap has Lstater, Linker and LinkReader whatever the inner Fs has,
// as afero's own wrappers do: without them inner, LstatIfPossible falls
// back to Stat and reports false, the others fail with afero's
// ErrNoSymlink and ErrNoReadlink. Write errors on the tape are sticky and
// reported by [Recorder.Close] and [Recorder.Err]. [Read] returns a
// *[ReadError] with the line number, wrapping [ErrFormat], [ErrVersion] or
// [ErrTrailer]; a record whose path is absolute or not clean, or whose
// spans are not sorted merged ranges, is [ErrFormat].
//
// # Environment
//
// [EnvDir] (COWFS_TAPE_DIR) names the directory where package helpers
// writes one tape per test, named by [FileName], for a whole go test run.
//
// # Where things live
//
// format.go: the types of a tape ([Tape], [Header], [Record], [Trailer])
// and canonical lines; recorder.go: [Recorder] and its options, with the
// writers of the two commonest records that build no Record (emitStat,
// emitRead); encode.go:
// the record encoder of the hot path, and the wire form of names that are
// not UTF-8 (wireString); fs.go and file.go: the recording
// [Fs] and its handles; command.go: the records of a subprocess
// ([Recorder.RecordCommand]); hash.go: content hashes, with version*.go for
// reusing the hash of an unchanged file version;
// chain.go: the chain hash, written and checked in one place;
// outcome.go: the outcome of a failure ([ErrorOutcome]); final.go: the
// end state ([Tape.Final]), by the rules of 1.5 or (for the digest of a
// 1.4 tape) of 1.4, with the residues of changes through symlinks and the
// following of the symlinks a tape made (follow); read.go: [Read]; compare.go: the comparison
// engine ([CompareAll] and what is built on it), with align.go for the
// alignment; reference.go: the online check of [WithReference];
// content.go: the captured contents of [WithContent]; name.go:
// [FileName].
package tape
