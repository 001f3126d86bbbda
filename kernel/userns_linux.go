package kernel

import (
	"bytes"
	"os"
)

// inInitUserNS reports whether the process runs in the initial user
// namespace, where root may write trusted.* xattrs. Inside any other user
// namespace (unshare -U), even uid 0 must mount with userxattr.
func inInitUserNS() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return true
	}
	f := bytes.Fields(b)
	return len(f) == 3 && string(f[0]) == "0" && string(f[1]) == "0" && string(f[2]) == "4294967295"
}
