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

// Copy copies r to the start of the empty file fh as Write does, streaming
// in chunks of a bounded size, and returns the number of bytes copied.
func Copy(fh *os.File, r io.Reader) (int64, error) {
	buf := make([]byte, 256*Block)
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
