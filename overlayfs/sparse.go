package overlayfs

import "os"

// holeBlock is the unit in which runs of zeros are left as holes.
const holeBlock = 4096

// writeSparse writes data at the start of the empty file fh, leaving every
// whole block of zeros as a hole, so that a sparse file stays sparse on
// disk (and a file of zeros costs no blocks).
func writeSparse(fh *os.File, data []byte) error {
	off := 0
	for off < len(data) {
		if isZeroBlock(data, off) {
			off += holeBlock
			continue
		}
		start := off
		for off < len(data) && !isZeroBlock(data, off) {
			off = min(off+holeBlock, len(data))
		}
		if _, err := fh.WriteAt(data[start:off], int64(start)); err != nil {
			return err
		}
	}
	if off > 0 {
		return fh.Truncate(int64(len(data))) // a trailing hole
	}
	return nil
}

// isZeroBlock reports whether data holds a whole block of zeros at off.
func isZeroBlock(data []byte, off int) bool {
	if off+holeBlock > len(data) {
		return false
	}
	for _, c := range data[off : off+holeBlock] {
		if c != 0 {
			return false
		}
	}
	return true
}
