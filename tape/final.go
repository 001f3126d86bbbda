package tape

import (
	"path"
	"slices"
	"strconv"
	"strings"
)

// finalState replays successful records into the end state of every path
// the records changed. Paths only read, and paths outside the root, are not
// part of it. It also learns, from every record, which paths the root did
// not hold at the start, so that a path made and removed again leaves no
// line when it was known absent (FORMAT.md, "Final state").
type finalState struct {
	m      map[string]*finalEntry
	absent map[string]bool // paths the root is known not to have held at the start
}

type finalEntry struct {
	// "file", "dir", "symlink", "special", "deleted", "lower" (the root's
	// entry at this path, bytes never seen), "moved" (the root's entry at
	// from), "ensured" (the root's entry at from if it was a directory,
	// else a new empty one: MkdirAll over a path of unknown existence).
	kind   string
	from   string
	exists bool // moved: a rename put it there, so something is (not in the line)
	hash   string
	size   int64
	mode   string
	target string
	owner  string
	mtime  string
}

func newFinalState() *finalState {
	return &finalState{m: map[string]*finalEntry{}, absent: map[string]bool{}}
}

// get returns p's entry, making one if p has none: the root's entry at p,
// or, below a moved directory, the root's entry it came from, so that an
// entry reads the same whether it was changed before or after its
// directory moved.
func (s *finalState) get(p string) *finalEntry {
	e := s.m[p]
	if e == nil {
		e = &finalEntry{kind: "lower"}
		if from := s.origin(p); from != p {
			e.kind, e.from = "moved", from
		}
		s.m[p] = e
	}
	return e
}

// origin returns the root path whose entry an entry-less p holds: p's
// own, unless its nearest changed ancestor is moved or ensured.
func (s *finalState) origin(p string) string {
	for a := p; a != "."; {
		a = path.Dir(a)
		e := s.m[a]
		if e == nil || e.kind == "lower" {
			continue
		}
		if e.kind != "moved" && e.kind != "ensured" || a == "." {
			return p
		}
		if e.from == OutsidePath {
			return OutsidePath
		}
		return e.from + p[len(a):]
	}
	return p
}

// changed reports whether a record changed p or one of its ancestors, so
// that what p holds now may differ from what the root held.
func (s *finalState) changed(p string) bool {
	for a := p; ; a = path.Dir(a) {
		if e := s.m[a]; e != nil && e.kind != "lower" {
			return true
		}
		if a == "." {
			return false
		}
	}
}

// absentAt reports whether the root is known not to have held p.
func (s *finalState) absentAt(p string) bool {
	for a := p; ; a = path.Dir(a) {
		if s.absent[a] {
			return true
		}
		if a == "." {
			return false
		}
	}
}

// absentNow reports whether nothing is at p, whose entry e nothing
// changed: p lies in a directory the records made, or the root did not
// hold the entry p now shows (its own, or the one a move or a MkdirAll
// over it brought).
func (s *finalState) absentNow(p string, e *finalEntry) bool {
	if !e.unknown() {
		return false
	}
	for a := p; a != "."; {
		a = path.Dir(a)
		d := s.m[a]
		if d == nil || d.kind == "lower" {
			continue
		}
		switch d.kind {
		case "dir":
			return true
		case "moved", "ensured":
			o := s.origin(p)
			return o != OutsidePath && s.absentAt(o)
		}
		return false
	}
	return s.absentAt(p)
}

// plain reports an entry with no mode, owner or mtime set.
func (e *finalEntry) plain() bool { return e.mode == "" && e.owner == "" && e.mtime == "" }

// learn records what r shows about the start: a path that r proves absent
// when r was made is absent at the start if no earlier record changed it.
// Only calls that do not follow a final symlink count as proof for a
// failure (a dangling symlink fails Stat and Open with not-exist), and
// only calls that fail on any existing entry for a success.
func (s *finalState) learn(r *Record) {
	switch {
	case r.Err != "":
		s.learnFailure(r.Op, r.Path, r.Err)
		s.learnExcl(r)
	case r.Op == OpMkdir || r.Op == OpSymlink:
		s.learnAbsent(r.Path)
	case r.Op == OpLink:
		s.learnAbsent(r.To)
	case r.Op == OpOpen && strings.Contains(r.Flag, "|create") && strings.Contains(r.Flag, "|excl"):
		s.learnAbsent(r.Path)
	}
}

// learnFailure is learn for a failed op on p with that outcome: the
// recorder's stat fast path calls it without building a Record.
func (s *finalState) learnFailure(op, p, outcome string) {
	switch {
	case outcome == OutcomeNotExist && (op == OpLstat || op == OpReadlink || op == OpRemove || op == OpMkdir),
		outcome == OutcomeNotDir && (op == OpLstat || op == OpReadlink || op == OpMkdir):
		s.learnAbsent(p)
	}
}

// learnExcl is learn for a failed O_CREATE|O_EXCL open, which follows no
// final symlink either.
func (s *finalState) learnExcl(r *Record) {
	if r.Op == OpOpen && (r.Err == OutcomeNotExist || r.Err == OutcomeNotDir) &&
		strings.Contains(r.Flag, "|create") && strings.Contains(r.Flag, "|excl") {
		s.learnAbsent(r.Path)
	}
}

func (s *finalState) learnAbsent(p string) {
	if p != OutsidePath && p != "" && !s.changed(p) {
		s.absent[p] = true
	}
}

// link makes new a second name of the entry at old: both names share one
// entry, so that a later write or chmod through either shows in both. An
// untouched lower entry becomes moved from old first, so that new does not
// claim what the root held at its own path.
func (s *finalState) link(old, new string) {
	if old == OutsidePath || new == OutsidePath {
		return
	}
	e := s.get(old)
	if e.kind == "lower" {
		e.kind, e.from = "moved", old
	}
	s.m[new] = e
}

func under(p, dir string) bool {
	return dir == "." && p != "." || strings.HasPrefix(p, dir+"/")
}

func (s *finalState) deleteTree(p string) {
	for k := range s.m {
		if under(k, p) {
			delete(s.m, k)
		}
	}
}

func (s *finalState) apply(r *Record) {
	s.learn(r)
	if r.Err != "" || r.Path == OutsidePath && r.To == "" {
		return
	}
	switch r.Op {
	case OpOpen:
		if r.Hash == "" {
			return
		}
		p := r.Path
		if r.To != "" {
			p = r.To
		}
		if p == OutsidePath {
			return
		}
		e := s.get(p)
		if e.kind != "file" && e.kind != "lower" && e.kind != "moved" {
			*e = finalEntry{}
		}
		e.kind, e.from, e.hash, e.size = "file", "", r.Hash, r.Size
	case OpMkdir:
		e := s.get(r.Path)
		if e.kind != "dir" {
			*e = finalEntry{kind: "dir", mode: r.Mode}
		}
	case OpMkdirAll:
		s.mkdirAll(r.Path, r.Mode)
	case OpSymlink:
		s.m[r.Path] = &finalEntry{kind: "symlink", target: r.Target}
	case OpLink:
		s.link(r.Path, r.To)
	case OpRemove, OpRemoveAll:
		s.deleteTree(r.Path)
		s.m[r.Path] = &finalEntry{kind: "deleted"}
	case OpRename:
		s.rename(r.Path, r.To)
	case OpChmod:
		s.get(r.Path).mode = r.Mode
	case OpChown:
		var b strings.Builder
		if r.UID != nil {
			b.WriteString(strconv.Itoa(*r.UID))
		}
		b.WriteByte(':')
		if r.GID != nil {
			b.WriteString(strconv.Itoa(*r.GID))
		}
		s.get(r.Path).owner = b.String()
	case OpChtimes:
		s.get(r.Path).mtime = r.Mtime
	default:
		s.applyCommand(r)
	}
}

// applyCommand applies a command record.
func (s *finalState) applyCommand(r *Record) {
	switch r.Op {
	case OpCmdWrite:
		s.deleteTree(r.Path)
		s.m[r.Path] = &finalEntry{kind: "file", hash: r.Hash, size: r.Size, mode: r.Mode}
	case OpCmdRemove:
		s.deleteTree(r.Path)
		s.m[r.Path] = &finalEntry{kind: "deleted"}
	case OpCmdMkdir:
		e := s.get(r.Path)
		if e.kind != "dir" {
			s.deleteTree(r.Path)
			*e = finalEntry{kind: "dir"}
		}
		e.mode = r.Mode
	case OpCmdSymlink:
		s.deleteTree(r.Path)
		s.m[r.Path] = &finalEntry{kind: "symlink", target: r.Target}
	case OpCmdChmod:
		s.get(r.Path).mode = r.Mode
	case OpCmdMknod:
		s.deleteTree(r.Path)
		s.m[r.Path] = &finalEntry{kind: "special", mode: r.Mode}
	}
}

// mkdirAll applies a successful MkdirAll, which makes p and the parents
// it lacks and changes nothing where a directory (or a symlink to one)
// already was.
func (s *finalState) mkdirAll(p, mode string) {
	// From p up to the first name known to be there, then top down, so
	// that a parent made makes its children known made.
	var names []string
	for a := p; a != "."; a = path.Dir(a) {
		if e := s.m[a]; e != nil && !e.unknown() && e.kind != "deleted" {
			break
		}
		names = append(names, a)
	}
	for _, a := range slices.Backward(names) {
		e := s.get(a)
		switch {
		case e.kind == "deleted" || s.absentNow(a, e):
			*e = finalEntry{kind: "dir", mode: mode}
		case e.unknown():
			// The root's entry if a directory, else made now.
			from := e.from
			if e.kind == "lower" {
				from = a
			}
			e.kind, e.from = "ensured", from
		}
	}
}

// unknown reports an entry whose existence the records do not know: the
// root's (or a moved directory's) entry that nothing changed or proved.
func (e *finalEntry) unknown() bool {
	return (e.kind == "lower" || e.kind == "moved" && !e.exists) && e.plain()
}

func (s *finalState) rename(old, new string) {
	if old == new {
		return
	}
	if old != OutsidePath {
		s.get(old)
	}
	moved := map[string]*finalEntry{}
	for k, e := range s.m {
		if k == old || under(k, old) {
			if e.kind == "lower" {
				e.kind, e.from = "moved", k // the root's entry leaves its place
			}
			moved[new+k[len(old):]] = e
			delete(s.m, k)
		}
	}
	if new != OutsidePath {
		s.deleteTree(new)
		if _, ok := moved[new]; !ok {
			moved[new] = &finalEntry{kind: "moved", from: old}
		}
		moved[new].exists = true
		for k, e := range moved {
			s.m[k] = e
		}
	}
	if old != OutsidePath {
		s.m[old] = &finalEntry{kind: "deleted"}
	}
}

// lines returns the state as sorted canonical lines.
func (s *finalState) lines() []string {
	keys := make([]string, 0, len(s.m))
	for k, e := range s.m {
		if s.shows(k, e) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		e := s.m[k]
		kind, from := e.kind, e.from
		if from == k {
			from = "" // back where it was
			if kind == "moved" {
				kind = "lower"
			}
		}
		var b strings.Builder
		b.WriteString(quoteIfNeeded(k))
		b.WriteByte(' ')
		b.WriteString(kind)
		kv := func(k, v string) {
			if v != "" {
				b.WriteString(" " + k + "=" + quoteIfNeeded(v))
			}
		}
		kv("from", from)
		if e.kind == "file" {
			kv("size", strconv.FormatInt(e.size, 10))
		}
		kv("hash", e.hash)
		kv("target", e.target)
		kv("mode", e.mode)
		kv("owner", e.owner)
		kv("mtime", e.mtime)
		out[i] = b.String()
	}
	return out
}

// shows reports whether the entry at k differs from what the root held
// there, so that it gives a line: not for an entry as it was (lower, or
// moved from where its directory's move puts it, with nothing set), nor
// for a deleted path the root did not hold.
func (s *finalState) shows(k string, e *finalEntry) bool {
	switch e.kind {
	case "lower":
		return !e.plain()
	case "moved":
		return !e.plain() || e.from != s.origin(k)
	case "deleted":
		return !s.absentAt(k)
	}
	return true
}

func (s *finalState) digest() string {
	return HashBytes([]byte(strings.Join(s.lines(), "\n")))
}

// Final returns the end state the records describe, one canonical line per
// changed path in path order ("<path> <kind> key=value..."), as FORMAT.md
// defines for format 1.4, whatever the tape's version: a path made and
// removed where a record proved the root did not hold it gives no line, and
// an entry changed before its rename reads as one changed after. Its BLAKE3
// (lines joined by "\n") is the trailer's Final in tapes of minor 4 and
// later; older trailers hold that of the 1.3 final state, which Read
// checks instead.
func (t *Tape) Final() []string {
	s := newFinalState()
	for i := range t.Records {
		s.apply(&t.Records[i])
	}
	return s.lines()
}
