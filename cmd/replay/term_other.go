//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd

package main

import "os"

// isTerminal is false where we cannot tell: progress then comes as plain lines.
func isTerminal(*os.File) bool { return false }
