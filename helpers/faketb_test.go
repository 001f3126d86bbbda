package helpers_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fakeTB is a stand-in testing.TB that records what a helper reports
// instead of failing the real test, so the failure paths can be checked.
// Only the methods package helpers calls are implemented; the embedded nil
// TB makes any other call panic, which shows up as a test failure.
type fakeTB struct {
	testing.TB
	parent testing.TB // when set, its TempDir is used: directories outlive run
	name   string
	out    io.Writer // when set, every message is also printed there (examples)

	mu       sync.Mutex
	errs     []string
	logs     []string
	failed   bool
	fatal    bool
	cleanups []func()
	temps    []string
	artDir   string
}

func newFake(parent testing.TB, name string) *fakeTB { return &fakeTB{parent: parent, name: name} }

// run calls body in a goroutine of its own, so that Fatal can end it with
// runtime.Goexit as testing does, then runs the cleanups, last first.
func (f *fakeTB) run(body func(t testing.TB)) *fakeTB {
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(f)
	}()
	<-done
	for {
		f.mu.Lock()
		if len(f.cleanups) == 0 {
			f.mu.Unlock()
			break
		}
		c := f.cleanups[len(f.cleanups)-1]
		f.cleanups = f.cleanups[:len(f.cleanups)-1]
		f.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			c()
		}()
		<-done
	}
	for _, d := range f.temps {
		os.RemoveAll(d)
	}
	return f
}

func (f *fakeTB) Name() string { return f.name }
func (f *fakeTB) Helper()      {}

// Context is never canceled: the stand-in has no end of its own.
func (f *fakeTB) Context() context.Context { return context.Background() }

func (f *fakeTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *fakeTB) TempDir() string {
	if f.parent != nil {
		return f.parent.TempDir()
	}
	d, err := os.MkdirTemp("", "fake")
	if err != nil {
		panic(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.temps = append(f.temps, d)
	return d
}

func (f *fakeTB) ArtifactDir() string {
	f.mu.Lock()
	if f.artDir != "" {
		defer f.mu.Unlock()
		return f.artDir
	}
	f.mu.Unlock()
	d := f.TempDir()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.artDir = d
	return d
}

func (f *fakeTB) msg(list *[]string, s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*list = append(*list, s)
	if f.out != nil {
		fmt.Fprintln(f.out, s)
	}
}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.msg(&f.errs, fmt.Sprintf(format, args...))
	f.Fail()
}
func (f *fakeTB) Error(args ...any) { f.Errorf("%s", fmt.Sprintln(args...)) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	f.FailNow()
}
func (f *fakeTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprintln(args...)) }
func (f *fakeTB) Logf(format string, args ...any) {
	f.msg(&f.logs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Log(args ...any) { f.Logf("%s", fmt.Sprintln(args...)) }

func (f *fakeTB) Fail() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
}

func (f *fakeTB) FailNow() {
	f.mu.Lock()
	f.failed, f.fatal = true, true
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// Errors returns the error messages, joined by newlines.
func (f *fakeTB) Errors() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.errs, "\n")
}

// Logs returns the log messages, joined by newlines.
func (f *fakeTB) Logs() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.logs, "\n")
}

// wantErrors checks that f reported errors containing each of subs, in
// any message, and failed.
func (f *fakeTB) wantErrors(t *testing.T, subs ...string) {
	t.Helper()
	if !f.Failed() {
		t.Errorf("the fake test did not fail; logs:\n%s", f.Logs())
	}
	errs := f.Errors()
	for _, s := range subs {
		if !strings.Contains(errs, s) {
			t.Errorf("errors lack %q; got:\n%s", s, errs)
		}
	}
}

// wantClean checks that f neither failed nor reported errors.
func (f *fakeTB) wantClean(t *testing.T) {
	t.Helper()
	if f.Failed() || len(f.errs) > 0 {
		t.Errorf("the fake test failed:\n%s\nlogs:\n%s", f.Errors(), f.Logs())
	}
}

// Chdir changes the process's working directory through the parent test,
// which restores it at its end.
func (f *fakeTB) Chdir(dir string) {
	if f.parent == nil {
		panic("fakeTB.Chdir without a parent test")
	}
	f.parent.Chdir(dir)
}
