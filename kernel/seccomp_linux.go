package kernel

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// chownCall is a chown-family system call and where its uid argument is
// (the gid follows it).
type chownCall struct {
	nr     uint32
	uidArg int
	gidArg int
}

// chownCalls are the chown-family calls of this architecture.
func chownCalls() []chownCall {
	calls := []chownCall{
		{nr: unix.SYS_FCHOWNAT, uidArg: 2, gidArg: 3},
		{nr: unix.SYS_FCHOWN, uidArg: 1, gidArg: 2},
	}
	return append(calls, legacyChownCalls...)
}

// auditArch is the seccomp architecture of this build, 0 where the
// filter is not written for it.
func auditArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

// chownAsPlainRun installs, on the calling thread (which must be locked
// and start the command next), a seccomp filter that makes a chown to an
// owner other than uid, or a group other than gid, fail with EPERM, as
// for an unprivileged user in a plain run. In a user namespace that maps
// only the caller, the kernel says EINVAL (the owner has no mapping),
// which tools such as tar, cp -a and rsync take for a bug. A user's
// supplementary groups are not mapped either: chgrp to one of them fails
// with EPERM too. It sets no_new_privs, which an unprivileged filter
// needs. Best effort: on an architecture it does not know, or where the
// kernel refuses, nothing changes.
func chownAsPlainRun(uid, gid int) {
	arch := auditArch()
	if arch == 0 {
		return
	}
	const (
		ld    = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	// struct seccomp_data: nr at 0, arch at 4, args[i] at 16+8i (the low
	// word first on these little-endian architectures).
	argLow := func(i int) uint32 { return uint32(16 + 8*i) }
	prog := []unix.SockFilter{
		{Code: ld, K: 4},
		{Code: jeq, Jt: 1, K: arch},
		{Code: ret, K: allow},
		{Code: ld, K: 0},
	}
	// For each call: if nr matches, check its uid and gid arguments.
	for _, c := range chownCalls() {
		check := []unix.SockFilter{
			{Code: ld, K: argLow(c.uidArg)},
			{Code: jeq, Jt: 1, K: 0xffffffff},
			{Code: jeq, Jt: 0, Jf: 4, K: uint32(uid)},
			{Code: ld, K: argLow(c.gidArg)},
			{Code: jeq, Jt: 3, K: 0xffffffff},
			{Code: jeq, Jt: 2, K: uint32(gid)},
			{Code: ret, K: eperm},
			{Code: ret, K: eperm},
			{Code: ret, K: allow},
		}
		// Not this call: skip its check (and the reload of nr after it).
		prog = append(prog, unix.SockFilter{Code: jeq, Jt: 0, Jf: uint8(len(check)), K: c.nr})
		prog = append(prog, check...)
	}
	prog = append(prog, unix.SockFilter{Code: ret, K: allow})
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != nil {
		return
	}
	unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0)
	runtime.KeepAlive(prog)
}
