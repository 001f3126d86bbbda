package overlayfs

import (
	"io/fs"
	"os"
	"slices"
	"strings"
)

// dirent is one entry of a merged directory listing.
type dirent struct {
	name string
	n    node        // layer node, or a lower node whose fi is not yet read
	de   fs.DirEntry // lower entry, when !n.layer
	fi   fs.FileInfo // layer entry's info, taken when listed
}

// listLocked returns the merged listing of the directory rel, sorted by
// name: layer children (whiteouts hidden) over the lower's children when
// the lower shows through. Cost: one lower ReadDir plus the layer children;
// the layer's deeper descendants are skipped, not visited.
func (f *layer) listLocked(rel string, n node) ([]dirent, error) {
	prefix := ""
	if rel != "" {
		prefix = rel + "/"
	}
	var out []dirent
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
			cn := node{kind: e.kind, layer: true, e: e, under: n.under && e.kind == kindDir && !e.opaque}
			out = append(out, dirent{name: name, n: cn, fi: f.infoLocked(name, cn)})
		}
		ok = it.Next()
	}
	if n.under {
		d, err := os.Open(f.host(rel))
		if err != nil {
			return nil, err
		}
		des, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			return nil, err
		}
		for _, de := range des {
			if _, found := slices.BinarySearch(hidden, de.Name()); found {
				continue
			}
			k := kindOfMode(de.Type())
			out = append(out, dirent{name: de.Name(), n: node{kind: k, under: k == kindDir}, de: de})
		}
	}
	slices.SortFunc(out, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// info returns the FileInfo of a listed entry; lower entries are Lstat'ed
// now, as os's Readdir does.
func (d *dirent) info() (fs.FileInfo, error) {
	if d.fi != nil {
		return d.fi, nil
	}
	return d.de.Info()
}

// dirEntry adapts a dirent of a directory handle to fs.DirEntry.
type dirEntry struct {
	d dirent
	h *dir
}

func (e dirEntry) Name() string { return e.d.name }
func (e dirEntry) IsDir() bool  { return e.d.n.kind == kindDir }
func (e dirEntry) Type() fs.FileMode {
	if e.d.de != nil {
		return e.d.de.Type()
	}
	return e.d.fi.Mode().Type()
}
func (e dirEntry) Info() (fs.FileInfo, error) { return e.h.info(e.d) }
func (e dirEntry) String() string             { return fs.FormatDirEntry(e) }
