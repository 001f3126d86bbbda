//go:build !linux

package overlayfs

import (
	"io/fs"
	"time"
)

func sysStat(*fileInfo) any { return nil }

// timedSys is sys: the Stat_t layout is not known here.
func timedSys(sys any, _ time.Time) any { return sys }

// omitLooksNothingUp: see sys_linux.go.
const omitLooksNothingUp = false

// fileID is empty where the platform's stat layout is not known here: the
// mode, size and mtime checks still apply.
type fileID struct{ ctime int64 }

func identity(fs.FileInfo) fileID { return fileID{} }

// maxFileSize is the largest a layer file may grow: 4 GiB where the
// memory is not known here (see sys_linux.go).
func maxFileSize() int64 { return 1 << 32 }

// plainDir: only Linux tells whether a path holds a symlink in one call.
func plainDir(string, string) (has, ok bool) { return false, false }
