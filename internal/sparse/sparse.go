// Package sparse writes file contents leaving runs of zeros as holes, so
// that a sparse file stays sparse when cowfs writes it back (Commit,
// kernel.Materialize) and a file of zeros costs no blocks.
//
// Holes are made per block of [Block] bytes: a whole block of zeros at a
// block-aligned offset is skipped (the file system reads it back as zeros),
// everything else is written. The content read back is always exactly the
// content given; only the allocation differs.
package sparse

import (
	"encoding/binary"
	"io"
	"os"
)

// Block is the unit in which zeros become holes: the page size and the
// block size of the common Linux file systems.
const Block = 4096

// Write writes data at the start of the empty file fh, leaving every whole
// block of zeros as a hole, and sets the file's size to len(data).
func Write(fh *os.File, data []byte) error {
	if err := writeAt(fh, data, 0); err != nil {
		return err
	}
	return finish(fh, int64(len(data)))
}

// Copy copies r to the start of the empty file fh as Write does, in
// chunks of a bounded size, and returns the number of bytes copied. When r
// is an *os.File (from its current offset to its end) or an
// *io.SectionReader over one (not yet read), only the file's data regions
// are read: its holes are skipped, not read as zeros.
func Copy(fh *os.File, r io.Reader) (int64, error) {
	if src, off, n, ok := fileRange(r); ok {
		return copyRange(fh, src, off, n)
	}
	buf := make([]byte, chunk)
	var off int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if werr := writeAt(fh, buf[:n], off); werr != nil {
				return off, werr
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return off, finish(fh, off)
		}
		if err != nil {
			return off, err
		}
	}
}

// chunk is how much Copy holds in memory at once.
const chunk = 256 * Block

// fileRange returns the file and the byte range r would read, when r reads
// a regular file.
func fileRange(r io.Reader) (*os.File, int64, int64, bool) {
	switch s := r.(type) {
	case *os.File:
		fi, err := s.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return nil, 0, 0, false
		}
		off, err := s.Seek(0, io.SeekCurrent)
		if err != nil || off > fi.Size() {
			return nil, 0, 0, false
		}
		return s, off, fi.Size() - off, true
	case interface {
		Outer() (io.ReaderAt, int64, int64)
		Seek(int64, int) (int64, error)
	}:
		if pos, err := s.Seek(0, io.SeekCurrent); err != nil || pos != 0 {
			return nil, 0, 0, false
		}
		ra, off, n := s.Outer()
		f, ok := ra.(*os.File)
		return f, off, n, ok
	}
	return nil, 0, 0, false
}

// copyRange copies n bytes of src from off to the start of fh, reading
// only src's data regions.
func copyRange(fh, src *os.File, off, n int64) (int64, error) {
	buf := make([]byte, chunk)
	end := off + n
	for pos := off; pos < end; {
		start, stop := dataRegion(src, pos, end)
		if start >= end {
			break
		}
		for p := start; p < stop; {
			m, err := src.ReadAt(buf[:min(int64(len(buf)), stop-p)], p)
			if m > 0 {
				if werr := writeAt(fh, buf[:m], p-off); werr != nil {
					return p - off, werr
				}
				p += int64(m)
			}
			if err == io.EOF {
				return p - off, finish(fh, p-off) // the file was shorter
			}
			if err != nil {
				return p - off, err
			}
		}
		pos = stop
	}
	return n, finish(fh, n)
}

// writeAt writes data at off (a multiple of Block), skipping whole blocks
// of zeros.
func writeAt(fh *os.File, data []byte, off int64) error {
	i := 0
	for i < len(data) {
		if isZeroBlock(data, i) {
			i += Block
			continue
		}
		start := i
		for i < len(data) && !isZeroBlock(data, i) {
			i = min(i+Block, len(data))
		}
		if _, err := fh.WriteAt(data[start:i], off+int64(start)); err != nil {
			return err
		}
	}
	return nil
}

// finish gives the file its size: a trailing hole is not written.
func finish(fh *os.File, size int64) error {
	if size == 0 {
		return nil
	}
	return fh.Truncate(size)
}

// isZeroBlock reports whether data holds a whole block of zeros at i.
func isZeroBlock(data []byte, i int) bool {
	if i+Block > len(data) {
		return false
	}
	b := data[i : i+Block]
	for j := 0; j < Block; j += 8 {
		if binary.NativeEndian.Uint64(b[j:]) != 0 {
			return false
		}
	}
	return true
}
