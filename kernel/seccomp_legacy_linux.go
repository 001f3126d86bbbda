//go:build linux && amd64

package kernel

import "golang.org/x/sys/unix"

// legacyChownCalls are the chown calls that newer architectures dropped.
var legacyChownCalls = []chownCall{
	{nr: unix.SYS_CHOWN, uidArg: 1, gidArg: 2},
	{nr: unix.SYS_LCHOWN, uidArg: 1, gidArg: 2},
}

// compatSandboxCalls are the i386 numbers, which a program on amd64 can
// use too (int $0x80).
var compatSandboxCalls = sandboxCalls{
	arch: unix.AUDIT_ARCH_I386, ioctl: 54, keyctl: 288, addKey: 286, requestKey: 287, socket: 359, socketcall: 102, ioURing: 425,
}
