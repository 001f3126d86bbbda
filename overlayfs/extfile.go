package overlayfs

import (
	"io"
	"os"
)

// extThreshold is the size from which PutEntry keeps a file's content by
// reference instead of reading it: small files are read (a descriptor each
// would cost more than their bytes), large ones stay where they are.
const extThreshold = 1 << 20

// extFile is content held by reference in a file outside the lower (an
// upper directory's file, put by kernel.Import), through an open
// descriptor of its own: the file may be unlinked meanwhile. The
// descriptor is closed when no blob refers to it any more (os closes an
// unreachable *os.File).
type extFile struct {
	f *os.File
}

// external reports whether a blob's content is an extFile, not yet read.
func (b *blob) external() bool { return b.lazy() && b.ext != nil }

// reader streams the content of a lazy blob without reading it into
// memory. It reads what the blob holds at the time of the call.
func (b *blob) reader(f *layer) (io.ReadCloser, error) {
	if b.external() {
		return b.ext.section(b.size), nil
	}
	return os.Open(f.host(b.src))
}

// section returns the first size bytes of the file as a reader.
func (e *extFile) section(size int64) io.ReadCloser {
	return sectionFile{io.NewSectionReader(e.f, 0, size)}
}

// sectionFile is a section of a file with a no-op Close. It keeps
// io.SectionReader's methods (Outer among them), so that a copy can find
// the file and skip its holes.
type sectionFile struct{ *io.SectionReader }

func (sectionFile) Close() error { return nil }

// loadExt reads the whole content of an external blob, into a buffer with
// room for spare more bytes.
func (b *blob) loadExt(spare int) ([]byte, error) {
	data := make([]byte, b.size, b.size+int64(spare))
	n, err := io.ReadFull(io.NewSectionReader(b.ext.f, 0, b.size), data)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return data[:n], err
}

// keepExt returns a private descriptor of content when it is a regular
// file of size bytes (at least extThreshold) that can be kept by
// reference, or nil.
func keepExt(content io.Reader, size int64) *extFile {
	fh, ok := content.(*os.File)
	if !ok || size < extThreshold {
		return nil
	}
	fi, err := fh.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != size {
		return nil
	}
	dup, err := dupFile(fh)
	if err != nil {
		return nil
	}
	return &extFile{f: dup}
}
