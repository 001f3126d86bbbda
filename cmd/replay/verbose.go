package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"

	"github.com/cowfs/cowfs/tape"
)

// go test -json runs the test binary with -test.v=test2json, so under
// check testing.Verbose() is true in every run. A test that behaves
// differently when verbose (one that skips unless verbose, or logs more
// and trips over it) then fails in every run of check and nowhere else.
// That is a real failure of the test under -v, not a divergence between
// runs, and check must not let it pass for one: it is reported as a FAIL,
// never as DIVERGE (all runs agree), and checkVerbose says why.

// verboseNote is the line added to a test that failed in every run of
// check and passes without -json.
const verboseNote = "passes without -json: check runs go test -json, which makes testing.Verbose() true, and the test fails only when verbose (a failure under -v, not a divergence between runs)"

// maxVerboseReruns bounds the extra go test runs of checkVerbose: a
// broken suite must not cost one more run per failing test.
const maxVerboseReruns = 10

// checkVerbose runs, once each, the tests that failed in every run again
// without -json (go test -count=1 -run '^Name$' PKG), and marks those
// that pass so with verboseNote and the class "verbose-only". It only
// applies when check added -json to a go test command itself, and to the
// first maxVerboseReruns such tests.
func checkVerbose(e *env, vs []*verdict) {
	reruns := 0
	for _, v := range vs {
		if v.kind != "fail" || v.pkg == "" || v.test == "" || strings.Contains(v.test, " #") || reruns == maxVerboseReruns {
			continue
		}
		reruns++
		cmd := exec.CommandContext(e.ctx, "go", "test", "-count=1", "-run", runPattern(v.test), v.pkg)
		// Without COWFS_TAPE_DIR: this run records nothing.
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, tape.EnvDir+"=") })
		if cmd.Run() == nil {
			v.class = "verbose-only"
			v.lines = append(v.lines, verboseNote)
		}
	}
}

// runPattern is the -run pattern that selects exactly the test name
// (subtests included, "TestA/b" as "^TestA$/^b$").
func runPattern(test string) string {
	parts := strings.Split(test, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}
