//go:build !unix

package overlayfs

// rootLock is a held commit lock. Without flock (Windows, Plan 9) commits
// are serialized within the process only, by the Fs's own lock.
type rootLock struct{}

func lockRoot(string, bool, bool) (*rootLock, error) { return &rootLock{}, nil }

func (*rootLock) unlock() {}
