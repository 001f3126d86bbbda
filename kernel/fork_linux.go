package kernel

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The PID namespace's init of a run started in a thread (see
// startInThread) is a fork of this process that never executes anything:
// it mounts the namespace's /proc, closes every descriptor and reaps
// orphans until it is killed. Forking it costs a copy of the page tables
// instead of a start of this program (the Go runtime and every package's
// init, 4–7 ms for a test binary). The child runs only system calls, as
// syscall.forkAndExecInChild1 does: no allocation, no stack growth, no
// scheduler. The runtime hooks below are the ones package syscall uses
// around its fork (runtime/proc.go keeps them for linkname users).

//go:linkname runtimeBeforeFork syscall.runtime_BeforeFork
func runtimeBeforeFork()

//go:linkname runtimeAfterFork syscall.runtime_AfterFork
func runtimeAfterFork()

//go:linkname runtimeAfterForkInChild syscall.runtime_AfterForkInChild
func runtimeAfterForkInChild()

// initArgs is what the forked init needs, prepared before the fork: the
// child must not allocate.
type initArgs struct {
	procSource, procTarget, procType *byte
	sigchld                          uint64 // the signal set {SIGCHLD}
	maxFD                            uintptr
	life                             uintptr        // the read end of the pipe whose write end only the thread holds
	tick, zero                       unix.Timespec  // how long init sleeps between looks at life; no wait
	poll                             [1]unix.PollFd // life, for POLLHUP
}

func newInitArgs(maxFD, life int) *initArgs {
	cstr := func(s string) *byte {
		b := append([]byte(s), 0)
		return &b[0]
	}
	return &initArgs{
		procSource: cstr("proc"), procTarget: cstr("/proc"), procType: cstr("proc"),
		sigchld: 1 << (uint(syscall.SIGCHLD) - 1), maxFD: uintptr(maxFD),
		life: uintptr(life), tick: unix.Timespec{Nsec: 100e6},
		poll: [1]unix.PollFd{{Fd: int32(life), Events: unix.POLLIN}},
	}
}

// forkInit forks PID 1 of the PID namespace this thread's children go to
// (after unshare(CLONE_NEWPID) on the calling thread, which must be
// locked) and returns its pid in the caller's namespace.
//
//go:norace
//go:noinline
func forkInit(a *initArgs) (int, syscall.Errno) {
	src := uintptr(unsafe.Pointer(a.procSource))
	target := uintptr(unsafe.Pointer(a.procTarget))
	typ := uintptr(unsafe.Pointer(a.procType))
	set := uintptr(unsafe.Pointer(&a.sigchld))
	maxFD := a.maxFD
	life := a.life
	tick := uintptr(unsafe.Pointer(&a.tick))
	poll := uintptr(unsafe.Pointer(&a.poll[0]))
	zero := uintptr(unsafe.Pointer(&a.zero))
	runtimeBeforeFork()
	pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 || pid != 0 {
		runtimeAfterFork()
		return int(pid), errno
	}
	runtimeAfterForkInChild()
	initChild(src, target, typ, set, maxFD, life, tick, poll, zero)
	return 0, 0 // not reached
}

// initChild is the forked init. It dies with the thread that forked it,
// or when Run kills it, which kills every process of its namespace. The
// thread's death is seen two ways: PR_SET_PDEATHSIG, and the end of the
// life pipe, whose write end only the thread's descriptor table holds.
// The signal alone is not enough: the thread confines itself with
// Landlock after the fork, and Landlock's signal scope (ABI 6) refuses
// the parent-death signal that the confined thread sends when it is the
// last of the process to exit (a panicking caller left the namespace
// running about one time in two: TestEnvRunFailingTestLeavesNothing).
//
//go:nosplit
//go:norace
func initChild(src, target, typ, set, maxFD, life, tick, poll, zero uintptr) {
	syscall.RawSyscall6(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	// The command's own view of processes; best effort, as in the
	// re-executed init.
	syscall.RawSyscall6(syscall.SYS_MOUNT, src, target, typ, syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, 0, 0)
	// Every descriptor but life: the end of the ready pipe tells the
	// thread that /proc is mounted, and no file of the caller stays open
	// here (nor the write end of life).
	var e1 syscall.Errno
	if life > 0 {
		_, _, e1 = syscall.RawSyscall(unix.SYS_CLOSE_RANGE, 0, life-1, 0)
	}
	_, _, e2 := syscall.RawSyscall(unix.SYS_CLOSE_RANGE, life+1, ^uintptr(0), 0)
	if e1 != 0 || e2 != 0 {
		for fd := uintptr(0); fd < maxFD; fd++ {
			if fd != life {
				syscall.RawSyscall(syscall.SYS_CLOSE, fd, 0, 0)
			}
		}
	}
	syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, unix.SIG_BLOCK, set, 0, 8, 0, 0)
	for {
		for {
			r, _, e := syscall.RawSyscall6(syscall.SYS_WAIT4, ^uintptr(0), 0, syscall.WNOHANG|syscall.WALL, 0, 0, 0)
			if e != 0 || r == 0 {
				break
			}
		}
		syscall.RawSyscall6(syscall.SYS_RT_SIGTIMEDWAIT, set, 0, tick, 8, 0, 0)
		// The thread's end: every write end closed (POLLHUP), or
		// anything written (never): init ends, and the namespace with it.
		if n, _, _ := syscall.RawSyscall6(syscall.SYS_PPOLL, poll, 1, zero, 0, 0, 0); n == 1 {
			syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
		}
	}
}
