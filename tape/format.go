package tape

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Format constants written in every header. See FORMAT.md.
const (
	FormatName = "cowfs-tape" // header "format"
	Version    = 1            // header "version": major; a reader rejects a larger one
	Minor      = 5            // header "minor": 1.1 added command records, 1.2 the running chain hash, 1.3 any byte string as a name and link, 1.4 the final state of the same end state by any route, 1.5 the final state of changes through symlinks and of created modes
	HashAlgo   = "blake3"     // header "hash": the only algorithm of version 1
)

// wireMinor is the minor version from which a string member starting
// with '"' is Go-quoted (see wireString).
const wireMinor = 3

// finalMinor is the minor version from which the trailer's final digest is
// that of Tape.Final. An older tape's digest, by older rules, is not
// checked: it is derived from the records, which the chain hash covers.
const finalMinor = 4

// throughMinor is the minor version from which the final state keeps the
// residue of a change through a name that may be a symlink, and the mode
// of a created file (FORMAT.md, "Final state"); a tape of minor 4 has its
// digest checked by the rules of 1.4.
const throughMinor = 5

// EnvDir names the environment variable that switches recording on for a
// whole `go test` run: when set to a directory, package helpers writes one
// tape per test there, named by [FileName].
const EnvDir = "COWFS_TAPE_DIR"

// OutsidePath is the placeholder recorded instead of any path that lies
// outside the wrapped root. The absolute name is never written.
const OutsidePath = "<outside>"

// RootPrefix replaces the root in symlink targets that are absolute names
// inside the root, so that two runs over different roots record the same
// target text.
const RootPrefix = "<root>"

// Op values of records written by this version. A tape of a newer minor
// version may hold other ops; [Read] keeps them and lists them in
// [Tape.Unknown].
const (
	OpStat      = "stat"      // Fs.Stat
	OpLstat     = "lstat"     // Lstater.LstatIfPossible
	OpFstat     = "fstat"     // File.Stat
	OpOpen      = "open"      // one handle: Open, OpenFile or Create, written at Close
	OpMkdir     = "mkdir"     // Fs.Mkdir
	OpMkdirAll  = "mkdirall"  // Fs.MkdirAll
	OpRemove    = "remove"    // Fs.Remove
	OpRemoveAll = "removeall" // Fs.RemoveAll
	OpRename    = "rename"    // Fs.Rename: Path is the old name, To the new one
	OpChmod     = "chmod"     // Fs.Chmod
	OpChown     = "chown"     // Fs.Chown
	OpChtimes   = "chtimes"   // Fs.Chtimes
	OpSymlink   = "symlink"   // Linker.SymlinkIfPossible: Path is the link, Target its text
	OpReadlink  = "readlink"  // LinkReader.ReadlinkIfPossible
	OpLink      = "link"      // Link (minor 3): Path is the old name, To the new one
)

// Ops of command records (minor 1): what a subprocess changed under the
// root, one record per changed path, made by [Recorder.RecordCommand]. Each
// carries Cmd, the command's argv with the root replaced by [RootPrefix].
const (
	OpCmdWrite   = "cmd-write"   // a regular file with new content: mode, size, hash
	OpCmdRemove  = "cmd-remove"  // the path (and everything under it) removed
	OpCmdMkdir   = "cmd-mkdir"   // a new directory (or one that replaced another type): mode
	OpCmdSymlink = "cmd-symlink" // a new or changed symlink: target
	OpCmdChmod   = "cmd-chmod"   // the mode changed, nothing else: mode
	OpCmdMknod   = "cmd-mknod"   // a FIFO or socket: mode, whose type letter says which
)

var knownOps = map[string]bool{
	OpStat: true, OpLstat: true, OpFstat: true, OpOpen: true, OpMkdir: true,
	OpMkdirAll: true, OpRemove: true, OpRemoveAll: true, OpRename: true,
	OpChmod: true, OpChown: true, OpChtimes: true, OpSymlink: true, OpReadlink: true, OpLink: true,
	OpCmdWrite: true, OpCmdRemove: true, OpCmdMkdir: true, OpCmdSymlink: true, OpCmdChmod: true, OpCmdMknod: true,
}

// IsCommandOp reports whether op is the op of a command record.
func IsCommandOp(op string) bool {
	switch op {
	case OpCmdWrite, OpCmdRemove, OpCmdMkdir, OpCmdSymlink, OpCmdChmod, OpCmdMknod:
		return true
	}
	return false
}

// Header is the first line of a tape.
type Header struct {
	Kind    string `json:"kind"`              // always "header"
	Format  string `json:"format"`            // FormatName
	Version int    `json:"version"`           // major version
	Minor   int    `json:"minor"`             // minor version
	Hash    string `json:"hash"`              // HashAlgo
	Package string `json:"package,omitempty"` // Go package under test, when known
	Test    string `json:"test,omitempty"`    // test name, when known
	// Info holds volatile facts (absolute root, pid, start time, host).
	// Comparison ignores it.
	Info map[string]string `json:"info,omitempty"`
}

// Span is a half-open byte range [Off, Off+Len) read through a handle. It is
// written as a two-element JSON array.
type Span struct {
	Off, Len int64
}

// MarshalJSON writes the span as [off,len].
func (s Span) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 24)
	b = append(b, '[')
	b = strconv.AppendInt(b, s.Off, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, s.Len, 10)
	return append(b, ']'), nil
}

// UnmarshalJSON reads [off,len].
func (s *Span) UnmarshalJSON(b []byte) error {
	var v []int64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if len(v) != 2 || v[0] < 0 || v[1] < 0 {
		return fmt.Errorf("span must be [off,len] with non-negative numbers, got %s", b)
	}
	s.Off, s.Len = v[0], v[1]
	return nil
}

// Record is one operation. Which fields are set depends on Op; FORMAT.md
// lists them per op. Paths are root-relative slash paths ("." is the root)
// or [OutsidePath].
type Record struct {
	Seq  int64  `json:"seq"`          // 1, 2, 3, ... in the order records were made
	Op   string `json:"op"`           // one of the Op constants
	Path string `json:"path"`         // the name operated on
	To   string `json:"to,omitempty"` // rename: new name; open: name at close if renamed meanwhile
	Err  string `json:"err,omitempty"`

	Flag   string   `json:"flag,omitempty"`   // open: "r", "w" or "rw", then "|create", "|excl", "|trunc", "|append", "|sync"
	Mode   string   `json:"mode,omitempty"`   // stat, lstat, fstat, chmod, mkdir, open with create: fs.FileMode.String()
	Size   int64    `json:"size,omitempty"`   // stat of a regular file; open: size of resulting content
	Hash   string   `json:"hash,omitempty"`   // open: BLAKE3 of the resulting content, when the handle changed it
	RHash  string   `json:"rhash,omitempty"`  // open: BLAKE3 of the content version read
	RSize  int64    `json:"rsize,omitempty"`  // open: size of the content version read
	Spans  []Span   `json:"spans,omitempty"`  // open: byte ranges read, sorted by offset, overlapping and adjacent ones merged
	List   string   `json:"list,omitempty"`   // open of a directory: BLAKE3 of the sorted listing
	N      int      `json:"n,omitempty"`      // open of a directory: number of names listed
	Names  []string `json:"names,omitempty"`  // open of a directory: the sorted names, when at most MaxNames
	Target string   `json:"target,omitempty"` // symlink, readlink: link text
	UID    *int     `json:"uid,omitempty"`    // chown
	GID    *int     `json:"gid,omitempty"`    // chown
	Atime  string   `json:"atime,omitempty"`  // chtimes, RFC 3339 UTC with nanoseconds
	Mtime  string   `json:"mtime,omitempty"`  // chtimes
	Fails  []string `json:"fails,omitempty"`  // open: failed handle calls as "call:outcome", first occurrence order
	End    string   `json:"end,omitempty"`    // open: "unclosed" when flushed by Recorder.Close
	// Unhashed says why Hash or RHash could not be computed (an outcome),
	// e.g. the file was removed while open and the bytes were never seen.
	Unhashed string `json:"unhashed,omitempty"`
	// Cmd is the argv of the command that made a command record, with the
	// root replaced by RootPrefix.
	Cmd []string `json:"cmd,omitempty"`

	// Extra holds the fields of a record this reader does not know (an op of
	// a newer minor version). Nil for known ops.
	Extra map[string]json.RawMessage `json:"-"`
}

// MaxNames bounds how many names a directory handle record lists in
// Record.Names; the hash in Record.List always covers all of them.
const MaxNames = 32

// Trailer is the last line of a complete tape.
type Trailer struct {
	Kind    string `json:"kind"`    // always "trailer"
	Records int64  `json:"records"` // number of record lines
	Final   string `json:"final"`   // BLAKE3 of the final-state lines, see Tape.Final
	Chain   string `json:"chain"`   // chain hash over header and record lines
}

// Tape is a parsed tape.
type Tape struct {
	Header  Header
	Records []Record
	// Trailer is nil when the tape was cut short (Truncated is then true).
	Trailer *Trailer
	// Truncated reports a tape without trailer: the recorder crashed or was
	// never closed. Its records are a valid prefix.
	Truncated bool
	// Unknown lists indexes into Records of ops from a newer minor version.
	Unknown []int
	// Skipped lists the line numbers (1 is the header) of lines of a kind
	// from a newer minor version, which Read skips.
	Skipped []int
}

// Paths returns the paths a record belongs to for comparison by path: its
// Path, and To when set.
func (r *Record) Paths() []string {
	if r.To != "" && r.To != r.Path {
		return []string{r.Path, r.To}
	}
	return []string{r.Path}
}

// Canon returns the record's canonical line: every field except Seq, in a
// fixed order, so equal operations with equal outcomes give equal lines.
func (r *Record) Canon() string {
	var b strings.Builder
	b.WriteString(r.Op)
	b.WriteByte(' ')
	b.WriteString(quoteIfNeeded(r.Path))
	if r.To != "" {
		b.WriteString(" -> ")
		b.WriteString(quoteIfNeeded(r.To))
	}
	kv := func(k, v string) {
		if v == "" {
			return
		}
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(quoteIfNeeded(v))
	}
	kv("flag", r.Flag)
	kv("err", r.Err)
	kv("mode", r.Mode)
	if r.Size != 0 || r.Hash != "" {
		kv("size", strconv.FormatInt(r.Size, 10))
	}
	kv("hash", r.Hash)
	if r.RSize != 0 || r.RHash != "" {
		kv("rsize", strconv.FormatInt(r.RSize, 10))
	}
	kv("rhash", r.RHash)
	if len(r.Spans) > 0 {
		var s strings.Builder
		for i, sp := range r.Spans {
			if i > 0 {
				s.WriteByte(',')
			}
			fmt.Fprintf(&s, "%d+%d", sp.Off, sp.Len)
		}
		kv("spans", s.String())
	}
	kv("list", r.List)
	if r.N != 0 {
		kv("n", strconv.Itoa(r.N))
	}
	if len(r.Names) > 0 {
		kv("names", strings.Join(r.Names, "/"))
	}
	kv("target", r.Target)
	if r.UID != nil {
		kv("uid", strconv.Itoa(*r.UID))
	}
	if r.GID != nil {
		kv("gid", strconv.Itoa(*r.GID))
	}
	kv("atime", r.Atime)
	kv("mtime", r.Mtime)
	if len(r.Fails) > 0 {
		kv("fails", strings.Join(r.Fails, ","))
	}
	kv("end", r.End)
	kv("unhashed", r.Unhashed)
	if len(r.Cmd) > 0 {
		var argv strings.Builder
		enc := json.NewEncoder(&argv)
		enc.SetEscapeHTML(false)
		enc.Encode(r.Cmd) // strings only: cannot fail
		kv("cmd", strings.TrimSuffix(argv.String(), "\n"))
	}
	if len(r.Extra) > 0 {
		keys := make([]string, 0, len(r.Extra))
		for k := range r.Extra {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			kv(k, string(r.Extra[k]))
		}
	}
	return b.String()
}

// String is the canonical line preceded by the sequence number.
func (r *Record) String() string {
	return "#" + strconv.FormatInt(r.Seq, 10) + " " + r.Canon()
}

func quoteIfNeeded(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == '"' || c == '\\' || c >= 0x7f {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}
