package overlayfs

import (
	"bytes"
	"io/fs"
	"os"
	"strconv"
)

// processUmask reads the umask without changing it where the kernel says it
// (Linux 4.7+ /proc/self/status); elsewhere it sets and restores it, which is
// racy only against concurrent file creation in this process.
func processUmask() fs.FileMode {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
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
