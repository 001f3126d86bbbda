//go:build !unix

package main

// currentUmask is -1 where there is no umask: -vary=umask varies nothing.
func currentUmask() int { return -1 }

func setUmask(int) int { return -1 }
