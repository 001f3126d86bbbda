//go:build linux && !amd64

package kernel

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// legacyChownCalls: this architecture has fchownat and fchown only.
var legacyChownCalls []chownCall

// compatSandboxCalls are the 32-bit arm numbers on arm64 (a compat
// task); none elsewhere.
var compatSandboxCalls = func() sandboxCalls {
	if runtime.GOARCH == "arm64" {
		return sandboxCalls{arch: unix.AUDIT_ARCH_ARM, ioctl: 54, keyctl: 311, addKey: 309, requestKey: 310, socket: 281, ioURing: 425}
	}
	return sandboxCalls{}
}()
