package overlayfs

import (
	"bytes"
	"io/fs"
	"os"
	"strconv"
)

// creator is what the process gives a file it creates: the permission
// bits its umask clears, and its owner.
type creator struct {
	umask    fs.FileMode
	uid, gid int
}

// creator returns the umask and owner of new entries: read from the
// process when the family first creates something, then kept, so that
// every fork and extra root applies the same ones; WithUmask overrides the
// umask.
func (s *shared) creator() creator {
	c := s.fam.creator()
	if s.opts.umaskSet {
		c.umask = s.opts.umask
	}
	return c
}

// creator reads the process's umask and ids once.
func (fam *family) creator() creator {
	fam.once.Do(func() {
		fam.proc = creator{umask: processUmask(), uid: os.Getuid(), gid: os.Getgid()}
	})
	return fam.proc
}

// processUmask reads the umask without changing it where the kernel says it
// (Linux 4.7+ /proc/self/status); elsewhere it sets and restores it, which is
// racy only against concurrent file creation in this process. Umask is the
// status file's second line, well inside the first 4 KiB; the kernel's
// making of the file is most of the cost.
func processUmask() fs.FileMode {
	if b, err := readFileSized("/proc/self/status", 4<<10, 0); err == nil {
		for line := range bytes.Lines(b) {
			if v, ok := bytes.CutPrefix(line, []byte("Umask:")); ok {
				if m, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32); err == nil {
					return fs.FileMode(m) & fs.ModePerm
				}
			}
		}
	}
	return swapUmask()
}
