package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// errNothingToRead is wrapped by the error of a command given no tape to
// read: exit status 2, as every trouble.
var errNothingToRead = errors.New("nothing to read")

// expandTapes turns the arguments of a command that reads tapes into tape
// files: a file is itself, a directory is its *.tape files in name order
// (not its subdirectories), as replay check leaves them. A directory
// without tapes is an error wrapping errNothingToRead, and so is an empty
// list. A name that cannot be stat'ed is kept: reading it fails, and the
// command reports that along with the tapes it could read.
func expandTapes(args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no tapes or directories given: %w", errNothingToRead)
	}
	var out []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil || !fi.IsDir() {
			// Reading it reports the error, with the other tapes.
			out = append(out, a)
			continue
		}
		files, err := tapeFiles(a)
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no *.tape files: %w", a, errNothingToRead)
		}
		out = append(out, files...)
	}
	return out, nil
}

// tapeFiles lists the *.tape files of dir, in name order.
func tapeFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".tape") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(out)
	return out, nil
}

// plural is "1 record", "2 records", "0 records".
func plural[N ~int | ~int64](n N, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// testName is how every command names a test in its reports, as go test
// does: "TestX (pkg)"; a tape whose header names no test is named by its
// file.
func testName(pkg, test, file string) string {
	switch {
	case pkg == "" && test == "":
		return filepath.Base(file)
	case pkg == "":
		return test
	case test == "":
		return pkg
	}
	return test + " (" + pkg + ")"
}

// okLine is the line of a test whose tapes are equal, in every command:
// "ok  \tPKG\tTEST\tCLASS", with the file name for a tape that names no
// test.
func okLine(pkg, test, name, class string) string {
	if pkg == "" && test == "" {
		test = name
	}
	return fmt.Sprintf("ok  \t%s\t%s\t%s\n", pkg, test, class)
}
