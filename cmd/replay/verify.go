package main

import (
	"flag"
	"fmt"
)

func cmdVerify() *command {
	return &command{
		name:      "verify",
		usageLine: "verify [-json] TAPE|DIR...",
		short:     "check that tapes are well formed and complete",
		long: `
Verify reads each tape (a directory stands for its *.tape files) and checks
its schema (header, record fields, sequence numbers), its version, and its
trailer: that the trailer exists (a tape without one was cut short), and
that its record count, final-state digest and chain hash match the records.

It prints one line per tape: "ok" with the record count, or "FAIL" with
the reason and the line it was found on.

-json prints one JSON object per tape instead: {"file", "valid", "records",
"truncated", "error"}.

Exit status: 0 when every tape is valid, 1 when one is malformed,
truncated or altered, 2 when one cannot be read, has a newer major version
than this replay understands, or there is nothing to read (no arguments,
or a directory without tapes).
`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			asJSON := fs.Bool("json", false, "print one JSON object per tape")
			return func(e *env, args []string) int { return runVerify(e, args, *asJSON) }
		},
	}
}

// verifyReport is the finding about one tape; also the -json form.
type verifyReport struct {
	File      string `json:"file"`
	Valid     bool   `json:"valid"`
	Records   int    `json:"records"`
	Truncated bool   `json:"truncated,omitempty"`
	Error     string `json:"error,omitempty"`
	note      string
}

func runVerify(e *env, args []string, asJSON bool) int {
	files, err := expandTapes(args)
	if err != nil {
		if len(args) == 0 {
			return e.usageError("verify", "%v", err)
		}
		return e.trouble("verify", err)
	}
	code := exitSame
	for _, file := range files {
		rep := verifyReport{File: file}
		l, err := loadTape(file)
		switch {
		case err != nil && (!isReadError(err) || isVersionError(err)):
			rep.Error = err.Error()
			code = exitTrouble
		case err != nil:
			rep.Error = err.Error()
			code = max(code, exitDiffers)
		case l.t.Truncated:
			rep.Records, rep.Truncated = len(l.t.Records), true
			rep.Error = fmt.Sprintf("%s: truncated: no trailer after %s (the recorder crashed or was never closed)", file, plural(len(l.t.Records), "record"))
			code = max(code, exitDiffers)
		default:
			rep.Valid, rep.Records = true, len(l.t.Records)
			if n := len(l.t.Unknown); n > 0 {
				rep.note = fmt.Sprintf(", %d of a newer minor version (%d.%d) kept unread", n, l.t.Header.Version, l.t.Header.Minor)
			}
		}
		switch {
		case asJSON:
			writeJSON(e.stdout, rep)
		case rep.Valid:
			fmt.Fprintf(e.stdout, "ok  \t%s\t%s%s\n", file, plural(rep.Records, "record"), rep.note)
		default:
			fmt.Fprintf(e.stdout, "FAIL\t%s\n", rep.Error)
		}
	}
	return code
}
