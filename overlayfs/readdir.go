package overlayfs

import (
	"io/fs"
	"os"
	"strings"
)

// dirent is one entry of a merged directory listing.
type dirent struct {
	name  string
	typ   fs.FileMode // type bits; typeUnknown when listed by name only
	layer bool        // from the layer: its node is looked up when needed
	fi    fs.FileInfo // the lower's Lstat, when listed with infos
}

// typeUnknown marks a dirent listed by name only (no type bit is ever all
// of these at once).
const typeUnknown = ^fs.FileMode(0)

// listMode is what a listing reads of each lower entry: what the os call it
// serves reads, so that it costs what that call costs.
type listMode uint8

const (
	listTypes listMode = iota // names and types (getdents): ReadDir and the Fs's own operations
	listNames                 // names only: Readdirnames
	listInfos                 // an Lstat of each, relative to the open directory: Readdir
)

// listLocked returns the merged listing of the directory rel, with types,
// sorted by name.
func (f *Fs) listLocked(rel string, n node) ([]dirent, error) {
	return f.listDirLocked(rel, n, listTypes, nil)
}

// listDirLocked returns the merged listing of the directory rel, sorted by
// name: layer children (whiteouts hidden) over the lower's children when
// the lower shows through, read from lower when it is open on rel (else
// opened). Cost: what os's call of the same mode costs for the lower, plus
// the layer's children (their descendants are skipped, not visited) and a
// radix sort of the names.
func (f *Fs) listDirLocked(rel string, n node, mode listMode, lower *os.File) ([]dirent, error) {
	prefix := ""
	if rel != "" {
		prefix = rel + "/"
	}
	var shown []dirent
	var hidden []string // layer names, whiteouts included, in order
	it := f.paths.Iter()
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
		e := it.Value()
		hidden = append(hidden, name)
		if e.kind != kindWhiteout {
			shown = append(shown, dirent{name: name, typ: typeOfKind(e.kind), layer: true})
		}
		ok = it.Next()
	}
	if !n.under {
		return shown, nil
	}
	if lower == nil {
		d, err := os.Open(f.host(rel))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		lower = d
	}
	return readLower(lower, mode, shown, hidden)
}

// readLower reads the open directory d in the given mode and merges its
// entries, sorted, with shown (sorted), leaving out the names in hidden
// (sorted).
func readLower(d *os.File, mode listMode, shown []dirent, hidden []string) ([]dirent, error) {
	switch mode {
	case listNames:
		names, err := d.Readdirnames(-1)
		if err != nil {
			return nil, err
		}
		return mergeLower(names, func(s string) string { return s }, func(s string) dirent {
			return dirent{name: s, typ: typeUnknown}
		}, shown, hidden), nil
	case listInfos:
		fis, err := d.Readdir(-1)
		if err != nil {
			return nil, err
		}
		return mergeLower(fis, fs.FileInfo.Name, func(fi fs.FileInfo) dirent {
			return dirent{name: fi.Name(), typ: fi.Mode().Type(), fi: fi}
		}, shown, hidden), nil
	}
	des, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	return mergeLower(des, fs.DirEntry.Name, func(de fs.DirEntry) dirent {
		return dirent{name: de.Name(), typ: de.Type()}
	}, shown, hidden), nil
}

// mergeLower sorts the lower's entries and merges them with the layer's:
// one pass, as both are sorted.
func mergeLower[T any](low []T, name func(T) string, ent func(T) dirent, shown []dirent, hidden []string) []dirent {
	sortByName(low, name)
	out := make([]dirent, 0, len(low)+len(shown))
	i, j := 0, 0
	for _, x := range low {
		nx := name(x)
		for j < len(hidden) && hidden[j] < nx {
			j++
		}
		if j < len(hidden) && hidden[j] == nx {
			continue // the layer has it, or a whiteout hides it
		}
		for i < len(shown) && shown[i].name < nx {
			out = append(out, shown[i])
			i++
		}
		out = append(out, ent(x))
	}
	return append(out, shown[i:]...)
}

// typeOfKind returns the type bits of a layer entry of kind k.
func typeOfKind(k kind) fs.FileMode {
	switch k {
	case kindDir:
		return fs.ModeDir
	case kindSymlink:
		return fs.ModeSymlink
	case kindFIFO:
		return fs.ModeNamedPipe
	case kindSocket:
		return fs.ModeSocket
	}
	return 0
}

// nodeOf returns the node of an entry listed in the directory rel, whose
// lower shows through when under: a layer entry as the layer has it now,
// a lower one as listed.
func (f *Fs) nodeOf(rel string, under bool, d dirent) node {
	switch {
	case d.layer:
		n, _ := f.lookup(join(rel, d.name), under)
		return n
	case d.typ == typeUnknown:
		return f.lowerNode(join(rel, d.name))
	}
	k := kindOfMode(d.typ)
	return node{kind: k, fi: d.fi, under: k == kindDir}
}

// dirEntry adapts a dirent of a directory handle to fs.DirEntry.
type dirEntry struct {
	d dirent
	h *dir
}

func (e dirEntry) Name() string               { return e.d.name }
func (e dirEntry) IsDir() bool                { return e.d.typ.IsDir() }
func (e dirEntry) Type() fs.FileMode          { return e.d.typ }
func (e dirEntry) Info() (fs.FileInfo, error) { return e.h.info(e.d) }
func (e dirEntry) String() string             { return fs.FormatDirEntry(e) }
