package helpers

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// testPackage returns the import path of the package whose tests are
// running. A test binary built by go test has the main-package path
// "<import path>.test" in its build information, which names the package
// whatever the function calling New is (a shared helper, a closure, an
// external _test package). Without it (a binary built otherwise, or
// go test on files: "command-line-arguments") the first caller outside this
// package is asked instead, see callerPackage.
func testPackage() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if p, ok := strings.CutSuffix(bi.Path, ".test"); ok && p != "" && p != "command-line-arguments" {
			return p
		}
	}
	pcs := make([]uintptr, 32)
	n := runtime.Callers(1, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	first, _ := frames.Next()
	self := callerPackage(first.Function)
	for {
		f, more := frames.Next()
		if p := callerPackage(f.Function); p != self && p != "" {
			return p
		}
		if !more {
			return ""
		}
	}
}

// callerPackage returns the import path of the package of a function
// symbol such as "example.com/m/pkg_test.TestX.func1" or
// "example.com/m/pkg.(*T).M[...]": the text up to the first dot after the
// last slash, with the linker's %xx escapes (a dot in the last element is
// "%2e") undone and the "_test" suffix of an external test package
// dropped, giving "example.com/m/pkg".
func callerPackage(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	dot := strings.IndexByte(fn[slash+1:], '.')
	if dot < 0 {
		return ""
	}
	p := unescapeSymbol(fn[:slash+1+dot])
	return strings.TrimSuffix(p, "_test")
}

// unescapeSymbol undoes cmd/internal/objabi.PathToPrefix, which writes
// control bytes, space, '%', '"', DEL, non-ASCII bytes, and dots in the last
// element as %xx.
func unescapeSymbol(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
