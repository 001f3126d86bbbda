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
// every fork and extra root applies the same ones (they share s). With
// WithUmask the process's umask is never read.
func (s *shared) creator() creator {
	s.fam.once.Do(func() {
		c := creator{umask: s.opts.umask, uid: os.Getuid(), gid: os.Getgid()}
		if u := s.opts.as; u != nil {
			c.uid, c.gid = u.uid, u.gid
		}
		if !s.opts.umaskSet {
			c.umask = processUmask()
		}
		s.fam.proc = c
	})
	return s.fam.proc
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
