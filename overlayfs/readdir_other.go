//go:build !linux

package overlayfs

import (
	"io/fs"
	"os"
)

// lowerEntries are a lower directory's entries as os gave them, with what
// the listing mode asks for, and their order by name: entry i (in that
// order) is entry order[i].idx of the slices.
type lowerEntries struct {
	names []string
	types []fs.FileMode // listTypes
	infos []fs.FileInfo // listInfos
	order []keyed
}

func (le *lowerEntries) len() int               { return len(le.order) }
func (le *lowerEntries) name(i int) string      { return le.names[le.order[i].idx] }
func (le *lowerEntries) typ(i int) fs.FileMode  { return le.types[le.order[i].idx] }
func (le *lowerEntries) info(i int) fs.FileInfo { return le.infos[le.order[i].idx] }

// readLowerDir reads the open lower directory d from its offset to its
// end, with os's call for the mode, and sorts the entries by name.
func readLowerDir(d *os.File, mode listMode) (lowerEntries, error) {
	le, err := readLowerOS(d, mode)
	if err != nil {
		return lowerEntries{}, err
	}
	le.order = nameOrder(len(le.names), func(i int) string { return le.names[i] })
	return le, nil
}

func readLowerOS(d *os.File, mode listMode) (lowerEntries, error) {
	var le lowerEntries
	switch mode {
	case listNames:
		names, err := d.Readdirnames(-1)
		le.names = names
		return le, err
	case listInfos:
		fis, err := d.Readdir(-1)
		if err != nil {
			return lowerEntries{}, err
		}
		le.infos = fis
		le.names = make([]string, len(fis))
		for i, fi := range fis {
			le.names[i] = fi.Name()
		}
		return le, nil
	}
	des, err := d.ReadDir(-1)
	if err != nil {
		return lowerEntries{}, err
	}
	le.names = make([]string, len(des))
	le.types = make([]fs.FileMode, len(des))
	for i, de := range des {
		le.names[i], le.types[i] = de.Name(), de.Type()
	}
	return le, nil
}
