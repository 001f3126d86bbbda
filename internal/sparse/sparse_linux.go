package sparse

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// dataRegion returns the first region of data of f at or after pos,
// clamped to end ([end, end) when there is none), using SEEK_DATA and
// SEEK_HOLE. Where the file system cannot say, everything is data.
func dataRegion(f *os.File, pos, end int64) (int64, int64) {
	start, err := f.Seek(pos, unix.SEEK_DATA)
	if errors.Is(err, syscall.ENXIO) {
		return end, end // no data after pos
	}
	if err != nil {
		return pos, end
	}
	if start >= end {
		return end, end
	}
	stop, err := f.Seek(start, unix.SEEK_HOLE)
	if err != nil || stop > end {
		stop = end
	}
	return start, stop
}
