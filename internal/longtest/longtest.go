// Package longtest tells tests whether to run their long campaigns.
//
// The README's test command (go test -race ./...) runs a short slice of
// every randomized campaign: random differentials, kill and race loops,
// long fuzz seeds. Setting COWFS_LONG=1 runs them at full length; .ci/run
// does so in a separate, bounded step after the README's command.
package longtest

import "os"

// Env is the environment variable that switches the long campaigns on.
const Env = "COWFS_LONG"

// On reports whether COWFS_LONG asks for the long campaigns (any value
// but "", "0" or "false").
func On() bool {
	switch os.Getenv(Env) {
	case "", "0", "false":
		return false
	}
	return true
}

// N returns long when the long campaigns are on, short otherwise.
func N(short, long int) int {
	if On() {
		return long
	}
	return short
}
