//go:build unix

package sparse_test

import (
	"os"
	"syscall"
	"testing"
)

// allocated returns the bytes the file system allocated for p, or -1 where
// the platform does not say.
func allocated(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1
	}
	return int64(st.Blocks) * 512
}
