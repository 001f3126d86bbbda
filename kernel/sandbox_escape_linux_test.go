package kernel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// The escapes a red team found after issue 22, one primitive ("escapes")
// that tries them all in one run per matrix cell, so that the matrix
// costs one start of the command per mode and user, on the thread and
// the re-executed init. Each attempt prints "refused WHAT: ERROR" or
// "ESCAPED WHAT"; the oracles are outside the sandbox: the outside
// directory (mode, owner, times, contents), the caller's session keyring
// and the user keyring, a host terminal that the command must neither
// write nor push input into, a terminal passed to it that must be left
// as it was (no input, line discipline, not exclusive), and the host's
// network configuration (TestSandboxWithNetwork). Attempts that only a
// policy can judge (a vsock socket made, io_uring set up, a host device
// opened) are escapes by the package doc's promises.

// moreSandboxAttack performs the attack primitives of this file; false
// for an attack it does not know.
func moreSandboxAttack(attack string, args []string) bool {
	switch attack {
	case "escapes":
		escapeByHandle(args[0])
		escapeLease(filepath.Join(filepath.Dir(args[0]), "leased"))
		escapeKeyrings()
		escapeTerminals(args[1])
		escapeKernel()
		escapeIOURing()
		escapeUserNS(args[0])
		escapeDevices(args[2:])
		escapeCompat()
		return true
	case "procsys":
		// Opened for writing, closed unwritten.
		for _, p := range []string{"/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger"} {
			if _, err := os.Lstat(p); err != nil {
				continue // no CONFIG_MAGIC_SYSRQ, say
			}
			fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			report("open for writing "+p, err)
		}
		return true
	case "userns-inner":
		// In a user and mount namespace of the command's own: all
		// capabilities there.
		escapeByHandle(args[0])
		report("mount tmpfs in a user namespace", unix.Mount("cowfs", ".", "tmpfs", 0, ""))
		report("umount the root in a user namespace", unix.Unmount(".", unix.MNT_DETACH))
		report("sethostname in a user namespace", unix.Sethostname([]byte("cowfs-evil")))
		// A detached copy of the read-only host (open_tree needs only the
		// namespace's CAP_SYS_ADMIN, and Landlock does not see it) made
		// writable with mount_setattr, then a chmod through it.
		tree, err := unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		report("open_tree of / in a user namespace", err)
		if err == nil {
			rw := unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
			err = unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &rw)
			report("mount_setattr rw of the copy", err)
			report("chmod through the copy", unix.Fchmodat(tree, strings.TrimPrefix(args[0], "/"), 0o4777, 0))
			unix.Close(tree)
		}
		return true
	}
	return false
}

// escapeUserNS: the command makes a user namespace (and a mount
// namespace in it) of its own, where it has every capability again, and
// tries what those would give: the handle escape (the kernel lets
// CAP_SYS_ADMIN over the mount's namespace decode handles, but only
// beneath the mount's root and without locked mounts below), mounting
// over the root, unmounting it.
func escapeUserNS(target string) {
	self, err := os.Executable()
	if err != nil {
		fmt.Println(err)
		return
	}
	cmd := exec.Command("unshare", "-Um", "--propagation", "unchanged", self, target)
	cmd.Env = append(os.Environ(), sandboxAttackEnv+"=userns-inner")
	out, err := cmd.CombinedOutput()
	if err != nil {
		fmt.Printf("unshare -Um: %v\n", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fmt.Printf("%s (user namespace)\n", line)
	}
}

// escapeByHandle is the "shocker" escape: with CAP_DAC_READ_SEARCH in
// the initial user namespace, open_by_handle_at opens any inode of a
// file system through any mount of it. Through a writable mount (the
// command's TMPDIR, or the copy, which live on the host's file system)
// a file of the read-only host then takes a chmod, chown or utimes,
// which Landlock does not govern. target is a file outside the root.
func escapeByHandle(target string) {
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, target, 0)
	if err != nil {
		fmt.Printf("name_to_handle_at: %v\n", err)
		return
	}
	old := []unix.Timeval{{Sec: 1}, {Sec: 1}}
	for _, m := range []struct{ name, dir string }{{"TMPDIR", os.Getenv("TMPDIR")}, {"root", "."}} {
		mfd, err := unix.Open(m.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			fmt.Printf("open %s: %v\n", m.name, err)
			continue
		}
		fd, err := unix.OpenByHandleAt(mfd, h, unix.O_RDONLY|unix.O_CLOEXEC)
		report("open_by_handle_at via "+m.name, err)
		if err == nil {
			report("fchmod by handle via "+m.name, unix.Fchmod(fd, 0o4777))
			report("fchown by handle via "+m.name, unix.Fchown(fd, 1234, 1234))
			report("futimes by handle via "+m.name, unix.Futimes(fd, old))
			unix.Close(fd)
		}
		unix.Close(mfd)
	}
}

// escapeLease: a read lease on a host file (here another user's) makes
// every process of the host that opens it for writing wait up to
// lease-break-time (45 s): CAP_LEASE takes one on any file.
func escapeLease(p string) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Printf("open %s: %v\n", p, err)
		return
	}
	defer unix.Close(fd)
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK)
	report("read lease on another user's host file", err)
}

// escapeKeyrings: the kernel's keyrings are not namespaced. The caller's
// session keyring (which the command inherits) holds its secrets, and
// root's user keyring is shared by every process of root on the host.
// The caller checks afterwards that its key is there and that no key
// "cowfs-evil" arrived in either keyring.
func escapeKeyrings() {
	id, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", "cowfs-caller", 0)
	report("find the caller's key", err)
	if err == nil {
		buf := make([]byte, 64)
		_, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
		report("read the caller's key", err)
	}
	_, err = unix.AddKey("user", "cowfs-evil", []byte("x"), unix.KEY_SPEC_SESSION_KEYRING)
	report("add_key to the session keyring", err)
	_, err = unix.AddKey("user", "cowfs-evil", []byte("x"), unix.KEY_SPEC_USER_KEYRING)
	report("add_key to the user keyring", err)
	_, err = unix.KeyctlInt(unix.KEYCTL_CLEAR, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
	report("clear the session keyring", err)
}

// escapeTerminals: a terminal of the host (hostPts, not the command's:
// root's, mode 0620) must be neither written nor given input, nor may a
// terminal passed to the command (descriptor 3, nobody's controlling
// terminal) take input: TIOCSCTTY would make it the command's
// controlling terminal, and TIOCSTI would then push input into it.
func escapeTerminals(hostPts string) {
	inject := func(what string, fd int) {
		c := byte('Z')
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		report("TIOCSTI "+what, errnoErr(errno))
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, 3, unix.TIOCSCTTY, 0)
	fmt.Printf("TIOCSCTTY the passed terminal: %v\n", errnoErr(errno))
	inject("the passed terminal", 3)
	// Another line discipline (N_NULL: every byte dropped) would leave
	// the terminal dead after the run; the test reads it back.
	ldisc := int32(27)
	_, _, errno = unix.Syscall(unix.SYS_IOCTL, 3, unix.TIOCSETD, uintptr(unsafe.Pointer(&ldisc)))
	report("TIOCSETD the passed terminal", errnoErr(errno))
	// Exclusive mode would leave it so after the run: every later open of
	// it by anyone but root fails with EBUSY.
	_, _, errno = unix.Syscall(unix.SYS_IOCTL, 3, unix.TIOCEXCL, 0)
	report("TIOCEXCL the passed terminal", errnoErr(errno))
	// TIOCL_PASTESEL: paste the console selection as input.
	sub := byte(3)
	_, _, errno = unix.Syscall(unix.SYS_IOCTL, 3, unix.TIOCLINUX, uintptr(unsafe.Pointer(&sub)))
	fmt.Printf("TIOCLINUX the passed terminal: %v\n", errnoErr(errno))
	if fd, err := unix.Open(hostPts, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0); err != nil {
		report("open the host's terminal", err)
	} else {
		report("open the host's terminal", nil)
		_, err := unix.Write(fd, []byte("pwned\n"))
		report("write the host's terminal", err)
		_, _, errno = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSCTTY, 0)
		fmt.Printf("TIOCSCTTY the host's terminal: %v\n", errnoErr(errno))
		inject("the host's terminal", fd)
		unix.Close(fd)
	}
	_, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	report("socket AF_VSOCK", err)
}

// escapeKernel tries the kernel's machine-wide interfaces, each in a form
// harmless where it succeeds: files opened for writing and closed
// unwritten, a reboot call that only switches Ctrl-Alt-Del, the clock set
// to what it is. All are refused (Landlock, the read-only host, dropped
// capabilities, the PID namespace) in every mode; this keeps it so.
func escapeKernel() {
	for _, p := range []string{"/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger", "/proc/sys/vm/drop_caches",
		"/sys/kernel/mm/transparent_hugepage/enabled", "/dev/kmsg", "/dev/loop0", "/proc/1/mem"} {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		report("open for writing "+p, err)
	}
	report("mount tmpfs", unix.Mount("cowfs", ".", "tmpfs", 0, ""))
	report("umount the root", unix.Unmount(".", unix.MNT_DETACH))
	cadOn := uint32(unix.LINUX_REBOOT_CMD_CAD_ON) // above int32: a variable converts where a constant overflows
	report("reboot CAD_ON", unix.Reboot(int(cadOn)))
	var tv unix.Timeval
	unix.Gettimeofday(&tv)
	report("settimeofday", unix.Settimeofday(&tv))
	report("init_module", unix.InitModule([]byte{0}, ""))
	_, _, errno := unix.Syscall6(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0, 0, 0)
	report("kexec_load", errnoErr(errno))
	_, _, errno = unix.Syscall(unix.SYS_ACCT, 0, 0, 0)
	report("acct", errnoErr(errno))
	const syslogConsoleOn = 7
	_, _, errno = unix.Syscall(unix.SYS_SYSLOG, syslogConsoleOn, 0, 0)
	report("syslog console on", errnoErr(errno))
	// BPF_MAP_CREATE of a one-entry array.
	attr := [4]uint32{2, 4, 4, 1}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, 0, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno == 0 {
		unix.Close(int(fd))
	}
	report("bpf map create", errnoErr(errno))
	pe := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))}
	pfd, err := unix.PerfEventOpen(&pe, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err == nil {
		unix.Close(pfd)
	}
	report("perf_event_open on a CPU", err)
	// Real-time scheduling: a busy SCHED_FIFO thread per CPU starves the
	// machine (bwrap's root, root of a user namespace only, gets EPERM).
	// Set, it would be undone at once.
	param := struct{ prio int32 }{1}
	_, _, errno = unix.Syscall(unix.SYS_SCHED_SETSCHEDULER, 0, unix.SCHED_FIFO, uintptr(unsafe.Pointer(&param)))
	if errno == 0 {
		param.prio = 0
		unix.Syscall(unix.SYS_SCHED_SETSCHEDULER, 0, 0 /* SCHED_OTHER */, uintptr(unsafe.Pointer(&param)))
	}
	report("sched_setscheduler SCHED_FIFO", errnoErr(errno))
	// Memory locked past RLIMIT_MEMLOCK (CAP_IPC_LOCK): the host cannot
	// reclaim it.
	unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{})
	page := make([]byte, os.Getpagesize())
	err = unix.Mlock(page)
	if err == nil {
		unix.Munlock(page)
	}
	report("mlock past RLIMIT_MEMLOCK", err)
	if err := unix.PtraceAttach(1); err == nil {
		unix.PtraceDetach(1)
		report("ptrace init", nil)
	} else {
		report("ptrace init", err)
	}
}

// escapeIOURing: io_uring does the work of system calls without making
// them, out of a seccomp filter's sight: IORING_OP_SOCKET (Linux 5.19)
// makes a socket without socket(2), so a vsock one too.
func escapeIOURing() {
	var p [30]uint32 // struct io_uring_params
	r, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&p)), 0)
	report("io_uring_setup", errnoErr(errno))
	if errno != 0 {
		return
	}
	ring := int(r)
	defer unix.Close(ring)
	sqOff, cqOff := p[10:20], p[20:30] // io_sqring_offsets, io_cqring_offsets
	mmap := func(off int64, size uint32) []byte {
		b, err := unix.Mmap(ring, off, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			fmt.Printf("io_uring mmap: %v\n", err)
		}
		return b
	}
	sq, cq, sqes := mmap(0, sqOff[6]+p[0]*4), mmap(0x8000000, cqOff[5]+p[1]*16), mmap(0x10000000, p[0]*64)
	if sq == nil || cq == nil || sqes == nil {
		return
	}
	const opSocket = 45
	sqes[0] = opSocket
	*(*int32)(unsafe.Pointer(&sqes[4])) = unix.AF_VSOCK
	*(*uint64)(unsafe.Pointer(&sqes[8])) = unix.SOCK_STREAM
	*(*uint32)(unsafe.Pointer(&sq[sqOff[6]])) = 0
	tail := (*uint32)(unsafe.Pointer(&sq[sqOff[1]]))
	atomic.StoreUint32(tail, atomic.LoadUint32(tail)+1)
	const enterGetEvents = 1
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(ring), 1, 1, enterGetEvents, 0, 0); errno != 0 {
		fmt.Printf("io_uring_enter: %v\n", errno)
		return
	}
	head := atomic.LoadUint32((*uint32)(unsafe.Pointer(&cq[cqOff[0]])))
	mask := *(*uint32)(unsafe.Pointer(&cq[cqOff[2]]))
	res := *(*int32)(unsafe.Pointer(&cq[cqOff[5]+(head&mask)*16+8]))
	if res >= 0 {
		unix.Close(int(res))
		report("io_uring socket AF_VSOCK", nil)
		return
	}
	report("io_uring socket AF_VSOCK", syscall.Errno(-res))
}

// escapeDevices: the host's devices (hostDevs, which exist outside) are
// not reachable by name, as under bwrap --dev /dev: root could read disks
// and terminals. The standard ones work as in a plain run.
func escapeDevices(hostDevs []string) {
	for _, d := range hostDevs {
		fd, err := unix.Open(d, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		report("open the host's "+d, err)
	}
	works := func(what string, err error) {
		if err != nil {
			fmt.Printf("device broken %s: %v\n", what, err)
			return
		}
		fmt.Printf("device works %s\n", what)
	}
	// (Reopening it depends on what standard output is: here a pipe of
	// the test's, which uid 65534 may not open.)
	if l, err := os.Readlink("/dev/stdout"); err != nil || l != "/proc/self/fd/1" {
		works("/dev/stdout", fmt.Errorf("%q, %v", l, err))
	} else {
		works("/dev/stdout", nil)
	}
	for _, d := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/urandom", "/dev/random"} {
		f, err := os.OpenFile(d, os.O_RDWR, 0)
		if err == nil {
			_, err = f.Read(make([]byte, 1))
			if d == "/dev/null" && err == io.EOF {
				err = nil
			}
			f.Close()
		}
		works(d, err)
	}
	// A pseudo-terminal of its own: /dev/ptmx, then its slave by name.
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err == nil {
		defer m.Close()
		err = unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0)
		var n int
		if err == nil {
			n, err = unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
		}
		if err == nil {
			var sl *os.File
			sl, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
			if err == nil {
				_, err = sl.WriteString("x")
				sl.Close()
			}
		}
	}
	works("pty", err)
	_, err = os.ReadDir("/dev/fd/")
	works("/dev/fd", err)
	_, err = os.Stat("/dev/shm")
	works("/dev/shm", err)
}

// escapeCompat: on amd64 a program may make i386 system calls (int
// $0x80), which a seccomp filter sees under another architecture and
// other numbers. Two tiny i386 programs make keyctl and socket(AF_VSOCK)
// that way and exit with the errno (0 when the call worked).
func escapeCompat() {
	if runtime.GOARCH != "amd64" {
		return
	}
	for _, c := range []struct {
		what           string
		nr, a1, a2, a3 int32
	}{{"i386 keyctl", 288, unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0}, {"i386 socket AF_VSOCK", 359, unix.AF_VSOCK, unix.SOCK_STREAM, 0}} {
		prog := filepath.Join(os.Getenv("TMPDIR"), "i386")
		if err := os.WriteFile(prog, i386Call(c.nr, c.a1, c.a2, c.a3), 0o755); err != nil {
			fmt.Printf("%s: %v\n", c.what, err)
			return
		}
		err := exec.Command(prog).Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			report(c.what, nil)
		case errors.As(err, &ee) && ee.ExitCode() > 0:
			report(c.what, syscall.Errno(ee.ExitCode()))
		default:
			fmt.Printf("%s: no i386 programs here: %v\n", c.what, err)
		}
		os.Remove(prog)
	}
}

// i386Call is a static i386 ELF program that makes system call nr with
// three arguments and exits with its errno, 0 when it succeeded.
func i386Call(nr, a1, a2, a3 int32) []byte {
	le := binary.LittleEndian
	code := []byte{0xb8} // mov eax, nr
	code = le.AppendUint32(code, uint32(nr))
	for i, a := range []int32{a1, a2, a3} {
		code = append(code, []byte{0xbb, 0xb9, 0xba}[i]) // mov ebx/ecx/edx
		code = le.AppendUint32(code, uint32(a))
	}
	code = append(code, 0xcd, 0x80, // int 0x80
		0x85, 0xc0, 0x78, 0x07, // test eax, eax; js neg
		0xbb, 0, 0, 0, 0, 0xeb, 0x04, // mov ebx, 0; jmp exit
		0x89, 0xc3, 0xf7, 0xdb, // neg: mov ebx, eax; neg ebx
		0xb8, 1, 0, 0, 0, 0xcd, 0x80) // exit: mov eax, 1 (exit); int 0x80
	const base, hdrs = 0x08048000, 52 + 32
	size := uint32(hdrs + len(code))
	elf := []byte{0x7f, 'E', 'L', 'F', 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	for _, v := range []any{uint16(2), uint16(3), uint32(1), uint32(base + hdrs), uint32(52), uint32(0), uint32(0),
		uint16(52), uint16(32), uint16(1), uint16(0), uint16(0), uint16(0),
		// the one program header: PT_LOAD of the whole file, r-x
		uint32(1), uint32(0), uint32(base), uint32(base), size, size, uint32(5), uint32(0x1000)} {
		elf, _ = binary.Append(elf, le, v)
	}
	return append(elf, code...)
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// callerBefore prepares the caller's side of an attack, for the command
// cmd; what it returns (or nil) checks the caller's side afterwards.
func callerBefore(c sandboxCall, cmd *exec.Cmd) func() {
	if c.Attack != "escapes" {
		return nil
	}
	// The terminal the test passed as descriptor 3 goes to the command.
	cmd.ExtraFiles = []*os.File{os.NewFile(3, "pts")}
	if _, err := unix.AddKey("user", "cowfs-caller", []byte("secret"), unix.KEY_SPEC_SESSION_KEYRING); err != nil {
		fmt.Printf("add_key: %v\n", err)
		return nil
	}
	return func() {
		id, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", "cowfs-caller", 0)
		buf := make([]byte, 64)
		n := 0
		if err == nil {
			n, err = unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
		}
		if err != nil || string(buf[:min(n, len(buf))]) != "secret" {
			fmt.Printf("ESCAPED the caller's session key is gone or changed: %v %q\n", err, buf[:min(n, len(buf))])
		}
		for _, ring := range []int{unix.KEY_SPEC_SESSION_KEYRING, unix.KEY_SPEC_USER_KEYRING} {
			if id, err := unix.KeyctlSearch(ring, "user", "cowfs-evil", 0); err == nil {
				fmt.Printf("ESCAPED the command's key is in keyring %d\n", ring)
				unix.KeyctlInt(unix.KEYCTL_UNLINK, id, ring, 0, 0)
			}
		}
	}
}

// TestSandboxEscapes: open_by_handle_at through a writable mount, the
// keyrings, a terminal of the host, TIOCSTI through TIOCSCTTY, vsock and
// the kernel's machine-wide interfaces, in both modes and (as root) on
// both ways of starting the overlay run: the thread and the re-executed
// init.
func TestSandboxEscapes(t *testing.T) {
	var hostMaster, hostSlave, passedMaster, passedSlave *os.File
	sandboxMatrixModes(t, "escapes", []string{"overlay", "reexec", "copy"}, func(t *testing.T, w sandboxWorld, call *sandboxCall, cmd *exec.Cmd, uid int) {
		// A terminal of the host: root's, as an administrator's would be.
		hostMaster, hostSlave = openPty(t, os.Geteuid())
		os.Chmod(hostSlave.Name(), 0o620)
		passedMaster, passedSlave = openPty(t, uid)
		t.Cleanup(func() {
			for _, f := range []*os.File{hostMaster, hostSlave, passedMaster, passedSlave} {
				f.Close()
			}
		})
		cmd.ExtraFiles = []*os.File{passedSlave}
		call.Args = []string{filepath.Join(w.out, "sentinel"), hostSlave.Name()}
		leased := filepath.Join(w.out, "leased")
		if err := os.WriteFile(leased, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(leased, 4321, 4321); err != nil {
			t.Fatal(err)
		}
		// A file of the host's /dev/shm (POSIX shared memory).
		shm := fmt.Sprintf("/dev/shm/cowfs-escape-%d", os.Getpid())
		if err := os.WriteFile(shm, []byte("secret"), 0o644); err == nil {
			t.Cleanup(func() { os.Remove(shm) })
			call.Args = append(call.Args, shm)
		}
		// Devices of the host outside bwrap's --dev set.
		for _, d := range []string{"/dev/loop0", "/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/kmsg", "/dev/tty0", "/dev/vsock", "/dev/kvm", "/dev/fuse", "/dev/net/tun", "/dev/input/event0", "/dev/snd/controlC0"} {
			if _, err := os.Stat(d); err == nil {
				call.Args = append(call.Args, d)
			}
		}
		// The caller's own session keyring: it inherits this thread's,
		// which the subtest's goroutine keeps (and ends) with the thread.
		runtime.LockOSThread()
		name := fmt.Sprintf("cowfs-sandbox-%d-%d", os.Getpid(), time.Now().UnixNano())
		p, _ := unix.BytePtrFromString(name)
		if _, _, errno := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, uintptr(unsafe.Pointer(p)), 0); errno != 0 {
			t.Skip("no session keyring: ", errno)
		}
	}, func(t *testing.T, r sandboxRun) {
		if !strings.Contains(r.out, "run error: <nil>") {
			t.Errorf("the command failed")
		}
		if d, err := unix.IoctlGetInt(fdOf(passedSlave), unix.TIOCGETD); err != nil || d != 0 {
			t.Errorf("the passed terminal's line discipline is %d (%v), want N_TTY", d, err)
		}
		if x, err := unix.IoctlGetInt(fdOf(passedSlave), unix.TIOCGEXCL); err != nil || x != 0 {
			unix.IoctlSetInt(fdOf(passedSlave), unix.TIOCNXCL, 0)
			t.Errorf("the passed terminal is left exclusive (%d, %v)", x, err)
		}
		for _, f := range []*os.File{hostMaster, hostSlave, passedMaster, passedSlave} {
			b := make([]byte, 256)
			fd := fdOf(f)
			unix.SetNonblock(fd, true)
			if n, _ := unix.Read(fd, b); n > 0 {
				t.Errorf("terminal %s got %q from the command", f.Name(), b[:n])
			}
		}
		for _, what := range []string{"open_by_handle_at via TMPDIR", "open_by_handle_at via root"} {
			wantRefused(t, r.out, what, "operation not permitted")
		}
		for _, what := range []string{"find the caller's key", "add_key to the session keyring", "add_key to the user keyring", "clear the session keyring"} {
			wantRefused(t, r.out, what, "operation not permitted")
		}
		wantRefused(t, r.out, "open the host's terminal", "no such file or directory", "permission denied")
		wantRefused(t, r.out, "TIOCSTI the passed terminal", "operation not permitted")
		wantRefused(t, r.out, "socket AF_VSOCK", "address family not supported")
		wantRefused(t, r.out, "io_uring_setup", "function not implemented")
		wantRefused(t, r.out, "mount tmpfs in a user namespace", "operation not permitted")
		if strings.Contains(r.out, "i386 keyctl") && !strings.Contains(r.out, "no i386 programs") {
			wantRefused(t, r.out, "i386 keyctl", "operation not permitted")
			wantRefused(t, r.out, "i386 socket AF_VSOCK", "address family not supported")
		}
		if strings.Contains(r.out, "device broken") || strings.Count(r.out, "device works") != 9 {
			t.Errorf("the standard devices do not all work (want 9)")
		}
		if n := strings.Count(r.out, "refused "); n < 20 {
			t.Errorf("%d refusals, want at least 20: did every attempt run?", n)
		}
	})
}

// TestSandboxProcWithoutLandlock: where Landlock is missing the host stays
// read-only (mount_setattr), /proc's machine-wide files included: the
// namespace's own /proc is a new mount, which the read-only host does not
// cover, and root could otherwise write /proc/sys/kernel/core_pattern (a
// program the kernel runs as root on the host at the next crash) or
// /proc/sysrq-trigger. bwrap covers /proc/sys, sysrq-trigger, irq and bus
// read-only; so does Run. The copy fallback refuses to run without
// Landlock, so the overlay only, on both ways of starting it.
func TestSandboxProcWithoutLandlock(t *testing.T) {
	sandboxMatrixModes(t, "procsys", []string{"overlay", "reexec"}, func(t *testing.T, w sandboxWorld, call *sandboxCall, cmd *exec.Cmd, uid int) {
		call.NoLandlock = true
	}, func(t *testing.T, r sandboxRun) {
		if !strings.Contains(r.out, "unconfined (Landlock unavailable") {
			t.Errorf("not run without Landlock")
		}
		for _, p := range []string{"/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches"} {
			wantRefused(t, r.out, "open for writing "+p, "read-only file system", "permission denied")
		}
	})
}

// TestSandboxDevShmTempDir: the sandbox's /dev is its own, but Run's
// temporary directory may live in the host's /dev/shm (the default where
// os.TempDir is on an overlay), and so may the root (with the temporary
// directory elsewhere): the run works there,
// in every way of running (the overlay ones without falling back to the
// copy), and the command's TMPDIR is writable. The oracle is the layer:
// the command's file is in it.
func TestSandboxDevShmTempDir(t *testing.T) {
	if _, err := landlockABI(runConfig{}); err != nil {
		t.Skip("Landlock is not available: ", err)
	}
	shm, err := os.MkdirTemp("/dev/shm", "cowfs-test-")
	if err != nil {
		t.Skip("no writable /dev/shm: ", err)
	}
	defer os.RemoveAll(shm)
	for _, c := range []struct{ mode, root string }{{"overlay", ""}, {"reexec", ""}, {"copy", ""}, {"overlay", shm}, {"reexec", shm}} {
		mode := c.mode
		name := mode
		if c.root != "" {
			name += "/root-in-shm"
		}
		t.Run(name, func(t *testing.T) {
			var opts []RunOption
			switch mode {
			case "overlay", "reexec":
				if why := canMount(t); why != "" {
					t.Skip(why)
				}
				if mode == "reexec" {
					opts = append(opts, withReexecInit())
				}
			case "copy":
				opts = append(opts, WithCopyFallback())
			}
			root := t.TempDir()
			if c.root != "" {
				root, err = os.MkdirTemp(c.root, "root-")
				if err != nil {
					t.Fatal(err)
				}
			}
			f, err := overlayfs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", `echo t > "$TMPDIR/x" && cat "$TMPDIR/x" > b`)
			cmd.Dir = root
			var m Mode
			opts = append(opts, WithModeReport(func(got Mode) { m = got }))
			if c.root == "" {
				opts = append(opts, WithTempDir(shm))
			}
			out, err := runOutput(f, cmd, opts...)
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if mode != "copy" && (m.Kind != ModeOverlay || m.Fallback != "") {
				t.Errorf("ran as %s", m)
			}
			if b, err := afero.ReadFile(f, filepath.Join(root, "b")); err != nil || string(b) != "t\n" {
				t.Fatalf("b: %q, %v", b, err)
			}
		})
	}
}

// runOutput runs cmd under Run and returns its combined output.
func runOutput(f *overlayfs.Fs, cmd *exec.Cmd, opts ...RunOption) (string, error) {
	var b strings.Builder
	cmd.Stdout, cmd.Stderr = &b, &b
	err := Run(context.Background(), f, cmd, opts...)
	return b.String(), err
}

// TestSandboxNoNamespaces: where no namespace can be made (a container
// whose seccomp profile refuses them, user namespaces disabled), Run
// refuses to run the command confined rather than run it without a mount
// namespace, where the host would not be read-only: through the hard
// link outside the root, chown, chmod 4755, touch and setxattr reached
// the real root's file (Landlock does not govern them), and the mode
// report said "confined". The caller here runs under a seccomp filter
// that refuses every namespace flag (clone, unshare; clone3 is ENOSYS).
func TestSandboxNoNamespaces(t *testing.T) {
	sandboxMatrix(t, "hardlink", func(t *testing.T, w sandboxWorld, call *sandboxCall, cmd *exec.Cmd, uid int) {
		call.Args = []string{filepath.Join(w.out, "link")}
		call.NoNS = true
	}, func(t *testing.T, r sandboxRun) {
		if !strings.Contains(r.out, "cannot be confined") || strings.Contains(r.out, "mode ") {
			t.Errorf("want Run refused with ErrUnconfined, the command not run")
		}
	})
}

// noNamespaces makes every thread of this process unable to make
// namespaces, as a container's seccomp profile can: clone and unshare
// with a namespace flag fail with EPERM, clone3 with ENOSYS (so that Go
// falls back to clone).
func noNamespaces() {
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	ns := uint32(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWCGROUP)
	prog := []unix.SockFilter{
		{Code: ld, K: 0},
		{Code: jeq, Jf: 1, K: unix.SYS_CLONE3},
		{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{Code: jeq, Jt: 1, K: unix.SYS_CLONE},
		{Code: jeq, Jf: 3, K: unix.SYS_UNSHARE},
		{Code: ld, K: 16}, // the flags (clone's first argument on amd64 and arm64)
		{Code: jset, Jf: 1, K: ns},
		{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	const tsync = 1 // SECCOMP_FILTER_FLAG_TSYNC: every thread
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, tsync, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		fmt.Printf("seccomp: %v\n", errno)
	}
}
