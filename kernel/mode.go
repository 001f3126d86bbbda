package kernel

import (
	"fmt"
	"strings"
)

// ModeKind says where [Run] ran a command.
type ModeKind uint8

const (
	// ModeOverlay is a kernel overlay mounted by a process that is root in
	// its user namespace (no new user namespace).
	ModeOverlay ModeKind = iota + 1
	// ModeOverlayUserNS is a kernel overlay mounted in a new user
	// namespace (with userxattr); the command runs as the caller's own
	// uid and gid, in a user namespace nested in that one.
	ModeOverlayUserNS
	// ModeCopy is the copy fallback: the command runs in a temporary copy
	// of the view.
	ModeCopy
)

func (k ModeKind) String() string {
	switch k {
	case ModeOverlay:
		return "kernel overlay as root"
	case ModeOverlayUserNS:
		return "kernel overlay in a user namespace"
	case ModeCopy:
		return "copy of the root"
	}
	return fmt.Sprintf("ModeKind(%d)", uint8(k))
}

// Mode is how [Run] ran a command, as [WithModeReport] receives it.
type Mode struct {
	Kind ModeKind
	// Confined says whether Landlock restricted the command's writes to
	// the root as it sees it, its TMPDIR, the standard character devices
	// and the paths given to [WithWritable].
	Confined bool
	// LandlockABI is the kernel's Landlock ABI version when Confined.
	LandlockABI int
	// Reason says why the command was not confined, when it was not.
	Reason string
	// Root is where the command sees the root: the root itself, or the
	// copy. Dir is its working directory.
	Root, Dir string
	// Fallback says why the kernel overlay was not used, when Run fell
	// back to the copy by itself (not with [WithCopyFallback]): no
	// overlay could be mounted, or, unprivileged, the root is not the
	// caller's.
	Fallback string
	// Missing lists the sandbox's protections this kernel could not give
	// (each with the feature it needs), e.g. "device ioctls only on the
	// standard devices (Landlock ABI 5, Linux 6.10)".
	Missing []string
}

// String describes the mode in one line, e.g. "kernel overlay as root,
// confined (Landlock ABI 7)".
func (m Mode) String() string {
	s := fmt.Sprintf("%s, unconfined (%s)", m.Kind, m.Reason)
	if m.Confined {
		s = fmt.Sprintf("%s, confined (Landlock ABI %d)", m.Kind, m.LandlockABI)
	}
	if len(m.Missing) > 0 {
		s += "; missing: " + strings.Join(m.Missing, ", ")
	}
	if m.Fallback != "" {
		s += "; no overlay: " + m.Fallback
	}
	return s
}
