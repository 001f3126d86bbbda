//go:build linux && amd64

package kernel

import "golang.org/x/sys/unix"

// legacyChownCalls are the chown calls that newer architectures dropped.
var legacyChownCalls = []chownCall{
	{nr: unix.SYS_CHOWN, uidArg: 1, gidArg: 2},
	{nr: unix.SYS_LCHOWN, uidArg: 1, gidArg: 2},
}
