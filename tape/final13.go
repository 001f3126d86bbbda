package tape

import (
	"slices"
	"strconv"
	"strings"
)

// finalState13 is the final state of format 1.0 to 1.3, kept unchanged so
// that their trailers still verify (1.4 changed it: see FORMAT.md). It
// replays successful records into the end state of every path
// the records changed. Paths only read, and paths outside the root, are not
// part of it.
type finalState13 struct {
	m map[string]*finalEntry13
}

type finalEntry13 struct {
	kind   string // "file", "dir", "symlink", "special", "deleted", "lower" (bytes never seen), "moved"
	from   string // moved: the path the lower entry came from
	hash   string
	size   int64
	mode   string
	target string
	owner  string
	mtime  string
}

func newFinalState13() *finalState13 { return &finalState13{m: map[string]*finalEntry13{}} }

func (s *finalState13) get(p string) *finalEntry13 {
	e := s.m[p]
	if e == nil {
		e = &finalEntry13{kind: "lower"}
		s.m[p] = e
	}
	return e
}

// link makes new a second name of the entry at old: both names share one
// entry, so that a later write or chmod through either shows in both. An
// untouched lower entry becomes moved from old first, so that new does not
// claim what the root held at its own path.
func (s *finalState13) link(old, new string) {
	if old == OutsidePath || new == OutsidePath {
		return
	}
	e := s.get(old)
	if e.kind == "lower" {
		e.kind, e.from = "moved", old
	}
	s.m[new] = e
}

func under13(p, dir string) bool {
	return dir == "." && p != "." || strings.HasPrefix(p, dir+"/")
}

func (s *finalState13) deleteTree(p string) {
	for k := range s.m {
		if under13(k, p) {
			delete(s.m, k)
		}
	}
}

func (s *finalState13) apply(r *Record) {
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
			*e = finalEntry13{}
		}
		e.kind, e.from, e.hash, e.size = "file", "", r.Hash, r.Size
	case OpMkdir, OpMkdirAll:
		e := s.get(r.Path)
		if e.kind != "dir" {
			*e = finalEntry13{kind: "dir", mode: r.Mode}
		}
	case OpSymlink:
		s.m[r.Path] = &finalEntry13{kind: "symlink", target: r.Target}
	case OpLink:
		s.link(r.Path, r.To)
	case OpRemove, OpRemoveAll:
		s.deleteTree(r.Path)
		s.m[r.Path] = &finalEntry13{kind: "deleted"}
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
	case OpCmdWrite:
		s.deleteTree(r.Path)
		s.m[r.Path] = &finalEntry13{kind: "file", hash: r.Hash, size: r.Size, mode: r.Mode}
	case OpCmdRemove:
		s.deleteTree(r.Path)
		s.m[r.Path] = &finalEntry13{kind: "deleted"}
	case OpCmdMkdir:
		e := s.get(r.Path)
		if e.kind != "dir" {
			s.deleteTree(r.Path)
			*e = finalEntry13{kind: "dir"}
		}
		e.mode = r.Mode
	case OpCmdSymlink:
		s.deleteTree(r.Path)
		s.m[r.Path] = &finalEntry13{kind: "symlink", target: r.Target}
	case OpCmdChmod:
		s.get(r.Path).mode = r.Mode
	case OpCmdMknod:
		s.deleteTree(r.Path)
		s.m[r.Path] = &finalEntry13{kind: "special", mode: r.Mode}
	}
}

func (s *finalState13) rename(old, new string) {
	if old == new {
		return
	}
	moved := map[string]*finalEntry13{}
	for k, e := range s.m {
		if k == old || under13(k, old) {
			moved[new+k[len(old):]] = e
			delete(s.m, k)
		}
	}
	if new != OutsidePath {
		s.deleteTree(new)
		if _, ok := moved[new]; !ok {
			moved[new] = &finalEntry13{kind: "moved", from: old}
		}
		for k, e := range moved {
			s.m[k] = e
		}
	}
	if old != OutsidePath {
		s.m[old] = &finalEntry13{kind: "deleted"}
	}
}

// lines returns the state as sorted canonical lines.
func (s *finalState13) lines() []string {
	keys := make([]string, 0, len(s.m))
	for k, e := range s.m {
		if e.kind == "lower" && e.mode == "" && e.owner == "" && e.mtime == "" {
			continue // touched by nothing that changes it
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		e := s.m[k]
		var b strings.Builder
		b.WriteString(quoteIfNeeded(k))
		b.WriteByte(' ')
		b.WriteString(e.kind)
		kv := func(k, v string) {
			if v != "" {
				b.WriteString(" " + k + "=" + quoteIfNeeded(v))
			}
		}
		kv("from", e.from)
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

// final13 returns the final-state lines as tapes of minor versions 0 to 3
// computed them, to verify their trailers.
func (t *Tape) final13() []string {
	s := newFinalState13()
	for i := range t.Records {
		s.apply(&t.Records[i])
	}
	return s.lines()
}
