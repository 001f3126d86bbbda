//go:build !linux

package overlayfs_test

import "io/fs"

// sysMtime: the Stat_t's time field is named per platform; only Linux's is
// checked (see dirtimes_linux_test.go).
func sysMtime(fs.FileInfo) string { return "" }
