package kernel

import (
	"bytes"
	"encoding/base64"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The process tree of a Run, so that nothing it starts outlives it:
//
//	caller ── outer supervisor ── init (PID 1 of a new PID namespace) ── command
//
// The outer supervisor stays in the caller's PID namespace. It watches a
// control pipe from the caller: a byte means "cancel", end of file means the
// caller is gone; either way it kills init with SIGKILL. When init dies, by
// any cause, the kernel kills every process of its PID namespace and init
// is not reaped before they are all gone; with them goes the mount namespace
// holding the overlay. init and the command carry PR_SET_PDEATHSIG SIGKILL
// as well, so a killed supervisor takes them along. The outer supervisor
// then exits the way the command did (same exit code, or killed by the same
// signal), so the caller sees the command's own status.
//
// Where no PID namespace can be made (no privilege and no user namespaces),
// the outer supervisor runs the command itself as a child subreaper: every
// orphan of the command becomes its child, and it kills all its descendants
// when the command exits, on cancel and when the caller dies. Only a
// SIGKILL of the supervisor itself then leaves the command's descendants
// (the command itself still dies by its PR_SET_PDEATHSIG).

// superviseEnv carries a supervisor request to the re-executed binary.
const superviseEnv = "COWFS_KERNEL_SUPERVISE"

// encodeRequest encodes a request (a superviseRequest or a runRequest) for
// the environment variable that carries it to a re-executed stage: gob, in
// base64. Unlike JSON, gob keeps strings byte for byte: paths, arguments
// and messages need not be UTF-8.
func encodeRequest(v any) (string, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b.Bytes()), nil
}

// decodeRequest decodes what encodeRequest encoded into v.
func decodeRequest(s string, v any) error {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	return gob.NewDecoder(bytes.NewReader(b)).Decode(v)
}

// writeStatus writes a failure to a status pipe, gob-encoded.
func writeStatus(w io.Writer, s runStatus) {
	gob.NewEncoder(w).Encode(s)
}

// readStatus decodes what writeStatus wrote.
func readStatus(msg []byte) (runStatus, error) {
	var s runStatus
	err := gob.NewDecoder(bytes.NewReader(msg)).Decode(&s)
	return s, err
}

// superviseRequest is what a supervisor process needs.
type superviseRequest struct {
	Stage string `json:"stage"` // "outer" or "init"
	Exe   string `json:"exe"`   // this program, to start init
	Path  string `json:"path"`  // the command
	// The command's arguments (argv, from argv[0]) are the supervisor's
	// own after argv[0]: an environment variable holds at most 128 KiB,
	// the arguments as much as os/exec passes.
	// Files is how many descriptors (0, 1, 2, then the command's extra
	// files) pass through to the command unchanged. The supervisor's own
	// descriptors follow: its status pipe at Files, then the control pipe
	// (outer) or the result pipe (init) at Files+1.
	Files int `json:"files"`
	// Namespaces are tried in order for init; NSRequired says the command
	// must not run without the first one that works.
	Namespaces []nsAttr             `json:"namespaces,omitempty"`
	NSRequired bool                 `json:"nsrequired,omitempty"`
	Attr       *syscall.SysProcAttr `json:"attr,omitempty"` // for the command
	Fail       string               `json:"fail,omitempty"` // stage reported when the command cannot start
	// Dir is the command's working directory. The supervisors start in
	// "/": a Dir the command cannot enter fails as os/exec fails for it
	// ("fork/exec PROG"), not as a failure to start a supervisor.
	Dir string `json:"dir,omitempty"`
	// Direct: init was started by the caller itself, not by an outer
	// supervisor. Its control pipe follows the result pipe (Files+2); it
	// exits as the command did, but for a signal (see supervised.wait).
	Direct bool `json:"direct,omitempty"`
}

// nsAttr is the namespace part of a SysProcAttr, applied to init.
type nsAttr struct {
	Cloneflags                 uintptr                `json:"cloneflags,omitempty"`
	Unshareflags               uintptr                `json:"unshareflags,omitempty"`
	UidMappings                []syscall.SysProcIDMap `json:"uidmap,omitempty"`
	GidMappings                []syscall.SysProcIDMap `json:"gidmap,omitempty"`
	GidMappingsEnableSetgroups bool                   `json:"setgroups,omitempty"`
	// AmbientCaps lets an init that is not uid 0 in its user namespace keep
	// the capabilities to mount its /proc; it drops them for the command.
	AmbientCaps []uintptr `json:"ambient,omitempty"`
	// ReadOnly are directories init bind-mounts read-only onto themselves
	// in its mount namespace (the copy fallback's real root): Landlock
	// leaves chmod, chown, utimes and xattrs ungoverned.
	ReadOnly []string `json:"readonly,omitempty"`
	// HostReadOnly makes every mount of init's mount namespace read-only
	// except Writable, which are bind-mounted onto themselves first and
	// stay writable (nodev, nosuid): so no write, metadata included,
	// reaches the host through any name, as under bwrap --ro-bind / /.
	HostReadOnly bool     `json:"hostro,omitempty"`
	Writable     []string `json:"writable,omitempty"`
	// Keep are more paths the sandbox's own /dev must leave reachable
	// (see privateDev): the root, which the overlay is mounted over.
	Keep []string `json:"keep,omitempty"`
	// LoopbackUp brings up lo in a new network namespace.
	LoopbackUp bool `json:"lo,omitempty"`
}

// sandboxNS are the namespaces of every sandboxed run besides the mount
// and PID ones: UTS, IPC and, unless network, the network.
func sandboxNS(network bool) uintptr {
	if network {
		return syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC
	}
	return syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWNET
}

// The supervisors report on their status pipe, as runHook does, with a
// runStatus: Stage "namespace" or the request's Fail. Nothing is written
// when the command started.

// startError means the command never ran: its namespaces could not be
// made (Stage "namespace") or it could not be started.
type startError struct {
	stage string
	path  string
	err   error
}

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// supervised is the caller's handle on a command started by [superviseStart].
type supervised struct {
	cmd    *exec.Cmd
	ctl    *os.File // write end of the control pipe
	status *os.File // read end of the supervisors' status pipe
	result *os.File // read end of init's result pipe, when started directly
	path   string
}

// supervisorWaitDelay bounds how long Wait waits for the supervisor after
// a cancel before killing it outright (then init dies by its death signal).
const supervisorWaitDelay = 10 * time.Second

// superviseStart starts c, an unstarted command made by cloneCmd, under
// the supervisors. c's namespace flags and ID mappings go to init, along
// with CLONE_NEWPID; the rest of its SysProcAttr applies to the command,
// except the caller-side PidFD and cgroup fields, which apply to the outer
// supervisor. When c asks for no namespaces, those of fallback are tried
// in turn, and, unless nsRequired, then none. c.Dir is the command's:
// the supervisors start in "/". fail names the stage reported when the
// command cannot start. It returns errors of c.Start as they are.
func superviseStart(c *exec.Cmd, fallback []nsAttr, nsRequired bool, fail string) (*supervised, error) {
	exe, err := os.Executable()
	if err != nil && nsRequired {
		return nil, &startError{stage: "namespace", path: c.Path, err: fmt.Errorf("cannot re-execute this program: %w", err)}
	}
	if err != nil {
		// No supervisor without /proc/self/exe: the command at least dies
		// with its caller.
		if c.SysProcAttr == nil {
			c.SysProcAttr = &syscall.SysProcAttr{}
		}
		c.SysProcAttr.Pdeathsig = syscall.SIGKILL
		if err := c.Start(); err != nil {
			return nil, err
		}
		return &supervised{cmd: c}, nil
	}
	req := superviseRequest{
		Stage: "outer", Exe: exe, Path: c.Path,
		Files: 3 + len(c.ExtraFiles), NSRequired: nsRequired, Fail: fail, Dir: c.Dir,
	}
	outer := &syscall.SysProcAttr{}
	if a := c.SysProcAttr; a != nil {
		ns := nsAttr{
			Cloneflags: a.Cloneflags, Unshareflags: a.Unshareflags,
			UidMappings: a.UidMappings, GidMappings: a.GidMappings,
			GidMappingsEnableSetgroups: a.GidMappingsEnableSetgroups,
		}
		if ns.Cloneflags != 0 || ns.Unshareflags != 0 {
			// Namespaces asked for are never dropped: with the fallback's
			// when it has some, else alone.
			req.Namespaces, req.NSRequired = []nsAttr{ns}, true
			if len(fallback) > 0 {
				req.Namespaces = nil
				for _, fb := range fallback {
					fb.Cloneflags |= ns.Cloneflags
					fb.Unshareflags |= ns.Unshareflags
					if ns.UidMappings != nil {
						fb.UidMappings, fb.GidMappings, fb.GidMappingsEnableSetgroups = ns.UidMappings, ns.GidMappings, ns.GidMappingsEnableSetgroups
					}
					req.Namespaces = append(req.Namespaces, fb)
				}
			}
		}
		cmdAttr := *a
		cmdAttr.Cloneflags, cmdAttr.Unshareflags = 0, 0
		cmdAttr.UidMappings, cmdAttr.GidMappings, cmdAttr.GidMappingsEnableSetgroups = nil, nil, false
		outer.PidFD, outer.UseCgroupFD, outer.CgroupFD = a.PidFD, a.UseCgroupFD, a.CgroupFD
		cmdAttr.PidFD, cmdAttr.UseCgroupFD, cmdAttr.CgroupFD = nil, false, 0
		req.Attr = &cmdAttr
	}
	if len(req.Namespaces) == 0 {
		req.Namespaces = fallback
	}
	if sup, err := startInitDirect(c, req, outer); sup != nil || err != nil {
		return sup, err
	}
	reqEnv, err := encodeRequest(req)
	if err != nil {
		return nil, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		statusR.Close()
		statusW.Close()
		return nil, err
	}
	c.Path, c.Args, c.Dir = exe, append([]string{exe}, c.Args...), "/"
	c.ExtraFiles = append(slices.Clip(c.ExtraFiles), statusW, ctlR)
	c.Env = append(slices.Clip(c.Env), superviseEnv+"="+reqEnv)
	c.SysProcAttr = outer
	c.Cancel = func() error {
		_, err := ctlW.Write([]byte{'k'})
		return err
	}
	if c.WaitDelay == 0 {
		c.WaitDelay = supervisorWaitDelay
	}
	err = c.Start()
	statusW.Close()
	ctlR.Close()
	if err != nil {
		statusR.Close()
		ctlW.Close()
		return nil, err
	}
	return &supervised{cmd: c, ctl: ctlW, status: statusR, path: req.Path}, nil
}

// startInitDirect starts init itself, in the first of req's namespaces
// that can be made, with no outer supervisor: one start of this program
// fewer. init watches a control pipe from the caller (end of file: the
// caller is gone, and init exits, which kills the namespace), and ctx's
// cancel kills it. It returns nil and no error where no namespace can be
// made (then the outer supervisor runs the command directly, as a
// subreaper) or none was asked for. outer holds the caller-side process
// attributes (pidfd, cgroup).
func startInitDirect(c *exec.Cmd, req superviseRequest, outer *syscall.SysProcAttr) (*supervised, error) {
	if len(req.Namespaces) == 0 {
		return nil, nil
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	resultR, resultW, err := os.Pipe()
	if err != nil {
		statusR.Close()
		statusW.Close()
		return nil, err
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		statusR.Close()
		statusW.Close()
		resultR.Close()
		resultW.Close()
		return nil, err
	}
	closeAll := func() {
		for _, f := range []*os.File{statusR, statusW, resultR, resultW, ctlR, ctlW} {
			f.Close()
		}
	}
	initReq := req
	initReq.Stage, initReq.Direct = "init", true
	args, files, env := slices.Clip(c.Args), slices.Clip(c.ExtraFiles), slices.Clip(c.Env)
	var nsErr error
	for _, ns := range req.Namespaces {
		initReq.Namespaces = []nsAttr{ns}
		initEnv, err := encodeRequest(initReq)
		if err != nil {
			closeAll()
			return nil, err
		}
		// A copy of c, unstarted, keeps its context: cancelling kills init.
		ic := new(exec.Cmd)
		*ic = *c
		ic.Path, ic.Args = req.Exe, append([]string{req.Exe}, args...)
		ic.Dir, ic.Stdin, ic.Stdout, ic.Stderr = "/", c.Stdin, c.Stdout, c.Stderr
		ic.ExtraFiles = append(files, statusW, resultW, ctlR)
		ic.Env = append(env, superviseEnv+"="+initEnv)
		ic.Cancel = func() error { return ic.Process.Kill() }
		if ic.WaitDelay == 0 {
			ic.WaitDelay = supervisorWaitDelay
		}
		ic.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags: ns.Cloneflags | syscall.CLONE_NEWPID, Unshareflags: ns.Unshareflags,
			UidMappings: ns.UidMappings, GidMappings: ns.GidMappings,
			GidMappingsEnableSetgroups: ns.GidMappingsEnableSetgroups,
			AmbientCaps:                ns.AmbientCaps,
			Pdeathsig:                  syscall.SIGKILL,
			PidFD:                      outer.PidFD, UseCgroupFD: outer.UseCgroupFD, CgroupFD: outer.CgroupFD,
		}
		err = ic.Start()
		if err == nil {
			statusW.Close()
			resultW.Close()
			ctlR.Close()
			return &supervised{cmd: ic, ctl: ctlW, status: statusR, result: resultR, path: req.Path}, nil
		}
		if !nsStartFailed(err) {
			closeAll()
			return nil, &startError{stage: "namespace", path: req.Path, err: fmt.Errorf("cannot start the PID namespace's init: %w", err)}
		}
		nsErr = err
	}
	closeAll()
	if req.NSRequired {
		// The outer supervisor would try the same namespaces with the same
		// privileges and only report this; starting it would also let
		// os/exec copy part of a Stdin that is not an *os.File into it,
		// lost to the fallback that follows.
		return nil, &startError{stage: "namespace", path: req.Path, err: fmt.Errorf("cannot create the namespaces: %w", nsErr)}
	}
	return nil, nil
}

// started waits until the command has started (the supervisors closed
// their status pipe) and returns a *startError if it could not.
func (s *supervised) started() error {
	if s.status == nil {
		return nil
	}
	msg, _ := io.ReadAll(s.status)
	s.status.Close()
	s.status = nil
	if len(msg) == 0 {
		return nil
	}
	st, err := readStatus(msg)
	if err != nil {
		return &startError{stage: "start", path: s.path, err: fmt.Errorf("kernel: Run: supervisor: %q", msg)}
	}
	err = st.err()
	if st.Stage != "namespace" && st.Errno != 0 {
		// As os/exec says it when the program cannot be started.
		err = &os.PathError{Op: "fork/exec", Path: s.path, Err: syscall.Errno(st.Errno)}
	}
	return &startError{stage: st.Stage, path: s.path, err: err}
}

// wait waits for the command; when it never started, the error is a
// *startError. Afterwards no process of the command remains.
func (s *supervised) wait() error {
	startErr := s.started()
	err := s.cmd.Wait()
	if s.ctl != nil {
		s.ctl.Close()
	}
	if s.result != nil {
		// init exits as the command did, but cannot die of a signal (the
		// init of a PID namespace ignores its own): then the caller's
		// error comes from a process that does.
		b, _ := io.ReadAll(s.result)
		s.result.Close()
		if n, perr := strconv.ParseUint(string(b), 10, 32); perr == nil && startErr == nil {
			if ws := unix.WaitStatus(n); ws.Signaled() {
				err = diedOf(ws.Signal())
			}
		}
	}
	if startErr != nil {
		return startErr
	}
	return err
}

// dieEnv makes this program die of the signal it names (see diedOf).
const dieEnv = "COWFS_KERNEL_DIE"

// diedOf is the error of a process killed by sig, as exec's Wait gives
// it: this program started again to die of it.
func diedOf(sig unix.Signal) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("kernel: Run: the command was killed by %v", sig)
	}
	c := exec.Command(exe)
	c.Env = []string{dieEnv + "=" + strconv.Itoa(int(sig))}
	return c.Run()
}

// superviseHook runs a supervisor stage in a re-executed binary. It never
// returns.
func superviseHook(reqEnv string) {
	var req superviseRequest
	if err := decodeRequest(reqEnv, &req); err != nil {
		fmt.Fprintf(os.Stderr, "cowfs kernel supervisor: bad %s: %v\n", superviseEnv, err)
		exit(125)
	}
	// Signals sent to the whole process group (a terminal's ^C) must not
	// kill the supervisors before the caller: the command, in a session
	// of its own, does not get them. A caught signal is reset to the
	// default in the command by exec.
	signal.Notify(make(chan os.Signal, 1), unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE)
	// Only the descriptors passed on purpose reach the command: whatever
	// the caller held without close-on-exec stops here.
	closeOnExecFrom(req.Files + 2)
	status := os.NewFile(uintptr(req.Files), "cowfs-supervisor-status")
	syscall.CloseOnExec(req.Files)
	syscall.CloseOnExec(req.Files + 1)
	switch req.Stage {
	case "outer":
		superviseOuter(req, status, os.NewFile(uintptr(req.Files+1), "cowfs-supervisor-ctl"))
	case "init":
		superviseInit(req, status, os.NewFile(uintptr(req.Files+1), "cowfs-supervisor-result"))
	}
	fmt.Fprintf(os.Stderr, "cowfs kernel supervisor: unknown stage %q\n", req.Stage)
	exit(125)
}

// exit ends a supervisor at once. Unlike os.Exit it skips the exit hooks,
// among them the race detector's, which waits a second (GORACE
// atexit_sleep_ms) in each of the two supervisors of a -race binary.
func exit(code int) { syscall.Exit(code) }

// reportStart writes why something could not be started and exits.
func reportStart(status *os.File, stage string, err error) {
	writeStatus(status, newRunStatus(stage, err))
	exit(125)
}

// passedFiles are the descriptors 3..n-1 that pass through to the command.
func passedFiles(n int) []*os.File {
	var fs []*os.File
	for fd := 3; fd < n; fd++ {
		fs = append(fs, os.NewFile(uintptr(fd), "fd"+strconv.Itoa(fd)))
	}
	return fs
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// envWithout is the environment minus key.
func envWithout(key string) []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
}

// commandCmd is the command as the request describes it.
func commandCmd(req superviseRequest, files []*os.File) *exec.Cmd {
	c := &exec.Cmd{
		Path: req.Path, Args: os.Args[1:], Env: envWithout(superviseEnv), Dir: req.Dir,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, ExtraFiles: files,
	}
	attr := &syscall.SysProcAttr{}
	if req.Attr != nil {
		*attr = *req.Attr
	}
	attr.Pdeathsig = syscall.SIGKILL
	// A session of its own, without a controlling terminal: no TIOCSTI
	// into the caller's terminal, no kill of the caller's process group.
	attr.Setsid, attr.Setpgid, attr.Setctty, attr.Foreground = true, false, false, false
	c.SysProcAttr = attr
	return c
}

// closeOnExecFrom marks every descriptor from fd on close-on-exec.
func closeOnExecFrom(fd int) {
	if unix.CloseRange(uint(fd), ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Before Linux 5.11: one by one, as /proc lists them.
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= fd {
			syscall.CloseOnExec(n)
		}
	}
}

// nsStartFailed reports whether a start error means the namespaces could
// not be made, so that the next way may work.
func nsStartFailed(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSPC) ||
		errors.Is(err, syscall.EUSERS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOSYS)
}

// superviseOuter is the supervisor in the caller's PID namespace.
func superviseOuter(req superviseRequest, status, ctl *os.File) {
	// Orphans of a directly run command become our children.
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	files := passedFiles(req.Files)
	resultR, resultW, err := os.Pipe()
	if err != nil {
		reportStart(status, "namespace", err)
	}
	initReq := req
	initReq.Stage = "init"
	var child *os.Process
	var nsErr error
	for _, ns := range req.Namespaces {
		c := &exec.Cmd{
			Path: req.Exe, Args: os.Args, // the command's arguments pass on
			Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
			ExtraFiles: append(slices.Clip(files), status, resultW),
			SysProcAttr: &syscall.SysProcAttr{
				Cloneflags: ns.Cloneflags | syscall.CLONE_NEWPID, Unshareflags: ns.Unshareflags,
				UidMappings: ns.UidMappings, GidMappings: ns.GidMappings,
				GidMappingsEnableSetgroups: ns.GidMappingsEnableSetgroups,
				AmbientCaps:                ns.AmbientCaps,
				Pdeathsig:                  syscall.SIGKILL,
			},
		}
		initReq.Namespaces = []nsAttr{ns}
		initEnv, err := encodeRequest(initReq)
		if err != nil {
			reportStart(status, "namespace", err)
		}
		c.Env = append(envWithout(superviseEnv), superviseEnv+"="+initEnv)
		if nsErr = c.Start(); nsErr == nil {
			child = c.Process
			break
		}
		if !nsStartFailed(nsErr) {
			reportStart(status, "namespace", fmt.Errorf("cannot start the PID namespace's init: %w", nsErr))
		}
	}
	direct := child == nil
	if direct {
		if req.NSRequired {
			reportStart(status, "namespace", fmt.Errorf("cannot create the namespaces: %w", nsErr))
		}
		c := commandCmd(req, files)
		if err := c.Start(); err != nil {
			reportStart(status, req.Fail, err)
		}
		child = c.Process
	}
	resultW.Close()
	status.Close()
	closeFiles(files)

	go func() {
		// A byte is a cancel; end of file means the caller is gone.
		ctl.Read(make([]byte, 1))
		if direct {
			killDescendants()
		} else {
			unix.Kill(child.Pid, unix.SIGKILL)
		}
	}()
	ws := reap(child.Pid)
	if direct {
		for {
			killDescendants()
			var w unix.WaitStatus
			if _, err := unix.Wait4(-1, &w, 0, nil); err == unix.ECHILD {
				break
			}
		}
	} else if b, err := io.ReadAll(resultR); err == nil && len(b) > 0 {
		if n, err := strconv.ParseUint(string(b), 10, 32); err == nil {
			ws = unix.WaitStatus(n)
		}
	}
	exitAs(ws)
}

// superviseInit is PID 1 of the command's PID namespace.
func superviseInit(req superviseRequest, status, result *os.File) {
	// The thread that starts the command has its credentials (Landlock,
	// capabilities): without this the command could ptrace that thread
	// and, through the memory it shares, make the others (all
	// capabilities, no Landlock) do its work. Not dumpable, init needs
	// CAP_SYS_PTRACE to be traced, which the command never has.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if req.Direct {
		// Started by the caller itself: end of file on the control pipe
		// means the caller is gone; exiting kills the namespace.
		syscall.CloseOnExec(req.Files + 2)
		ctl := os.NewFile(uintptr(req.Files+2), "cowfs-supervisor-ctl")
		go func() {
			ctl.Read(make([]byte, 1))
			exit(125)
		}()
	}
	// The command's own view of processes: $$ and getpid() name entries of
	// this /proc. Where the namespace cannot mount one (a container's
	// /proc with masked paths refuses), the caller's stays.
	for _, ns := range req.Namespaces {
		if ns.Cloneflags&syscall.CLONE_NEWNET != 0 && ns.LoopbackUp {
			loopbackUp()
		}
		if ns.Unshareflags&syscall.CLONE_NEWNS == 0 {
			continue
		}
		if ns.HostReadOnly {
			if err := hostReadOnly(ns.Writable, ns.Keep); err != nil {
				reportStart(status, "namespace", err)
			}
		}
		unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		if ns.HostReadOnly {
			if err := procReadOnly(); err != nil {
				reportStart(status, "namespace", err)
			}
		}
		// Best effort: where it fails, Landlock still keeps the contents,
		// and Run's check afterwards catches the rest.
		for _, p := range ns.ReadOnly {
			readOnlyBind(p)
		}
	}
	// Capabilities kept only to mount /proc do not pass on to the command:
	// ambient capabilities are per thread, and this thread starts it.
	runtime.LockOSThread()
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	files := passedFiles(req.Files)
	c := commandCmd(req, files)
	var hookStatus *os.File
	if hookEnv, ok := os.LookupEnv(runEnv); ok {
		// Run's hook, done here: the command starts from this process.
		var s *runStatus
		if hookStatus, s = hookInInit(hookEnv, c); s != nil {
			writeStatus(hookStatus, *s)
			status.Close()
			fmt.Fprint(result, uint32(125<<8)) // exited 125, as the hook did
			exit(125)
		}
	}
	if err := c.Start(); err != nil {
		if hookStatus != nil {
			writeStatus(hookStatus, newRunStatus("exec", err))
			status.Close()
			fmt.Fprint(result, uint32(125<<8))
			exit(125)
		}
		reportStart(status, req.Fail, err)
	}
	if hookStatus != nil {
		hookStatus.Close()
	}
	status.Close()
	closeFiles(files)
	ws := reap(c.Process.Pid)
	fmt.Fprint(result, uint32(ws))
	// Exiting makes the kernel kill everything else in the namespace.
	if req.Direct && ws.Exited() {
		exit(ws.ExitStatus())
	}
	exit(0)
}

// reap reaps children until pid exits and returns its status. Other
// children (orphans handed to a reaper) are reaped and forgotten.
func reap(pid int) unix.WaitStatus {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// No children left: the command is gone without a status.
			return unix.WaitStatus(unix.SIGKILL)
		}
		if got == pid {
			return ws
		}
	}
}

// killDescendants sends SIGKILL to every descendant of this process.
func killDescendants() {
	for _, pid := range descendants(os.Getpid()) {
		unix.Kill(pid, unix.SIGKILL)
	}
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentPID(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// parentPID is a process's parent, field 4 of /proc/PID/stat.
func parentPID(pid int) (int, bool) {
	f := procStat(pid)
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}

// procStat is /proc/PID/stat from field 3 (the state) on: the command
// name before it may hold spaces and parentheses.
func procStat(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// exitAs ends this process the way ws says the command ended: with the
// same exit code, or killed by the same signal, so the caller's
// *exec.ExitError reads as the command's own.
func exitAs(ws unix.WaitStatus) {
	switch {
	case ws.Exited():
		exit(ws.ExitStatus())
	case ws.Signaled():
		dieOf(ws.Signal())
	}
	exit(125)
}

// dieOf kills this process with sig. The Go runtime handles most signals
// itself (SIGQUIT dumps goroutines, SIGUSR1 is ignored), so the default
// action is restored in the kernel first. No core is dumped: the command
// already did, if it could.
func dieOf(sig unix.Signal) {
	runtime.LockOSThread()
	unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	// A zeroed struct sigaction is SIG_DFL on every architecture.
	var act [4]uint64
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	var set unix.Sigset_t
	set.Val[(sig-1)/64] |= 1 << ((uint(sig) - 1) % 64)
	unix.PthreadSigmask(unix.SIG_UNBLOCK, &set, nil)
	unix.Tgkill(unix.Getpid(), unix.Gettid(), sig)
	time.Sleep(100 * time.Millisecond)
	exit(128 + int(sig))
}

// haveMountSetattr reports whether the kernel has mount_setattr.
func haveMountSetattr() bool {
	return unix.MountSetattr(-1, "", 0, &unix.MountAttr{}) != unix.ENOSYS
}

// hostReadOnly makes every mount of this mount namespace read-only except
// the writable paths, which stay writable, nodev and nosuid. It needs
// mount_setattr (Linux 5.12); before, it does nothing but that: first it
// gives the namespace a /dev of its own (privateDev), which leaves the
// writable paths and keep reachable.
func hostReadOnly(writable, keep []string) error {
	if err := privateDev(append(slices.Clip(writable), keep...)); err != nil {
		return err
	}
	for _, w := range writable {
		if err := unix.Mount(w, w, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return &os.PathError{Op: "mount", Path: w, Err: err}
		}
	}
	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &ro); err == unix.ENOSYS {
		return nil // before Linux 5.12: Mode.Missing says so
	} else if err != nil {
		return fmt.Errorf("making the host read-only: %w", &os.PathError{Op: "mount_setattr", Path: "/", Err: err})
	}
	rw := unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY, Attr_set: unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOSUID}
	for _, w := range writable {
		if err := unix.MountSetattr(unix.AT_FDCWD, w, unix.AT_RECURSIVE, &rw); err != nil {
			return &os.PathError{Op: "mount_setattr", Path: w, Err: err}
		}
	}
	return nil
}

// devNodes are the host's device nodes a sandbox's /dev holds (bwrap's
// --dev /dev set).
var devNodes = [...]string{"null", "zero", "full", "random", "urandom", "tty"}

// privateDev gives this mount namespace a /dev of its own, as bwrap --dev
// /dev does: a tmpfs (nodev, nosuid) holding the standard devices
// (devNodes, bind mounts of the host's), the symlinks stdin, stdout,
// stderr, fd, core and ptmx, a new devpts instance on pts (ptmx is its
// ptmx), and an empty shm; the host's /dev/shm instead where one of
// paths lies in it (Run's temporary directory does where os.TempDir is on
// an overlay; the root may). No other device of the host is reachable by
// name: as root the command could otherwise read its disks and, through
// the host's devpts, open any terminal, write to it, read its input and,
// with TIOCSCTTY, push input into it. The pseudo-terminals it makes are
// its own; the terminals passed to it as descriptors still work. Nothing
// where /dev is not a directory.
func privateDev(paths []string) error {
	if st, err := os.Lstat("/dev"); err != nil || !st.IsDir() {
		return nil
	}
	// The host's nodes and mounts, as detached copies, before the tmpfs
	// hides them.
	clones := map[string]int{}
	defer func() {
		for _, fd := range clones {
			unix.Close(fd)
		}
	}()
	for _, n := range devNodes {
		if fd, err := unix.OpenTree(unix.AT_FDCWD, "/dev/"+n, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err == nil {
			clones[n] = fd
		}
	}
	if slices.ContainsFunc(paths, func(p string) bool { _, in := relInside("/dev/shm", p); return in }) {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/dev/shm", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return &os.PathError{Op: "open_tree", Path: "/dev/shm", Err: err}
		}
		clones["shm"] = fd
	}
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return &os.PathError{Op: "mount tmpfs", Path: "/dev", Err: err}
	}
	for name, fd := range clones {
		p := "/dev/" + name
		var err error
		if name == "shm" {
			err = os.Mkdir(p, 0o755)
		} else {
			err = os.WriteFile(p, nil, 0o666)
		}
		if err == nil {
			err = unix.MoveMount(fd, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH)
		}
		if err != nil {
			return &os.PathError{Op: "mount", Path: p, Err: err}
		}
	}
	for name, target := range map[string]string{"stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
		"fd": "/proc/self/fd", "core": "/proc/kcore", "ptmx": "pts/ptmx"} {
		if err := os.Symlink(target, "/dev/"+name); err != nil {
			return err
		}
	}
	if _, ok := clones["shm"]; !ok {
		if err := os.Mkdir("/dev/shm", 0o755); err != nil {
			return err
		}
	}
	if err := os.Mkdir("/dev/pts", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return &os.PathError{Op: "mount devpts", Path: "/dev/pts", Err: err}
	}
	return nil
}

// loopbackUp brings up the loopback interface of this network namespace,
// as bubblewrap does: servers and clients of a test talk over 127.0.0.1.
// Best effort.
func loopbackUp() {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil || unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr) != nil {
		return
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// procMachineWide are the entries of /proc that act on the whole machine,
// which bwrap covers read-only: sysctls (kernel/core_pattern names a
// program the kernel runs as root on the host), sysrq-trigger, irq, bus.
var procMachineWide = [...]string{"sys", "sysrq-trigger", "irq", "bus"}

// procReadOnly makes procMachineWide read-only in this mount namespace,
// whose /proc is a new mount that the read-only host does not cover.
// Landlock refuses writing them anyway; this holds where it is missing.
func procReadOnly() error {
	for _, n := range procMachineWide {
		p := "/proc/" + n
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := readOnlyBind(p); err != nil {
			return fmt.Errorf("making %s read-only: %w", p, err)
		}
	}
	return nil
}

// readOnlyBind makes dir read-only in this mount namespace, with what is
// mounted below it: a bind mount of it onto itself, then read-only.
func readOnlyBind(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return &os.PathError{Op: "mount", Path: dir, Err: err}
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if unix.MountSetattr(unix.AT_FDCWD, dir, unix.AT_RECURSIVE, &attr) == nil {
		return nil
	}
	// Before Linux 5.12: remount the bind itself, keeping the flags that a
	// user namespace may not drop.
	var st unix.Statfs_t
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	if unix.Statfs(dir, &st) == nil {
		flags |= uintptr(st.Flags) & (unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME)
	}
	if err := unix.Mount("", dir, "", flags, ""); err != nil {
		return &os.PathError{Op: "mount", Path: dir, Err: err}
	}
	return nil
}

// copyNamespaces are the ways to give the copy fallback's command a PID
// namespace (and a mount namespace for its /proc), tried in order: as it
// is (with the privilege for it), else in a user namespace that maps the
// caller to itself, so that the command keeps its own uid and gid (owners
// it cannot map read as the overflow id, 65534, inside). The real root is
// read-only in that mount namespace.
func copyNamespaces(realRoot string, writable []string, network, hostRO bool) []nsAttr {
	uid := []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
	gid := []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
	ro := []string{realRoot}
	ns := sandboxNS(network)
	return []nsAttr{
		{Cloneflags: ns, Unshareflags: syscall.CLONE_NEWNS, ReadOnly: ro, HostReadOnly: hostRO, Writable: writable, LoopbackUp: true},
		{Cloneflags: syscall.CLONE_NEWUSER | ns, Unshareflags: syscall.CLONE_NEWNS, UidMappings: uid, GidMappings: gid,
			AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN}, ReadOnly: ro, HostReadOnly: hostRO, Writable: writable, LoopbackUp: true},
	}
}
