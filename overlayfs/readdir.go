package overlayfs

import (
	"io/fs"
	"os"
	"strings"
)

// listing is a merged directory listing, sorted by name, in parallel
// slices.
type listing struct {
	names []string
	types []fs.FileMode // type bits per name; nil when listed by name only
	infos []fs.FileInfo // per name, the lower's Lstat when listed with infos (nil for the layer's); else nil
}

// page returns the entries [i, j), capped so that a caller appending to a
// page cannot write over the next.
func (l listing) page(i, j int) listing {
	p := listing{names: l.names[i:j:j]}
	if l.types != nil {
		p.types = l.types[i:j:j]
	}
	if l.infos != nil {
		p.infos = l.infos[i:j:j]
	}
	return p
}

// typeAt returns the type bits of entry i, if it was listed with them.
func (l listing) typeAt(i int) (fs.FileMode, bool) {
	if l.types == nil {
		return 0, false
	}
	return l.types[i], true
}

// infoAt returns the lower's Lstat of entry i, if it was listed with one.
func (l listing) infoAt(i int) fs.FileInfo {
	if l.infos == nil {
		return nil
	}
	return l.infos[i]
}

// listMode is what a listing reads of each lower entry: what the os call it
// serves reads, so that it costs what that call costs.
type listMode uint8

const (
	listTypes listMode = iota // names and types (getdents): ReadDir and the Fs's own operations
	listNames                 // names only: Readdirnames
	listInfos                 // an Lstat of each, relative to the open directory: Readdir
)

// listLocked returns the merged listing of the directory rel, with types.
func (l *layer) listLocked(rel string, n node) (listing, error) {
	return l.listDirLocked(rel, n, listTypes, nil)
}

// listDirLocked returns the merged listing of the directory rel: layer
// children (whiteouts hidden) over the lower's children when the lower
// shows through, read from lower when it is open on rel (else opened).
// Cost: what os's call of the same mode costs for the lower, plus the
// layer's children (their descendants are skipped, not visited) and a
// radix sort of the names.
func (l *layer) listDirLocked(rel string, n node, mode listMode, lower *os.File) (listing, error) {
	hidden, es := l.childrenLocked(rel) // whiteouts included
	var shown listing
	for i, e := range es {
		if e.kind != kindWhiteout {
			shown.names = append(shown.names, hidden[i])
			shown.types = append(shown.types, typeOfKind(e.kind))
		}
	}
	if !n.under {
		return shown, nil
	}
	if lower == nil {
		d, err := openLower(l.host(rel), os.O_RDONLY)
		if err != nil {
			return listing{}, err
		}
		defer d.Close()
		lower = d
	}
	out, err := readLower(lower, mode, shown, hidden)
	if err == nil {
		// What lookups in rel go by is this listing from now on: a lower
		// changed since the last one shows the same in both (issue 23).
		l.lower().relisted(rel, out.names, hidden)
	}
	return out, err
}

// childrenLocked returns the layer's entries directly in the directory
// rel (whiteouts included), in name order; their descendants are skipped,
// not visited.
func (l *layer) childrenLocked(rel string) (names []string, es []entry) {
	prefix := ""
	if rel != "" {
		prefix = rel + "/"
	}
	it := l.paths.Iter()
	for ok := it.Seek(prefix); ok; {
		k := it.Key()
		if !strings.HasPrefix(k, prefix) {
			break
		}
		name := k[len(prefix):]
		if name == "" {
			ok = it.Next()
			continue
		}
		if i := strings.IndexByte(name, '/'); i >= 0 {
			ok = it.Seek(prefix + name[:i] + "0") // '0' follows '/': past the subtree
			continue
		}
		names = append(names, name)
		es = append(es, it.Value())
		ok = it.Next()
	}
	return names, es
}

// readLower reads the open directory d in the given mode and merges its
// entries, sorted, with shown (sorted, with types), leaving out the names
// in hidden (sorted). On a failure it returns no entries, where os would
// return those it read before: a merged, sorted listing has no such
// prefix.
func readLower(d *os.File, mode listMode, shown listing, hidden []string) (listing, error) {
	low, err := readLowerDir(d, mode)
	if err != nil {
		return listing{}, err
	}
	return mergeLower(&low, mode, shown, hidden), nil
}

// mergeLower merges the lower's entries (sorted) with the layer's:
// shown, and hidden, the names of all the layer's children there (sorted,
// shown's among them). The lower's entries between two layer names are
// copied without comparing them: a layer name's place among the lower's
// is found by a galloping search from the last one's, so the merge costs
// O(m log(n/m)) comparisons for m layer names, not O(n).
func mergeLower(low *lowerEntries, mode listMode, shown listing, hidden []string) listing {
	size := low.len() + len(shown.names)
	out := listing{names: make([]string, 0, size)}
	typed, infos := mode == listTypes, mode == listInfos
	if typed {
		out.types = make([]fs.FileMode, 0, size)
	}
	if infos {
		out.infos = make([]fs.FileInfo, 0, size)
	}
	pos := 0 // the next lower entry
	lowerTo := func(end int) {
		for ; pos < end; pos++ {
			out.names = append(out.names, low.name(pos))
			if typed {
				out.types = append(out.types, low.typ(pos))
			}
			if infos {
				out.infos = append(out.infos, low.info(pos))
			}
		}
	}
	i := 0 // the next layer entry shown
	for _, h := range hidden {
		at := low.search(pos, h)
		lowerTo(at)
		if at < low.len() && low.name(at) == h {
			pos++ // the layer has it, or a whiteout hides it
		}
		if i < len(shown.names) && shown.names[i] == h {
			out.names = append(out.names, h)
			if typed {
				out.types = append(out.types, shown.types[i])
			}
			if infos {
				out.infos = append(out.infos, nil)
			}
			i++
		}
	}
	lowerTo(low.len())
	return out
}

// search returns the index of the first of the lower's entries from
// start on whose name is not below name, galloping from start.
func (le *lowerEntries) search(start int, name string) int {
	n := le.len()
	lo, step := start, 1 // every entry before lo is below name
	for lo+step-1 < n && nameCmp(le.name(lo+step-1), name) < 0 {
		lo += step
		step *= 2
	}
	hi := min(lo+step-1, n) // the entry at hi, if any, is not below name
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if nameCmp(le.name(mid), name) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// nodeOf returns the node of entry i of a listing of the directory rel,
// whose lower shows through when under: a layer entry as the layer has it
// now, a lower one as listed.
func (l *layer) nodeOf(rel string, under bool, at listing, i int) node {
	p := join(rel, at.names[i])
	typ, typed := at.typeAt(i)
	if _, inLayer := l.paths.Get(p); inLayer || !typed {
		n, _ := l.lookup(p, under)
		return n
	}
	k := kindOfMode(typ)
	return node{kind: k, fi: at.infoAt(i), under: k == kindDir}
}

// dirEntry adapts an entry of a directory handle's listing to fs.DirEntry.
type dirEntry struct {
	name string
	typ  fs.FileMode
	h    *dir
}

func (e dirEntry) Name() string               { return e.name }
func (e dirEntry) IsDir() bool                { return e.typ.IsDir() }
func (e dirEntry) Type() fs.FileMode          { return e.typ }
func (e dirEntry) Info() (fs.FileInfo, error) { return e.h.info(e.name) }
func (e dirEntry) String() string             { return fs.FormatDirEntry(e) }
