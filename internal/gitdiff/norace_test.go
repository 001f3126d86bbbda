//go:build !race

package gitdiff

const raceEnabled = false
