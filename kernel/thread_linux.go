package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A run as root in the initial user namespace needs no second start of
// this program: one thread of the caller, locked to its goroutine and
// thrown away afterwards, makes the namespaces for itself alone
// (unshare(2) of the descriptor table, the file system attributes, and
// the mount, PID, UTS, IPC and network namespaces), mounts the overlay
// and the read-only host there, forks the PID namespace's init (see
// forkInit), confines itself (Landlock, capabilities) and starts the
// command with os/exec. Its children inherit all of that; the rest of the
// process never sees it. Namespaces, mounts, Landlock, no_new_privs and
// capabilities are per thread; the Go runtime never starts a thread from
// a locked one, and ends such a thread when its goroutine returns.
//
// The thread's descriptor table is its own copy, every descriptor
// close-on-exec but the command's: only its standard files and
// ExtraFiles reach it. Whatever the thread opens it closes itself, since
// another thread would close the same number in the process's table.
// So the pipes os/exec would make for a Stdin, Stdout or Stderr that is
// not an *os.File are made before (pipeStdio), and the command's context
// is watched by the caller's goroutine, which kills init: that kills
// every process of the namespace, the command first.
//
// The command is not PID 1 but init's sibling in init's namespace: as
// under the re-executed init, signals it sends itself work as in a plain
// run, and the caller gets the command's own exit status.

// errNoThread means the namespaces could not be made in a thread: Run
// takes the re-executed init instead.
var errNoThread = errors.New("kernel: Run: no namespaces in a thread")

// threadRun is a command started in a thread by startInThread.
type threadRun struct {
	mu      sync.Mutex
	initPID int // 0 until forked; reaped sets it to -1
	started chan *runStatus
	done    chan error

	// Set by the thread before it sends on started: its thread ID and,
	// where the kernel has PIDFD_THREAD (Linux 6.9), a pidfd of it in the
	// process's descriptor table (else -1).
	tid, exitFD int
}

// pidfdThread is PIDFD_THREAD (Linux 6.9), which golang.org/x/sys does
// not name: a pidfd of one thread, readable once that thread has exited.
const pidfdThread = unix.O_EXCL

// gone waits until the thread has exited, so that no thread of the caller
// is left in the namespaces (and the overlay's mount is gone with them)
// when Run returns: a goroutine's return only schedules its locked
// thread's exit. Without PIDFD_THREAD it asks tgkill(2) until the thread
// ID is gone.
func (t *threadRun) gone() {
	if t.exitFD >= 0 {
		fds := []unix.PollFd{{Fd: int32(t.exitFD), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				break
			}
		}
		unix.Close(t.exitFD)
		return
	}
	for unix.Tgkill(unix.Getpid(), t.tid, 0) == nil {
		time.Sleep(50 * time.Microsecond)
	}
}

// killInit kills the namespace's init and with it every process of the
// namespace, unless already reaped.
func (t *threadRun) killInit() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.initPID > 0 {
		unix.Kill(t.initPID, unix.SIGKILL)
	}
}

// reapInit kills init and waits until it, and so every process of the
// namespace, is gone.
func (t *threadRun) reapInit() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.initPID <= 0 {
		return
	}
	unix.Kill(t.initPID, unix.SIGKILL)
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(t.initPID, &ws, 0, nil); err != unix.EINTR {
			break
		}
	}
	t.initPID = -1
}

// threadMaxRSS is the caller's resident memory above which the thread's
// fork of init costs more than a start of the program: the fork copies
// the page tables (BenchmarkRunLargeCaller: with 512 MiB resident the
// thread took 29–30 ms against 13–17 ms, 1.8–2.2×; about 0.045 ms a MiB
// over its 6 ms, so break-even near 150 MiB on the 2-core VM). os/exec's
// vfork copies none.
const threadMaxRSS = 128 << 20

// threadOK reports whether a run can take the thread: root in the initial
// user namespace (no user namespace to make, which a thread cannot), a
// command without SysProcAttr of its own (credentials, a chroot, ...: the
// re-executed init honours them), and a caller whose resident memory is
// at most maxRSS (0: threadMaxRSS).
func threadOK(userNS bool, cmd *exec.Cmd, maxRSS int64) bool {
	if maxRSS == 0 {
		maxRSS = threadMaxRSS
	}
	return !userNS && cmd.SysProcAttr == nil && os.Geteuid() == 0 && inInitUserNS() && residentBytes() <= maxRSS
}

// residentBytes is this process's resident memory (/proc/self/statm), or
// 0 where it cannot be read.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// runInThread runs c (made by cloneCmd, its Path and Dir as req says) as
// the overlay run describes it in req and ns. It returns errNoThread,
// before anything ran, when the thread cannot make the namespaces. Else
// hookErr is a failure before the command started (as the re-executed
// hook reports it), or waitErr is the command's, and no process of the
// command remains.
func runInThread(ctx context.Context, c *exec.Cmd, req runRequest, ns nsAttr, report func()) (hookErr *runStatus, waitErr error, err error) {
	pipes, err := pipeStdio(c)
	if err != nil {
		return nil, nil, err
	}
	t := &threadRun{started: make(chan *runStatus, 1), done: make(chan error, 1)}
	go t.run(ctx, c, req, ns, pipes.parent)
	stop := context.AfterFunc(ctx, t.killInit)
	s := <-t.started
	if s != nil {
		stop()
		t.reapInit()
		t.gone()
		pipes.finish()
		switch {
		case s.Stage == "thread":
			return nil, nil, errNoThread
		case s.Stage == "exec" && ctx.Err() != nil:
			return nil, nil, ctx.Err() // as exec.CommandContext's Start
		}
		return s, nil, nil
	}
	pipes.startStdin()
	report()
	waitErr = <-t.done
	stop()
	t.reapInit()
	t.gone()
	if err := pipes.finish(); waitErr == nil {
		waitErr = err
	}
	return nil, waitErr, nil
}

// run is the thread's part; it never unlocks the thread, which therefore
// ends with it.
func (t *threadRun) run(ctx context.Context, c *exec.Cmd, req runRequest, ns nsAttr, parentEnds []int) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread is never ended, only parked: it would keep the
		// namespaces and descriptors. Holding it, run on another.
		done := make(chan struct{})
		go func() {
			defer close(done)
			t.run(ctx, c, req, ns, parentEnds)
		}()
		<-done
		runtime.UnlockOSThread()
		return
	}
	// Before the unshare, so that the pidfd is in the caller's table.
	t.tid = unix.Gettid()
	var err error
	t.exitFD, err = unix.PidfdOpen(t.tid, pidfdThread)
	if err != nil {
		t.exitFD = -1
	}
	fail := func(stage string, err error) {
		s := newRunStatus(stage, err)
		t.started <- &s
	}
	flags := unix.CLONE_FILES | unix.CLONE_FS | unix.CLONE_NEWNS | unix.CLONE_NEWPID | int(ns.Cloneflags)
	if err := unix.Unshare(flags); err != nil {
		fail("thread", err)
		return
	}
	// From here on the thread is changed for good. Its copies of the
	// pipes' other ends would keep the command's stdin open.
	for _, fd := range parentEnds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fail("thread", err)
		return
	}
	if err := cloexecFrom(3); err != nil {
		fail("thread", err)
		return
	}
	if ns.Cloneflags&unix.CLONE_NEWNET != 0 && ns.LoopbackUp {
		loopbackUp()
	}
	if ns.HostReadOnly {
		if err := hostReadOnly(ns.Writable, ns.Keep); err != nil {
			fail("mount", err)
			return
		}
	}
	req.noRecord = true
	if err := req.mountView(); err != nil {
		fail("mount", err)
		return
	}
	if err := t.fork(); err != nil {
		fail("thread", err)
		return
	}
	// init has mounted the namespace's /proc.
	if ns.HostReadOnly {
		if err := procReadOnly(); err != nil {
			fail("mount", err)
			return
		}
	}
	if req.Dir != "" {
		// The thread's own working directory: the command inherits it.
		if stage, err := enterDir(req.Dir, req.StatDir, req.Caps); err != nil {
			fail(stage, err)
			return
		}
		c.Dir = ""
	}
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	if req.Landlock > 0 {
		if err := confineSelf(req.Landlock, req.Writable, passedFDs(c)); err != nil {
			fail("confine", fmt.Errorf("kernel: Run: confining the command with Landlock: %w", err))
			return
		}
	}
	if err := req.lockDown(); err != nil {
		fail("confine", err)
		return
	}
	if err := ctx.Err(); err != nil {
		fail("exec", err)
		return
	}
	// A session of its own, without a controlling terminal. No
	// Pdeathsig: os/exec's child would take its parent, outside the PID
	// namespace, for dead; it dies with init, which dies with this thread.
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		fail("exec", err)
		return
	}
	t.started <- nil
	t.done <- c.Wait()
}

// fork forks the namespace's init and waits until it has mounted /proc.
func (t *threadRun) fork() error {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return err
	}
	var lim unix.Rlimit
	maxFD := 1024
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Cur < 1<<16 {
		maxFD = int(lim.Cur)
	}
	// life: its write end stays in this thread's descriptor table (its
	// own since the unshare; close-on-exec, so the command does not get
	// it) until the thread ends; init watches the read end.
	var life [2]int
	if err := unix.Pipe2(life[:], unix.O_CLOEXEC); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return err
	}
	args := newInitArgs(maxFD, life[0])
	pid, errno := forkInit(args)
	runtime.KeepAlive(args)
	unix.Close(p[1])
	unix.Close(life[0])
	if errno != 0 {
		unix.Close(p[0])
		return fmt.Errorf("fork: %w", errno)
	}
	t.mu.Lock()
	t.initPID = pid
	t.mu.Unlock()
	// init closes every descriptor once /proc is mounted: end of file.
	var b [1]byte
	for {
		if _, err := unix.Read(p[0], b[:]); err != unix.EINTR {
			break
		}
	}
	unix.Close(p[0])
	return nil
}

// cloexecFrom marks this thread's descriptors from fd on close-on-exec
// (close_range with CLOSE_RANGE_CLOEXEC, Linux 5.11, else one by one as
// /proc/thread-self/fd lists them).
func cloexecFrom(fd int) error {
	if unix.CloseRange(uint(fd), ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return nil
	}
	dir, err := unix.Open("/proc/thread-self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getdents(dir, buf)
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			if d, err := strconv.Atoi(name); err == nil && d >= fd && d != dir {
				unix.FcntlInt(uintptr(d), unix.F_SETFD, unix.FD_CLOEXEC)
			}
		}
	}
}

// passedFDs are the descriptors the command gets besides its standard
// input: Landlock lets it write the files among them.
func passedFDs(c *exec.Cmd) []int {
	var fds []int
	for _, w := range []io.Writer{c.Stdout, c.Stderr} {
		if f, ok := w.(*os.File); ok && f != nil {
			fds = append(fds, int(f.Fd()))
		}
	}
	for _, f := range c.ExtraFiles {
		if f != nil {
			fds = append(fds, int(f.Fd()))
		}
	}
	return fds
}

// stdioPipes are the pipes pipeStdio made in place of os/exec's.
type stdioPipes struct {
	child  []*os.File   // the command's ends, closed once it is gone
	parent []int        // the copies' ends: the thread closes its own
	stdin  func() error // the copy into the command's stdin, once it runs
	stdinW *os.File     // its pipe's end, closed by it or by finish
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error // the first copy error
}

// pipeStdio replaces c's Stdin, Stdout and Stderr that are not *os.File
// with pipes copied by goroutines, as os/exec would (Stdout and Stderr
// being the same writer share one pipe).
func pipeStdio(c *exec.Cmd) (*stdioPipes, error) {
	p := &stdioPipes{}
	if r := c.Stdin; r != nil {
		if _, ok := r.(*os.File); !ok {
			pr, pw, err := os.Pipe()
			if err != nil {
				return nil, err
			}
			c.Stdin = pr
			p.child = append(p.child, pr)
			p.parent = append(p.parent, fdOf(pw))
			p.stdinW = pw
			// Started with the command only: where the thread cannot run
			// it, the re-executed init gets all of Stdin.
			p.stdin = func() error {
				_, err := io.Copy(pw, r)
				if errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed) {
					err = nil // the command did not read it all
				}
				if err1 := pw.Close(); err == nil {
					err = err1
				}
				return err
			}
		}
	}
	stdout := c.Stdout
	pipeOut := func(w io.Writer) (io.Writer, error) {
		if w == nil {
			return nil, nil
		}
		if _, ok := w.(*os.File); ok {
			return w, nil
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		p.child = append(p.child, pw)
		p.parent = append(p.parent, fdOf(pr))
		p.copy(func() error {
			_, err := io.Copy(w, pr)
			pr.Close()
			return err
		})
		return pw, nil
	}
	var err error
	if c.Stdout, err = pipeOut(stdout); err != nil {
		p.finish()
		return nil, err
	}
	if stdout != nil && sameWriter(c.Stderr, stdout) {
		c.Stderr = c.Stdout
	} else if c.Stderr, err = pipeOut(c.Stderr); err != nil {
		p.finish()
		return nil, err
	}
	return p, nil
}

// startStdin starts the copy into the command's stdin, if there is one.
func (p *stdioPipes) startStdin() {
	if p.stdin != nil {
		p.copy(p.stdin)
		p.stdin = nil
	}
}

func (p *stdioPipes) copy(fn func() error) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := fn(); err != nil {
			p.mu.Lock()
			if p.err == nil {
				p.err = err
			}
			p.mu.Unlock()
		}
	}()
}

// finish closes the command's ends and waits for the copies.
func (p *stdioPipes) finish() error {
	if p.stdin != nil { // never started
		p.stdinW.Close()
		p.stdin = nil
	}
	for _, f := range p.child {
		f.Close()
	}
	p.child = nil
	p.wg.Wait()
	return p.err
}

// fdOf is f's descriptor, left in non-blocking mode (unlike f.Fd).
func fdOf(f *os.File) int {
	fd := -1
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(d uintptr) { fd = int(d) })
	}
	return fd
}

// sameWriter is os/exec's test for a shared Stdout and Stderr.
func sameWriter(a, b io.Writer) (eq bool) {
	defer func() { recover() }() // uncomparable dynamic types
	return a == b
}
