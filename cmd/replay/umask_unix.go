//go:build unix

package main

import "syscall"

// currentUmask returns the process's umask.
func currentUmask() int {
	old := syscall.Umask(0)
	syscall.Umask(old)
	return old
}

// setUmask sets the process's umask (inherited by the commands it starts)
// and returns the old one.
func setUmask(u int) int { return syscall.Umask(u) }
