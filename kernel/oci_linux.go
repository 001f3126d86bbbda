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
// metadata. A layer name starting with ".wh.", and a socket (tar has no
// type for it), cannot be carried: the error wraps [ErrUnrepresentable].
func WriteOCILayer(f *overlayfs.Fs, w io.Writer) error {
	steps, err := planLayer(f)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, s := range steps {
		if strings.HasPrefix(path.Base(s.Path), whPrefix) {
			return &fs.PathError{Op: "oci", Path: s.Path, Err: ErrUnrepresentable}
		}
		hdr := &tar.Header{
			Name: s.Path, Mode: int64(unixMode(s.Mode)), ModTime: s.ModTime,
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
					return fmt.Errorf("oci %s: layer content: %w", s.Path, err)
				}
				_, err = io.Copy(tw, r)
				r.Close()
				if err != nil {
					return fmt.Errorf("oci %s: %w", s.Path, err)
				}
			}
		case overlayfs.EntryFIFO:
			hdr.Typeflag = tar.TypeFifo
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		default: // a socket: tar has no type for it
			return &fs.PathError{Op: "oci", Path: s.Path, Err: fmt.Errorf("%v: %w", s.Type, ErrUnrepresentable)}
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
// Hard links become copies. FIFOs become FIFO entries; devices are refused with
// [ErrUnsupportedType]; names that leave the layer ("..", absolute) with
// fs.ErrInvalid. Everything is read and checked before f changes; file
// contents are held in memory meanwhile.
func ReadOCILayer(r io.Reader, f *overlayfs.Fs) error {
	items := map[string]*ociItem{}
	whiteouts := map[string]bool{}
	tr := tar.NewReader(r)
	get := func(p string) *ociItem {
		it := items[p]
		if it == nil {
			it = &ociItem{e: overlayfs.LayerEntry{Path: p, Type: overlayfs.EntryDir, Mode: 0o755}}
			items[p] = it
		}
		return it
	}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("oci: %w", err)
		}
		name, ok := cleanTarName(hdr.Name)
		if !ok {
			return &fs.PathError{Op: "oci", Path: hdr.Name, Err: fs.ErrInvalid}
		}
		if name == "" {
			continue // the layer root: a layer has no entry for it
		}
		dir, base := parentOf(name), path.Base(name)
		if base == whOpaque {
			if dir == "" {
				continue // an opaque root cannot be expressed; nothing below the layer is root-level opaque
			}
			get(dir).opaque = true
			continue
		}
		if target, ok := strings.CutPrefix(base, whPrefix); ok {
			if target == "" || target == "." || target == ".." {
				return &fs.PathError{Op: "oci", Path: hdr.Name, Err: fs.ErrInvalid}
			}
			whiteouts[path.Join(dir, target)] = true
			continue
		}
		for k, v := range hdr.PAXRecords {
			x, ok := strings.CutPrefix(k, "SCHILY.xattr.")
			if !ok {
				continue
			}
			for _, ns := range []string{"trusted.overlay.", "user.overlay."} {
				switch strings.TrimPrefix(x, ns) {
				case "opaque":
					if strings.HasPrefix(x, ns) && v == "y" && hdr.Typeflag == tar.TypeDir {
						get(name).opaque = true
					}
				case "redirect":
					if strings.HasPrefix(x, ns) {
						return &fs.PathError{Op: "oci", Path: hdr.Name, Err: ErrRedirect}
					}
				case "metacopy":
					if strings.HasPrefix(x, ns) {
						return &fs.PathError{Op: "oci", Path: hdr.Name, Err: ErrMetacopy}
					}
				}
			}
		}
		e := overlayfs.LayerEntry{
			Path: name, Mode: permBits(uint32(hdr.Mode)), ModTime: hdr.ModTime,
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
				return &fs.PathError{Op: "oci", Path: hdr.Name, Err: fmt.Errorf("sparse file: %w", ErrUnsupportedType)}
			}
			e.Type = overlayfs.EntryFile
			if it.content, err = io.ReadAll(tr); err != nil {
				return fmt.Errorf("oci %s: %w", hdr.Name, err)
			}
			e.Size = int64(len(it.content))
		case tar.TypeSymlink:
			e.Type, e.Target = overlayfs.EntrySymlink, hdr.Linkname
		case tar.TypeLink:
			target, ok := cleanTarName(hdr.Linkname)
			if !ok || target == "" {
				return &fs.PathError{Op: "oci", Path: hdr.Name, Err: fs.ErrInvalid}
			}
			e.Type, it.linkTo = overlayfs.EntryFile, target
		case tar.TypeFifo:
			e.Type = overlayfs.EntryFIFO
		case tar.TypeChar:
			if hdr.Devmajor == 0 && hdr.Devminor == 0 {
				whiteouts[name] = true
				continue
			}
			return &fs.PathError{Op: "oci", Path: hdr.Name, Err: ErrUnsupportedType}
		default:
			return &fs.PathError{Op: "oci", Path: hdr.Name, Err: fmt.Errorf("tar type %q: %w", hdr.Typeflag, ErrUnsupportedType)}
		}
		it.e = e
		if old := items[name]; old != nil && e.Type == overlayfs.EntryDir {
			it.opaque = old.opaque // a marker or xattr seen first
		}
		items[name] = it
	}
	for p, it := range items {
		if it.linkTo == "" {
			continue
		}
		src := items[it.linkTo]
		switch {
		case src != nil && src.e.Type == overlayfs.EntryFile && src.linkTo == "":
			it.content = src.content
		case src == nil:
			b, err := afero.ReadFile(f, filepath.Join(f.Root(), filepath.FromSlash(it.linkTo)))
			if err != nil {
				return fmt.Errorf("oci %s: hard link target: %w", p, err)
			}
			it.content = b
		default:
			return &fs.PathError{Op: "oci", Path: p, Err: fmt.Errorf("hard link to %s, not a plain file: %w", it.linkTo, fs.ErrInvalid)}
		}
		it.e.Size = int64(len(it.content))
	}
	return applyOCI(f, items, whiteouts)
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
		for d := parentOf(p); d != ""; d = parentOf(d) {
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
				return fmt.Errorf("oci %s: %w", p, err)
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
			return fmt.Errorf("oci %s: %w", p, err)
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

// cleanTarName makes a tar name root-relative and slash-clean; false for
// names that would leave the layer.
func cleanTarName(name string) (string, bool) {
	name = strings.TrimSuffix(name, "/")
	if name == "" || name == "." || name == "./" {
		return "", true
	}
	if strings.HasPrefix(name, "/") {
		return "", false
	}
	c := path.Clean(name)
	if c == "." {
		return "", true
	}
	if c == ".." || strings.HasPrefix(c, "../") || !fs.ValidPath(c) {
		return "", false
	}
	return c, true
}
