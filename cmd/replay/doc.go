// Replay checks that tests are deterministic, using the tapes that cowfs
// records, and runs commands over a copy-on-write view of a tree.
//
// Add it to a module as a tool (Go 1.24+) and run it with go tool:
//
//	go get -tool github.com/cowfs/cowfs/cmd/replay
//	go tool replay check ./...
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
//	clean    remove what killed runs left behind
//
// "replay help <command>" describes each one.
//
// # Recording
//
// Tests record tapes through package helpers when the environment variable
// COWFS_TAPE_DIR names a directory: one tape per test, named after its
// package and test (see tape.FileName), and the contents of the files it
// read and wrote (up to COWFS_TAPE_CONTENT bytes each, 64 KiB by default)
// in the directory's "content" subdirectory. replay check sets it, once per
// run, to a fresh directory, sets COWFS_RUN to the number of the run, and
// adds -count=1 to GOFLAGS so that the go test cache cannot answer a run
// without running it.
//
// # Comparison
//
// Tapes of two runs are paired by the package and test in their headers
// and compared with tape.Diff (package tape's one comparison engine: diff
// and check only render what it returns) in the mode -order names: path
// (the default), global, set or final. A test is identical when every record
// matches in order, interleaving-only when only the order between
// independent paths differs, and diverged when some path saw different
// operations, outcomes or bytes, when its tape is missing or truncated in
// one run, or when it passed in one run and failed in another. check
// learns each test's outcome by adding -json to a go test command line, or
// by reading test2json events from any other command's output. -json makes
// testing.Verbose() true: a test that fails only when verbose fails in
// every run, which is a FAIL (with a note when it passes without -json),
// never a divergence. A test whose tapes are empty has "no file activity".
//
// A divergence opens with one sentence ("TestX (pkg): out/a.txt was written
// with different bytes in run 2"), then the records around it and a text
// diff of the file versions involved when they were captured (files a
// subprocess wrote included); an order-only difference, of records or of
// a file's lines, is summarized as the same items in their two orders.
//
// # Variations
//
// check -vary perturbs runs 2 to N with a seed (-seed, printed, and
// recorded in each tape's header): test order (go test -shuffle),
// listing order, short reads and the root's absolute path (made by
// package helpers, told through COWFS_VARY and COWFS_VARY_SEED), TZ,
// LANG/LC_ALL, the umask, GOMAXPROCS, HOME and TMPDIR (made by check in
// the command's environment; HOME moves with the go command's caches
// pinned). For each test that diverges, check runs the command again
// without variation and with each variation alone at the diverging run's
// seed, and names the variations that provoke it, with the command line
// that reproduces it. examples/vary holds one test per hazard.
//
// Every command takes tape files and directories (standing for their
// *.tape files) alike, names a test "TestX (pkg)" as go test does, and
// those that report (check, diff, stat, verify) print JSON with -json.
//
// # Exit status
//
// Every command exits 0 when what it compared is the same (or valid), 1
// when it differs (or is invalid), and 2 on trouble: bad usage, a tape
// that cannot be read or has a newer major version, a command that could
// not start, or nothing to read (no tapes given, a directory without
// tapes, a check that produced no tapes at all).
//
// # Where things live
//
// main.go: the command table, help and the env a command may use;
// args.go: tape arguments and the names and lines every command prints;
// tapes.go: loading and pairing tapes; one file per command (check.go,
// with verbose.go for its -v retry, vary.go and umask_*.go for -vary and
// plain.go for its sentences; diff.go; show.go; stat.go; verify.go;
// runcmd.go for run; clean.go); term_*.go: whether stderr is a terminal.
package main
