package kernel

import (
	"fmt"
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

// sandboxCalls are the system call numbers the sandbox filter checks, in
// one architecture's numbering; 0 where the architecture has no such call.
type sandboxCalls struct {
	arch                                                  uint32
	ioctl, keyctl, addKey, requestKey, socket, socketcall uint32
	ioURing                                               uint32 // io_uring_setup; enter and register follow
}

// nativeSandboxCalls are this build's own numbers.
var nativeSandboxCalls = sandboxCalls{
	ioctl: unix.SYS_IOCTL, keyctl: unix.SYS_KEYCTL, addKey: unix.SYS_ADD_KEY,
	requestKey: unix.SYS_REQUEST_KEY, socket: unix.SYS_SOCKET, ioURing: unix.SYS_IO_URING_SETUP,
}

// deniedIoctls are the terminal requests a confined command may not
// make (see installSandboxFilter).
var deniedIoctls = [...]uint32{unix.TIOCSTI, unix.TIOCLINUX, unix.TIOCSETD, unix.TIOCEXCL}

// sandboxFilter is the seccomp program of every confined command (see
// installSandboxFilter), nil on an architecture it is not written for.
// A call in the 32-bit numbering of the architecture (i386 on amd64, arm
// on arm64) is checked with that numbering; x32 calls and any other
// architecture's fail with ENOSYS.
func sandboxFilter(network bool) []unix.SockFilter {
	arch := auditArch()
	if arch == 0 {
		return nil
	}
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	allow := unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW}
	fail := func(errno unix.Errno) unix.SockFilter {
		return unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(errno)}
	}
	// rules checks the call number in the accumulator, for one numbering.
	rules := func(n sandboxCalls) []unix.SockFilter {
		var p []unix.SockFilter
		for _, nr := range []uint32{n.keyctl, n.addKey, n.requestKey} {
			p = append(p, unix.SockFilter{Code: jeq, Jf: 1, K: nr}, fail(unix.EPERM))
		}
		// io_uring does the work of system calls without making them.
		for nr := n.ioURing; nr < n.ioURing+3; nr++ {
			p = append(p, unix.SockFilter{Code: jeq, Jf: 1, K: nr}, fail(unix.ENOSYS))
		}
		// ioctl(fd, one of deniedIoctls, ...): the request is an int.
		p = append(p,
			unix.SockFilter{Code: jeq, Jf: uint8(len(deniedIoctls) + 3), K: n.ioctl},
			unix.SockFilter{Code: ld, K: 16 + 8*1})
		for i, req := range deniedIoctls {
			p = append(p, unix.SockFilter{Code: jeq, Jt: uint8(len(deniedIoctls) - i), K: req})
		}
		p = append(p, allow, fail(unix.EPERM))
		if !network {
			// socket(AF_VSOCK, ...): vsock has no network namespaces.
			p = append(p,
				unix.SockFilter{Code: jeq, Jf: 4, K: n.socket},
				unix.SockFilter{Code: ld, K: 16},
				unix.SockFilter{Code: jeq, Jt: 1, K: unix.AF_VSOCK},
				allow, fail(unix.EAFNOSUPPORT))
			if n.socketcall != 0 {
				// Its arguments are in memory, out of the filter's reach.
				p = append(p, unix.SockFilter{Code: jeq, Jf: 1, K: n.socketcall}, fail(unix.ENOSYS))
			}
		}
		return append(p, allow)
	}
	native := []unix.SockFilter{{Code: ld, K: 0}}
	if runtime.GOARCH == "amd64" {
		// x32 system calls (their numbers carry bit 30).
		native = append(native, unix.SockFilter{Code: jge, Jf: 1, K: 0x40000000}, fail(unix.ENOSYS))
	}
	native = append(native, rules(nativeSandboxCalls)...)
	prog := []unix.SockFilter{{Code: ld, K: 4}, {Code: jeq, Jf: uint8(len(native)), K: arch}}
	prog = append(prog, native...)
	if c := compatSandboxCalls; c.arch != 0 {
		compat := append([]unix.SockFilter{{Code: ld, K: 0}}, rules(c)...)
		prog = append(prog, unix.SockFilter{Code: jeq, Jf: uint8(len(compat)), K: c.arch})
		prog = append(prog, compat...)
	}
	return append(prog, fail(unix.ENOSYS))
}

// installSandboxFilter installs sandboxFilter on the calling thread,
// which must be locked and start the command next. The command cannot
// reach the kernel's keyrings (keyctl, add_key and request_key fail with
// EPERM): they are not namespaced, so the caller's session keyring and,
// as root, the user keyring of every root process of the host would be
// its to read and change. It cannot push input into a terminal (TIOCSTI,
// TIOCLINUX: EPERM), even one it makes its controlling terminal with
// TIOCSCTTY (one passed to it that is nobody's controlling terminal), nor
// leave a terminal broken after the run: another line discipline
// (TIOCSETD; N_NULL drops every byte, and the others are kernel code,
// N_GSM, N_HDLC, no test needs) or exclusive mode (TIOCEXCL: every later
// open but root's fails with EBUSY).
// Unless network, it cannot make a vsock socket (EAFNOSUPPORT): vsock
// reaches the hypervisor's host from any network namespace. It has no
// io_uring (ENOSYS, as on a kernel without it, so that programs fall
// back to system calls): io_uring's operations (IORING_OP_SOCKET, say)
// are out of the filter's sight. Without
// CAP_SYS_ADMIN it sets no_new_privs first, as the kernel requires.
// Where the kernel has no seccomp filters (EINVAL), nothing changes.
func installSandboxFilter(network bool) error {
	prog := sandboxFilter(network)
	if prog == nil {
		return nil
	}
	runtime.LockOSThread()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0)
	if err == unix.EACCES {
		if err = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err == nil {
			err = unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0)
		}
	}
	runtime.KeepAlive(prog)
	if err == unix.EINVAL {
		return nil
	}
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}
