package kernel

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cowfs/cowfs/internal/relpath"
	"github.com/cowfs/cowfs/internal/unixmode"
	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
)

// OCI layer markers (image-spec layer.md, "Whiteouts").
const (
	whPrefix = ".wh."
	whOpaque = ".wh..wh..opq"
)

// WriteOCILayer writes f's layer as an OCI image layer tar (PAX format, so
// long names, nanosecond times and owners survive): files, directories,
// symlinks and FIFOs as themselves, a deletion as an empty file ".wh.<name>" next to
// it, a directory that hides a lower directory followed by its
// ".wh..wh..opq" marker. As with [Materialize], whiteouts and opaque
// markers appear only where they hide something, and directories the layer
// does not hold but whose children it does are written with the lower's
// metadata. A directory is written with its modification time in the view
// (see [overlayfs.Fs.DirTimes]), a lower one the layer made, removed or
// renamed entries in with the lower's other metadata; where that moved
// the root's, a "./" directory header (the view's root) comes first. A
// layer name starting with ".wh.", and a socket (tar has no type for it),
// cannot be carried: the error wraps [ErrUnrepresentable].
func WriteOCILayer(f *overlayfs.Fs, w io.Writer) error {
	steps, _, rootTime, err := planLayerRoot(f)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	if !rootTime.IsZero() {
		// Entries made, removed or renamed at the top moved the root's
		// time: "./" carries it (ReadOCILayer takes only the time).
		fi, err := f.Lstat(f.Root())
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: int64(unixmode.Perm(specialPerm(fi.Mode()))), ModTime: rootTime, Format: tar.FormatPAX}
		hdr.Uid, hdr.Gid, _ = ownerOf(fi)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	for _, s := range steps {
		if strings.HasPrefix(path.Base(s.Path), whPrefix) {
			return ociError(s.Path, ErrUnrepresentable)
		}
		hdr := &tar.Header{
			Name: s.Path, Mode: int64(unixmode.Perm(s.Mode)), ModTime: s.ModTime,
			Uid: s.Uid, Gid: s.Gid, Format: tar.FormatPAX,
		}
		switch s.Type {
		case overlayfs.EntryWhiteout:
			hdr = &tar.Header{
				Name: path.Join(path.Dir(s.Path), whPrefix+path.Base(s.Path)), Typeflag: tar.TypeReg,
				Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX,
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case overlayfs.EntryDir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, s.Path+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if s.markOpaque {
				mark := &tar.Header{Name: s.Path + "/" + whOpaque, Typeflag: tar.TypeReg, Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
				if err := tw.WriteHeader(mark); err != nil {
					return err
				}
			}
		case overlayfs.EntrySymlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, s.Target
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case overlayfs.EntryFile:
			hdr.Typeflag, hdr.Size = tar.TypeReg, s.Size
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if s.Size > 0 {
				r, err := s.Open()
				if err != nil {
					return ociError(s.Path, fmt.Errorf("layer content: %w", err))
				}
				_, err = io.Copy(tw, r)
				r.Close()
				if err != nil {
					return ociError(s.Path, err)
				}
			}
		case overlayfs.EntryFIFO:
			hdr.Typeflag = tar.TypeFifo
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		default: // a socket: tar has no type for it
			return ociError(s.Path, fmt.Errorf("%v: %w", s.Type, ErrUnrepresentable))
		}
	}
	return tw.Close()
}

// ociItem is one path of a layer tar after markers are resolved.
type ociItem struct {
	e        overlayfs.LayerEntry
	opaque   bool
	content  []byte
	linkTo   string // hard link: content of this path
	explicit bool   // had its own header (not only a marker's parent)
}

// ReadOCILayer reads an OCI image layer tar and stacks it on f's view as
// the kernel stacks an upper dir: entries replace, ".wh.<name>" removes
// name, ".wh..wh..opq" makes its directory hide everything below it. As the
// image spec says, markers act on what is below the layer only, never on
// entries of the same tar, whatever their order. Also accepted, as written
// by tools that tar an overlay upper directly: a 0/0 character device as a
// whiteout and a PAX xattr trusted.overlay.opaque=y or user.overlay.opaque=y;
// a PAX redirect or metacopy xattr is refused ([ErrRedirect], [ErrMetacopy]).
// Hard links become copies: a link's target must be a file or symlink of
// the same tar, or of f's view (the layers read before), reached without
// following any symlink; else [ErrLinkTarget]. FIFOs become FIFO entries;
// devices are refused with [ErrUnsupportedType]; names that leave the
// layer ("..", absolute) with fs.ErrInvalid; the root's ".cowfs-commit",
// which Commit keeps for its journal, with [ErrReservedName]. A "./"
// directory header gives the view's root its time (only: the root is no
// layer entry); the directories of the tar show their headers' times,
// whiteouts applied in them notwithstanding. Everything
// is read and checked before f changes, file contents held in memory
// meanwhile, and the layer is applied all or nothing: on any error f is
// as it was.
func ReadOCILayer(r io.Reader, f *overlayfs.Fs) error {
	l := &ociLayer{items: map[string]*ociItem{}, whiteouts: map[string]bool{}}
	if err := l.read(tar.NewReader(r)); err != nil {
		return err
	}
	if err := l.resolveLinks(f); err != nil {
		return err
	}
	// All or nothing: an entry refused while applying (a file where the
	// view has a file as its parent) takes back those applied before it.
	snap := f.Snapshot()
	if err := applyOCI(f, l.items, l.whiteouts); err != nil {
		f.Restore(snap)
		return err
	}
	if err := l.dirTimes(f); err != nil {
		f.Restore(snap)
		return err
	}
	return nil
}

// dirTimes gives the directories the tar describes their header's time
// in the view, and the root that of "./": applying a whiteout in one
// moved it (see [overlayfs.Fs.PutDirTime]).
func (l *ociLayer) dirTimes(f *overlayfs.Fs) error {
	if !l.rootTime.IsZero() {
		if err := f.PutDirTime(".", l.rootTime); err != nil {
			return ociError(".", err)
		}
	}
	kept := map[string]time.Time{}
	for rel, t := range f.DirTimes() {
		kept[rel] = t
	}
	for p, it := range l.items {
		if t, ok := kept[p]; ok && it.explicit && it.e.Type == overlayfs.EntryDir && !t.Equal(it.e.ModTime) {
			if err := f.PutDirTime(p, it.e.ModTime); err != nil {
				return ociError(p, err)
			}
		}
	}
	return nil
}

// ociError is the one shape of the OCI reader's and writer's errors: a
// *fs.PathError with Op "oci" naming the entry (the layer root "." for
// the tar stream itself), as the package doc promises.
func ociError(name string, err error) error {
	return &fs.PathError{Op: "oci", Path: name, Err: err}
}

// ociLayer is a layer tar read and resolved, before it touches f.
type ociLayer struct {
	items     map[string]*ociItem
	whiteouts map[string]bool
	rootTime  time.Time // of a "./" directory header; zero without
}

// dir returns the item of directory p, made implicit if the tar has not
// described it yet.
func (l *ociLayer) dir(p string) *ociItem {
	it := l.items[p]
	if it == nil {
		it = &ociItem{e: overlayfs.LayerEntry{Path: p, Type: overlayfs.EntryDir, Mode: 0o755}}
		l.items[p] = it
	}
	return it
}

// read takes every header of the tar: markers, then entries.
func (l *ociLayer) read(tr *tar.Reader) error {
	last := "."
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return ociError(last, err)
		}
		last = hdr.Name
		name, ok := cleanTarName(hdr.Name)
		if !ok {
			return ociError(hdr.Name, fs.ErrInvalid)
		}
		if name == "." {
			if hdr.Typeflag == tar.TypeDir {
				l.rootTime = hdr.ModTime // the view's root shows it
			}
			continue // the layer root: a layer has no entry for it
		}
		if relpath.Within(name, commitJournal) {
			return ociError(hdr.Name, ErrReservedName)
		}
		marker, err := l.marker(hdr, name)
		if err != nil {
			return ociError(hdr.Name, err)
		}
		if marker {
			continue
		}
		if err := l.entry(hdr, name, tr); err != nil {
			return ociError(hdr.Name, err)
		}
	}
}

// marker takes a whiteout or opaque marker file, reporting whether hdr
// was one.
func (l *ociLayer) marker(hdr *tar.Header, name string) (bool, error) {
	dir, base := parentOf(name), path.Base(name)
	if base == whOpaque {
		if dir != "." { // an opaque root cannot be expressed; nothing below the layer is root-level opaque
			l.dir(dir).opaque = true
		}
		return true, nil
	}
	target, ok := strings.CutPrefix(base, whPrefix)
	if !ok {
		return false, nil
	}
	if target == "" || target == "." || target == ".." {
		return true, fs.ErrInvalid
	}
	l.whiteouts[path.Join(dir, target)] = true
	return true, nil
}

// overlayXattrs maps the overlay xattrs of an upper directory tarred as it
// is (PAX SCHILY.xattr records, either namespace): opaque=y on a directory
// makes it opaque; redirect and metacopy cannot be expressed.
func overlayXattrs(hdr *tar.Header) (opaque bool, err error) {
	for k, v := range hdr.PAXRecords {
		x, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		attr, ok := strings.CutPrefix(x, "trusted.overlay.")
		if !ok {
			if attr, ok = strings.CutPrefix(x, "user.overlay."); !ok {
				continue
			}
		}
		switch attr {
		case "opaque":
			opaque = opaque || v == "y" && hdr.Typeflag == tar.TypeDir
		case "redirect":
			return false, ErrRedirect
		case "metacopy":
			return false, ErrMetacopy
		}
	}
	return opaque, nil
}

// entry takes one entry header (and a file's content from tr).
func (l *ociLayer) entry(hdr *tar.Header, name string, tr io.Reader) error {
	opaque, err := overlayXattrs(hdr)
	if err != nil {
		return err
	}
	if opaque {
		l.dir(name).opaque = true
	}
	e := overlayfs.LayerEntry{
		Path: name, Mode: specialPerm(unixmode.FileMode(uint32(hdr.Mode))), ModTime: hdr.ModTime,
		Uid: hdr.Uid, Gid: hdr.Gid,
	}
	it := &ociItem{explicit: true}
	switch hdr.Typeflag {
	case tar.TypeDir:
		e.Type = overlayfs.EntryDir
	case tar.TypeReg, '\x00': // '\x00' is the pre-POSIX regular file
		if isSparse(hdr) {
			// Its holes would be expanded in memory: a few bytes of tar
			// can claim terabytes.
			return fmt.Errorf("sparse file: %w", ErrUnsupportedType)
		}
		e.Type = overlayfs.EntryFile
		if it.content, err = io.ReadAll(tr); err != nil {
			return err
		}
		e.Size = int64(len(it.content))
	case tar.TypeSymlink:
		e.Type, e.Target = overlayfs.EntrySymlink, hdr.Linkname
	case tar.TypeLink:
		target, ok := cleanTarName(hdr.Linkname)
		if !ok || target == "." {
			return fs.ErrInvalid
		}
		e.Type, it.linkTo = overlayfs.EntryFile, target
	case tar.TypeFifo:
		e.Type = overlayfs.EntryFIFO
	case tar.TypeChar:
		if hdr.Devmajor != 0 || hdr.Devminor != 0 {
			return ErrUnsupportedType
		}
		l.whiteouts[name] = true
		return nil
	default:
		return fmt.Errorf("tar type %q: %w", hdr.Typeflag, ErrUnsupportedType)
	}
	it.e = e
	if old := l.items[name]; old != nil && e.Type == overlayfs.EntryDir {
		it.opaque = old.opaque // a marker or xattr seen first
	}
	l.items[name] = it
	return nil
}

// resolveLinks gives each hard link what its target is: an entry of the
// same tar (a file's content, a symlink's target), or else, as the image
// spec allows, a file or symlink of the layers below, f's view. A target
// there is looked up one component at a time without following any
// symlink, so that a link can never read through a symlink out of the
// root (as a rootfs's etc/localtime -> /usr/share/zoneinfo/... would
// lead). Anything else is refused with [ErrLinkTarget].
func (l *ociLayer) resolveLinks(f *overlayfs.Fs) error {
	for p, it := range l.items {
		if it.linkTo == "" {
			continue
		}
		src := l.items[it.linkTo]
		switch {
		case src != nil && src.linkTo == "" && src.e.Type == overlayfs.EntryFile:
			it.content = src.content
		case src != nil && src.linkTo == "" && src.e.Type == overlayfs.EntrySymlink:
			it.e.Type, it.e.Target = overlayfs.EntrySymlink, src.e.Target
		case src != nil:
			return ociError(p, fmt.Errorf("hard link to %s, not a file or symlink of the layer: %w", it.linkTo, ErrLinkTarget))
		default:
			if err := linkFromView(f, it); err != nil {
				return ociError(p, err)
			}
		}
		it.e.Size = int64(len(it.content))
	}
	return nil
}

// linkFromView resolves hard link it to a file or symlink of f's view,
// following no symlink on the way.
func linkFromView(f *overlayfs.Fs, it *ociItem) error {
	p := f.Root()
	parts := strings.Split(it.linkTo, "/")
	for i, c := range parts {
		p = filepath.Join(p, c)
		fi, err := f.Lstat(p)
		if err != nil {
			return fmt.Errorf("hard link to %s: no such file in this layer or below it: %w", it.linkTo, ErrLinkTarget)
		}
		switch {
		case i < len(parts)-1 && fi.IsDir():
		case i < len(parts)-1:
			return fmt.Errorf("hard link to %s: %s is not a directory (links are not followed through symlinks): %w",
				it.linkTo, strings.Join(parts[:i+1], "/"), ErrLinkTarget)
		case fi.Mode().IsRegular():
			b, err := afero.ReadFile(f, p)
			if err != nil {
				return fmt.Errorf("hard link target: %w", err)
			}
			it.content = b
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := f.ReadlinkIfPossible(p)
			if err != nil {
				return fmt.Errorf("hard link target: %w", err)
			}
			it.e.Type, it.e.Target = overlayfs.EntrySymlink, t
		default:
			return fmt.Errorf("hard link to %s, a %v, not a file or symlink: %w", it.linkTo, fi.Mode().Type(), ErrLinkTarget)
		}
	}
	return nil
}

func isSparse(hdr *tar.Header) bool {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// applyOCI stacks the layer on f in bytewise path order, which puts every
// parent first. At each path a whiteout first removes what is below, then
// the layer's own entry (if any) goes on top; an opaque directory replaces
// whatever was below with an empty one before its children arrive.
func applyOCI(f *overlayfs.Fs, items map[string]*ociItem, whiteouts map[string]bool) error {
	abs := func(p string) string { return filepath.Join(f.Root(), filepath.FromSlash(p)) }
	// Directories named only as parents (no header of their own).
	for p := range items {
		for d := parentOf(p); d != "."; d = parentOf(d) {
			if _, ok := items[d]; !ok {
				items[d] = &ociItem{e: overlayfs.LayerEntry{Path: d, Type: overlayfs.EntryDir, Mode: 0o755}}
			}
		}
	}
	paths := make([]string, 0, len(items)+len(whiteouts))
	for p := range items {
		paths = append(paths, p)
	}
	for p := range whiteouts {
		if _, ok := items[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	euid, egid := os.Geteuid(), os.Getegid()
	for _, p := range paths {
		it := items[p]
		cur, curErr := f.Lstat(abs(p))
		if whiteouts[p] && curErr == nil {
			if err := f.PutEntry(overlayfs.LayerEntry{Path: p, Type: overlayfs.EntryWhiteout}, nil); err != nil {
				return ociError(p, err)
			}
			cur, curErr = nil, fs.ErrNotExist
		}
		if it == nil {
			continue
		}
		e := it.e
		switch {
		case !it.explicit && curErr == nil && cur.IsDir():
			// A parent the tar never described: keep what is there.
			if !it.opaque {
				continue
			}
			e = dirEntryFrom(p, cur)
			e.Opaque = true
		case !it.explicit:
			e.ModTime, e.Uid, e.Gid, e.Opaque = time.Unix(0, 0), euid, egid, true
		case e.Type == overlayfs.EntryDir:
			e.Opaque = it.opaque || curErr != nil || !cur.IsDir()
		}
		var content io.Reader
		if e.Type == overlayfs.EntryFile {
			content = bytes.NewReader(it.content)
		}
		if err := f.PutEntry(e, content); err != nil {
			return ociError(p, err)
		}
	}
	return nil
}

func dirEntryFrom(p string, fi fs.FileInfo) overlayfs.LayerEntry {
	e := overlayfs.LayerEntry{Path: p, Type: overlayfs.EntryDir, Mode: specialPerm(fi.Mode()), ModTime: fi.ModTime()}
	if uid, gid, ok := ownerOf(fi); ok {
		e.Uid, e.Gid = uid, gid
	}
	return e
}

// cleanTarName makes a tar name root-relative and slash-clean, "." for
// the layer root; false for names that would leave the layer.
func cleanTarName(name string) (string, bool) {
	if strings.HasPrefix(name, "/") {
		return "", false
	}
	c := path.Clean(name)
	if c == "." || c == "" {
		return ".", true
	}
	if c == ".." || strings.HasPrefix(c, "../") || !fs.ValidPath(c) {
		return "", false
	}
	return c, true
}
