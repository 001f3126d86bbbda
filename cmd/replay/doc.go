// Replay checks that tests are deterministic, using the tapes that cowfs
// records, and runs commands over a copy-on-write view of a tree.
//
// Usage:
//
//	replay <command> [arguments]
//
// The commands are:
//
//	check    run tests several times and compare their tapes
//	diff     compare two tapes, or two directories of tapes
//	show     print a tape as a readable listing
//	stat     summarize what tapes recorded
//	verify   check that tapes are well formed and complete
//	run      run a command over a copy-on-write view and list what it wrote
//
// "replay help <command>" describes each one.
//
// # Recording
//
// Tests record tapes through package helpers when the environment variable
// COWFS_TAPE_DIR names a directory: one tape per test, named after its
// package and test (see tape.FileName). replay check sets it, once per
// run, to a fresh directory, and adds -count=1 to GOFLAGS so that the go
// test cache cannot answer a run without running it.
//
// # Comparison
//
// Tapes of two runs are paired by the package and test in their headers
// and compared with tape.Compare in the mode -order names: path (the
// default), global, set or final. A test is identical when every record
// matches in order, interleaving-only when only the order between
// independent paths differs, and diverged when some path saw different
// operations, outcomes or bytes, when its tape is missing or truncated in
// one run, or when it passed in one run and failed in another. check
// learns each test's outcome by adding -json to a go test command line, or
// by reading test2json events from any other command's output.
//
// # Exit status
//
// Every command exits 0 when what it compared is the same (or valid), 1
// when it differs (or is invalid), and 2 on trouble: bad usage, a tape
// that cannot be read or has a newer major version, a command that could
// not start, or a check that produced no tapes at all.
package main
