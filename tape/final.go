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

	// v5: the rules of minor 5 (FORMAT.md, "Final state"): a change
	// through a name whose entry may be a symlink, or a hard link, keeps
	// a residue line when that entry goes; a file the records prove
	// created has its mode; a symlink the records made is followed.
	v5       bool
	residue  []string        // v5: the lines of dropped entries whose changes may lie elsewhere
	symlinks int             // v5: symlink entries made, so that follow costs nothing without one
	drops    map[string]drop // v5: the last drop of an entry at each path (see lostAt)
	ndrops   int
}

// drop is what a path last lost: the drop's order among drops, whether
// the entry dropped there may have been a symlink or a hard link, and the
// root path it came from and the target it had.
type drop struct {
	n            int
	aliased      bool
	from, target string
	via          *finalEntry // a symlink the records made dropped: the entry it led to
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
	perm   string // v5: the permission an O_CREATE asked for, where the file may have been made by it
	live   bool   // v5: a call that follows the name succeeded, so it leads to something
}

// newFinalState returns an empty final state by the rules of the given
// minor version: those of 1.5 from minor 5 on, else those of 1.4.
func newFinalState(minor int) *finalState {
	return &finalState{m: map[string]*finalEntry{}, absent: map[string]bool{}, v5: minor >= throughMinor}
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

// plain reports an entry with no mode, owner or mtime set, nor (v5) a
// content or permission written through it.
func (e *finalEntry) plain() bool {
	return e.mode == "" && e.owner == "" && e.mtime == "" && e.hash == "" && e.perm == ""
}

// aliased reports an entry that may not be the object a call through its
// name reaches, or may share that object with another name: the root's
// entry (a symlink or a hard link, for all the records know) or a symlink
// the records made and could not follow.
func (e *finalEntry) aliased() bool {
	switch e.kind {
	case "lower", "moved", "ensured", "symlink":
		return true
	}
	return false
}

// through reports an aliased entry that a call changed through its name:
// the change may have landed at another path.
func (e *finalEntry) through() bool { return e.aliased() && !e.plain() }

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
	if s.v5 {
		p = s.follow(p, false) // the proofs follow no final symlink
	}
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
	if s.v5 {
		e.exists = true // link does not follow old: something is there
	}
	s.m[new] = e
}

func under(p, dir string) bool {
	return dir == "." && p != "." || strings.HasPrefix(p, dir+"/")
}

// drop forgets the entries under p, as deleteTree, and (v5) keeps a
// residue line for each of p and those below whose change may lie outside
// p: one made through an aliased entry, or below an entry that may be a
// symlink to a directory elsewhere (anything but a directory the records
// made). The caller replaces p's own entry.
func (s *finalState) drop(p string) {
	if s.v5 {
		if s.drops == nil {
			s.drops = map[string]drop{}
		}
		s.ndrops++
		s.get(p)
		for _, k := range s.keepResidue(p, true) {
			if t := s.follow(k, true); s.m[k].kind == "symlink" && t != k && t != OutsidePath {
				d := s.drops[k]
				d.via = s.get(t)
				s.drops[k] = d
			}
		}
	}
	s.deleteTree(p)
}

// lostAt returns the last drop at p or an ancestor, which took a
// handle's name at p away, and whether it may have dropped a symlink or a
// hard link (or there was none: the handle left by a rename out of the
// root): then what the handle wrote may live on through another name.
func (s *finalState) lostAt(p string) (drop, bool) {
	var last drop
	for a := p; ; a = path.Dir(a) {
		if d, ok := s.drops[a]; ok && d.n > last.n {
			last = d
		}
		if a == "." || a == OutsidePath {
			return last, last.aliased || last.n == 0
		}
	}
}

// keepResidue adds the residue lines of the entries at and under p whose
// change may lie outside p (see drop), and returns their paths. With note
// (a drop), it also notes for each whether it may be a symlink or a hard
// link (aliased, and not known absent), for a handle that loses its name
// by this drop (lostAt).
func (s *finalState) keepResidue(p string, note bool) []string {
	var kept []string
	for k, e := range s.m {
		if k != p && !under(k, p) {
			continue
		}
		if note {
			s.drops[k] = drop{s.ndrops, e.aliased() && !s.absentNow(k, e), e.from, e.target, nil}
			if e.kind == "symlink" && !e.through() {
				kept = append(kept, k) // for drop to follow
			}
		}
		if e.through() || k != p && !s.madeDirs(p, k) && s.shows(k, e) {
			s.residue = append(s.residue, s.line(k, e, true))
			kept = append(kept, k)
		}
	}
	return kept
}

// madeDirs reports whether p and every directory between it and k are
// directories the records made, so that k lies in p.
func (s *finalState) madeDirs(p, k string) bool {
	for a := path.Dir(k); ; a = path.Dir(a) {
		if e := s.m[a]; e == nil || e.kind != "dir" {
			return false
		}
		if a == p || a == "." {
			return a == p
		}
	}
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
	if s.v5 {
		s.apply5(r)
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
		s.get(r.Path).owner = owner(r)
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
		s.drop(r.Path)
		s.m[r.Path] = &finalEntry{kind: "file", hash: r.Hash, size: r.Size, mode: r.Mode}
	case OpCmdRemove:
		s.drop(r.Path)
		s.m[r.Path] = &finalEntry{kind: "deleted"}
	case OpCmdMkdir:
		e := s.get(r.Path)
		if e.kind != "dir" {
			s.drop(r.Path)
			*e = finalEntry{kind: "dir"}
		}
		e.mode = r.Mode
	case OpCmdSymlink:
		s.drop(r.Path)
		s.m[r.Path] = &finalEntry{kind: "symlink", target: r.Target}
		s.symlinks++
	case OpCmdChmod:
		s.get(r.Path).mode = r.Mode
	case OpCmdMknod:
		s.drop(r.Path)
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
	if s.v5 && path.Dir(old) != path.Dir(new) {
		s.pin(old)
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
		s.drop(new)
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

// pin keeps the residue of what was changed at and under old, which a
// rename moves to another directory: a relative symlink among them (the
// root's entry at old, or one below it) leads elsewhere from there, so a
// change made through it before the move is not one made after. An
// aliased entry pinned moves on with its changes forgotten (the residue
// says them); another is dropped, and its path reads as what the root
// held there.
func (s *finalState) pin(old string) {
	for _, k := range s.keepResidue(old, false) {
		e := s.m[k]
		if e.through() {
			e.hash, e.size, e.mode, e.perm, e.owner, e.mtime = "", 0, "", "", "", ""
			e.live = false // from there it may lead to nothing
		} else {
			delete(s.m, k)
		}
	}
}

// lines returns the state as sorted canonical lines, residues included.
func (s *finalState) lines() []string {
	out := slices.Clone(s.residue)
	for k, e := range s.m {
		if s.shows(k, e) {
			out = append(out, s.line(k, e, false))
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := strings.Compare(finalPath(a), finalPath(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return out
}

// line returns k's canonical line; a residue's kind is "residue" and the
// entry's kind follows as was.
func (s *finalState) line(k string, e *finalEntry, residue bool) string {
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
	kv := func(k, v string) {
		if v != "" {
			b.WriteString(" " + k + "=" + quoteIfNeeded(v))
		}
	}
	if residue {
		b.WriteString("residue")
		kv("was", kind)
	} else {
		b.WriteString(kind)
	}
	kv("from", from)
	if e.kind == "file" || e.hash != "" {
		kv("size", strconv.FormatInt(e.size, 10))
	}
	kv("hash", e.hash)
	kv("target", e.target)
	kv("mode", e.mode)
	kv("perm", e.perm)
	kv("owner", e.owner)
	kv("mtime", e.mtime)
	return b.String()
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
// defines for format 1.5, whatever the tape's version: a path made and
// removed where a record proved the root did not hold it gives no line, an
// entry changed before its rename reads as one changed after, and a change
// through a name that may be a symlink or a hard link leaves a residue
// line when that name's entry goes. Its BLAKE3 (lines joined by "\n") is
// the trailer's Final in tapes of minor 5 and later; those of minor 4 hold
// that of the 1.4 final state, which Read checks instead, and older
// trailers are not checked.
func (t *Tape) Final() []string {
	return t.final(Minor)
}

// final returns the final state by the rules of the given minor version.
func (t *Tape) final(minor int) []string {
	s := newFinalState(minor)
	for i := range t.Records {
		s.apply(&t.Records[i])
	}
	return s.lines()
}

// apply5 is apply by the rules of minor 5 for a successful record: a
// name is first followed through the symlinks the records made (follow);
// a write or create through an aliased entry keeps its entry and kind;
// remove, rename over and the command records keep residues (drop).
func (s *finalState) apply5(r *Record) {
	p := s.follow(r.Path, false)
	switch r.Op {
	case OpOpen:
		s.open5(r)
		return
	case OpLink:
		s.link(p, s.follow(r.To, false))
		return
	case OpRename:
		s.rename(p, s.follow(r.To, false))
		return
	case OpChmod, OpChown, OpChtimes:
		s.attr(r)
		return
	}
	if p == OutsidePath {
		return
	}
	switch r.Op {
	case OpMkdir:
		e := s.get(p)
		if e.kind != "dir" {
			*e = finalEntry{kind: "dir", mode: r.Mode}
		}
	case OpMkdirAll:
		s.mkdirAll(p, r.Mode)
	case OpSymlink:
		s.drop(p)
		s.m[p] = &finalEntry{kind: "symlink", target: r.Target}
		s.symlinks++
	case OpRemove, OpRemoveAll:
		s.drop(p)
		s.m[p] = &finalEntry{kind: "deleted"}
	default:
		s.applyCommand(r)
	}
}

// open5 applies a successful open by the rules of minor 5. A file the
// records prove made by it (its name was deleted or known absent) is a
// file with the permission asked for (the umask aside, as for mkdir); an
// O_CREATE through an aliased entry not yet known to lead anywhere may
// have made one, and says so with perm. A create that wrote nothing
// still leaves a file, empty where made.
func (s *finalState) open5(r *Record) {
	create := strings.Contains(r.Flag, "|create")
	if r.Hash == "" && !create {
		return
	}
	p := r.Path
	if r.To == OutsidePath && p != OutsidePath {
		if p = s.orphan(r, create); p == "" {
			return
		}
	} else if r.To != "" {
		p = r.To
	}
	if p = s.follow(p, true); p == OutsidePath {
		return
	}
	e := s.get(p)
	switch {
	case e.kind == "deleted" || s.absentNow(p, e):
		*e = finalEntry{kind: "file", hash: HashBytes(nil), mode: r.Mode}
	case e.aliased() && !e.live && create:
		e.perm = r.Mode
	}
	e.live = true
	if r.Hash != "" {
		e.hash, e.size, e.mtime = r.Hash, r.Size, "" // a write sets the mtime anew
	}
}

// orphan handles an open record whose handle lost its name in the root
// while open (removed, renamed over or out). Through a symlink the
// records made, the handle wrote to the entry it led to: orphan returns
// that entry's path now, for open5 to apply the record there. Otherwise
// what it wrote may live on elsewhere, as through a symlink or a hard
// link, unless the name was known to be neither when it went: orphan
// keeps a residue line for it and returns "".
func (s *finalState) orphan(r *Record, create bool) string {
	d, lost := s.lostAt(r.Path)
	if d.via != nil {
		for k, e := range s.m {
			if e == d.via {
				return k
			}
		}
		lost = d.via.aliased() // the target went too: only its residue, if any
	}
	if !lost {
		return ""
	}
	// Where the name led when it went: the root's entry at from, or the
	// target of a symlink the records made.
	e := &finalEntry{kind: "open", hash: r.Hash, size: r.Size, from: d.from, target: d.target}
	if create {
		e.perm = r.Mode
	}
	s.residue = append(s.residue, s.line(r.Path, e, true))
	return ""
}

// attr applies a successful chmod, chown or chtimes by the rules of minor
// 5: on the entry the name leads to through the symlinks the records
// made, which it proves leads somewhere.
func (s *finalState) attr(r *Record) {
	p := s.follow(r.Path, true)
	if p == OutsidePath {
		return
	}
	e := s.get(p)
	e.live = true
	switch r.Op {
	case OpChmod:
		e.mode, e.perm = r.Mode, "" // whatever a create made, chmod decides
	case OpChown:
		e.owner = owner(r)
	case OpChtimes:
		e.mtime = r.Mtime
	}
}

// owner returns a chown record's "uid:gid", either side empty when kept.
func owner(r *Record) string {
	var b strings.Builder
	if r.UID != nil {
		b.WriteString(strconv.Itoa(*r.UID))
	}
	b.WriteByte(':')
	if r.GID != nil {
		b.WriteString(strconv.Itoa(*r.GID))
	}
	return b.String()
}

// follow returns the path p leads to through the symlinks the records
// made, as the kernel would resolve it: each such symlink among p's
// directories (and p itself when final is set) is replaced by its target,
// up to 40 times. A target outside the root gives OutsidePath; a target
// with a ".." component is not followed (".." goes up from where the link
// really is, which a directory of unknown kind may hide), and what is
// done through it stays at the link's name.
func (s *finalState) follow(p string, final bool) string {
	if s.symlinks == 0 || p == OutsidePath {
		return p
	}
	for range 40 {
		q, ok := s.hop(p, final)
		if !ok {
			return p
		}
		if p = q; p == OutsidePath {
			return p
		}
	}
	return p
}

// hop replaces the first symlink the records made along p, reporting
// whether there was one it could follow.
func (s *finalState) hop(p string, final bool) (string, bool) {
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' || i == len(p) && !final {
			continue
		}
		e := s.m[p[:i]]
		if e == nil || e.kind != "symlink" {
			continue
		}
		t, ok := linkPath(path.Dir(p[:i]), e.target)
		if !ok {
			return p, false
		}
		if t == OutsidePath {
			return t, true
		}
		return path.Join(t, p[i:]), true
	}
	return p, false
}

// linkPath returns the root path a symlink in dir with link text target
// names, OutsidePath for one outside the root; false for a target that
// goes up with "..", or is empty.
func linkPath(dir, target string) (string, bool) {
	if target == "" || slices.Contains(strings.Split(target, "/"), "..") {
		return "", false
	}
	switch {
	case target == RootPrefix:
		return ".", true
	case strings.HasPrefix(target, RootPrefix+"/"):
		return path.Clean(target[len(RootPrefix)+1:]), true
	case path.IsAbs(target):
		return OutsidePath, true
	}
	return path.Join(dir, target), true
}
