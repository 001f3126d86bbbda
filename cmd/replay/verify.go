package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
)

func cmdVerify() *command {
	return &command{
		name:      "verify",
		usageLine: "verify TAPE...",
		short:     "check that tapes are well formed and complete",
		long: `
Verify reads each tape and checks its schema (header, record fields,
sequence numbers), its version, and its trailer: that the trailer exists
(a tape without one was cut short), and that its record count, final-state
digest and chain hash match the records.

It prints one line per tape: "ok" with the record count, or "FAIL" with
the reason and the line it was found on.

Exit status: 0 when every tape is valid, 1 when one is malformed,
truncated or altered, 2 when one cannot be read or has a newer major
version than this replay understands.
`,
		flags: func(*flag.FlagSet) func(*env, []string) int { return runVerify },
	}
}

func runVerify(e *env, args []string) int {
	if len(args) == 0 {
		return e.usageError("verify", "no tapes given")
	}
	code := exitSame
	for _, file := range args {
		l, err := loadTape(file)
		switch {
		case errors.Is(err, fs.ErrNotExist) || isVersionError(err):
			fmt.Fprintf(e.stdout, "FAIL\t%v\n", err)
			code = exitTrouble
		case err != nil && !isReadError(err):
			fmt.Fprintf(e.stdout, "FAIL\t%v\n", err)
			code = exitTrouble
		case err != nil:
			fmt.Fprintf(e.stdout, "FAIL\t%v\n", err)
			code = max(code, exitDiffers)
		case l.t.Truncated:
			fmt.Fprintf(e.stdout, "FAIL\t%s: truncated: no trailer after %d records (the recorder crashed or was never closed)\n", file, len(l.t.Records))
			code = max(code, exitDiffers)
		default:
			extra := ""
			if n := len(l.t.Unknown); n > 0 {
				extra = fmt.Sprintf(", %d of a newer minor version (%d.%d) kept unread", n, l.t.Header.Version, l.t.Header.Minor)
			}
			fmt.Fprintf(e.stdout, "ok  \t%s\t%d records%s\n", file, len(l.t.Records), extra)
		}
	}
	return code
}
