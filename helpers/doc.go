// Package helpers gives a Go test a hermetic file system in one call, and
// the checks that go with it: golden git patches, golden tapes, assertions
// on what changed, and a chaos mode for order-dependent code.
//
//	func TestGenerate(t *testing.T) {
//		env := helpers.NewTxtar(t, "testdata/project.txtar")
//		if err := generate(env.Fs(), env.Root()); err != nil {
//			t.Fatal(err)
//		}
//		env.GoldenPatch() // compares with testdata/TestGenerate.patch
//	}
//
// [New] overlays a real directory, [NewTxtar] and [NewArchive] a txtar
// fixture extracted into t.TempDir() by [Extract]. The [Env] they return
// has the [afero.Fs] to hand to the code under test ([Env.Fs]), the
// [overlayfs.Fs] behind it ([Env.Overlay]) and the root ([Env.Root]). The
// root is never written. Everything is undone by t.Cleanup; nothing is
// kept in package variables, so tests may run in parallel (except with
// [Chdir], as t.Chdir requires).
//
// # Path names
//
// The code under test uses OS names, as with [afero.OsFs]: absolute
// (see [Env.Path]) or relative to the working directory; [Chdir] starts the
// test in the root. Assertions and goldens use slash paths relative to the
// root, as [overlayfs.Change] does.
//
// # Goldens
//
// Golden files live in the directory of [GoldenDir], "testdata" by
// default, resolved when the Env is made. Their base name is
// [GoldenName](t.Name()): subtest slashes become "__", other bytes outside
// [A-Za-z0-9._-] become "_". [Env.GoldenPatch] compares the layer's git
// patch with <name>.patch; [GoldenTape] and [Online] compare the test's
// tape with <name>.tape, by default in [tape.ModePath]. A mismatch fails
// the test: for a patch, path by path (the paths only one side changes,
// and a diff of each file's content as the golden leaves it against this
// run's); for a tape, with the first divergent record. Setting the
// environment variable COWFS_UPDATE_GOLDEN=1 ([EnvUpdateGolden]) rewrites
// goldens that are missing or differ, and leaves equal ones untouched
// (a tape's header, with its pid and times, does not take part). Beside a
// golden tape it writes <name>.content, the versions (up to
// [EnvTapeContent] bytes each) of the files the tape records, so that a
// later mismatch also prints a text diff of each file whose bytes differ,
// golden against this run (replay diff finds them there too). It is an
// environment variable and not a flag because a custom test flag breaks
// `go test ./...` in every package that does not define it.
//
// # Tapes
//
// When the environment variable COWFS_TAPE_DIR ([tape.EnvDir]) names a
// directory, every Env records the calls made through [Env.Fs] on one tape
// in that directory, so `replay check` can run a test suite twice and
// compare the runs. Names under the root as given to [New] and under
// [Env.Root] (its canonical spelling) are recorded relative to the root,
// in calls and in a command's argv alike. The directory is made absolute
// when the Env is made (a relative one is taken from the package
// directory, go test's working directory for the test) and created if
// missing. The file is named by
// [tape.FileName](package, t.Name()) and created exclusively: an existing
// file is never overwritten, a collision (go test -count=2, two Envs in one
// test, two test names that sanitize alike) adds a numeric suffix,
// "<name>.2.tape", "<name>.3.tape", ..., and a name longer than 240 bytes is
// cut and completed with a hash of the whole name. A test that makes one
// Env writes exactly one tape. The header carries the package import path
// and the full test name, subtests included; the tape is closed, its trailer
// written, in t.Cleanup. Records are written in whole lines from a buffer
// ([tape.WithBuffer] with its defaults): a test killed without its Cleanup
// (go test's -timeout, SIGKILL) leaves a tape lacking at most the records
// of its last 100 ms. [Env.TapeFile] names the file.
//
// Beside the tapes, in <dir>/content ([ContentDir]), the recorder keeps
// every content version of a file read or written of at most 64 KiB
// ([DefaultTapeContent]), named by its BLAKE3 as the tape records it (see
// [tape.WithContent]), so that replay check and replay diff print a text
// diff of a file whose bytes differ between runs. COWFS_TAPE_CONTENT
// ([EnvTapeContent]) sets the bound in bytes; 0 turns capture off.
// replay check also sets COWFS_RUN ([EnvRun]) to the number of the run.
//
// The package import path is taken from the test binary: go test builds it
// with the main-package path "<import path>.test", which
// runtime/debug.ReadBuildInfo reports, whichever function calls New. When
// that is missing (a binary built otherwise, or go test on a list of files,
// "command-line-arguments"), it is the package of the first function on the
// call stack outside this package, from runtime.Callers: the symbol up to
// the first dot after its last slash, linker escapes undone, an external
// test package's "_test" suffix dropped. [Package] sets it explicitly.
//
// # Subprocesses
//
// [Env.Run] runs a command on the test's overlay with [kernel.Run]: a real
// kernel overlay of the root (or a copy of it), confined with Landlock so
// that it writes only there, in a private TMPDIR and to the standard
// devices. What it changed lands in the overlay, and on the tape as one
// command record per changed path (content hash and size, removal, mkdir,
// symlink target, mode, FIFO or socket), tagged with its argv with the
// root replaced by "<root>": `replay check` sees a command whose output
// differs between runs and names the file. Times and owners are not
// recorded. Linux only.
//
// # Failures
//
// When the test has failed by the time its cleanups run, the change list
// and the git patch of the layer are logged, each cut to [LogLimit] bytes,
// and with `go test -artifacts` written whole to t.ArtifactDir() as
// [ArtifactChanges] and [ArtifactPatch].
//
// Assertions ([Env.NoChanges], [Env.Changed], [Env.ChangedPaths],
// [Env.FileContent], [Env.GoldenPatch]) report with t.Errorf and return
// whether they held, so a test can go on or stop as it likes. Setting up
// (a missing or empty root, a bad fixture, an unwritable tape directory)
// is fatal, with a message that names the environment variable a bad
// setting came from.
//
// # testify
//
// The helpers take any testing.TB, so they work with testify's suite:
// make the Env from s.T() in SetupTest or in the test method (not in
// SetupSuite, whose T outlives the methods). The Env then belongs to that
// method: its goldens and tapes are named after "TestSuite/TestMethod",
// its failures are reported on that method, and its assertions return
// bools that combine with testify's (s.True(env.Changed("A out.txt"))).
//
// # Chaos
//
// [Chaos] shuffles the directory listings the code under test reads
// through File.Readdir, Readdirnames and ReadDir of [Env.Fs]: package os
// promises no order, overlayfs sorts, and code that leans on the order
// should fail here rather than on another machine. The order is never the
// sorted one for two entries or more, and is a function of the seed, the
// directory's name and how many times it was listed before. The seed is
// logged; COWFS_CHAOS_SEED ([EnvChaosSeed]) or [ChaosSeed] replays it.
// afero.ReadDir and afero.Walk sort what they read, so code using them is
// not affected. Tapes are recorded below the shuffling and are the same
// with and without it.
//
// # Injected failures
//
// The error paths a test rarely reaches, one line each, as
// [overlayfs.Option]s for [OverlayOptions]: [FailWrite] (the nth write to
// a name fails with EIO), [FailSync] (every fsync of a name fails with
// EIO), [FailRename] (renames onto a name fail with EIO) and
// [DiskFullAfter] (a quota: short writes, then ENOSPC). They combine with
// each other and with [overlayfs.WithFaults]. A failure injected through
// [Env.Fs] is recorded on the test's tape like any outcome.
//
// [AsRootOwner] checks permissions as the owner of the root without
// capabilities ([overlayfs.AsUser]): a test run as root, as in CI, meets
// the EACCES and EPERM a developer's checkout gives.
//
// # Variations
//
// `replay check -vary` sets [EnvVary] and [EnvVarySeed] in the runs it
// perturbs. Every Env then applies those only the helpers can make:
// "listing" shuffles listings as [Chaos] does, "shortread" makes
// File.Read of [Env.Fs] return 1 to 512 bytes (io.Reader allows it; the
// tape records spans and does not change), "rootpath" copies the root
// into a directory of t.TempDir() at another absolute path before
// overlaying it (modes and modification times kept: only the path
// changes). The list and the seed are written in the tape header's
// info ("vary", "vary-seed").
//
// [As] finds an optional method (Lstat, SymlinkIfPossible, a method of
// [overlayfs.Fs]) through the wrappers of [Env.Fs], as errors.As does
// through wrapped errors: each wrapper has Unwrap (or Inner) returning
// what it wraps.
//
// # Concurrency
//
// The file systems of an Env are safe for concurrent use, as
// [overlayfs.Fs] and the tape recorder are. Assertions report to the Env's
// test and follow the rules of testing.TB: call them from the test's
// goroutine. The online check of [Online] reports with t.Errorf from the
// goroutine that made the divergent call.
//
// # Where things live
//
// env.go: [Env] and its constructors; options.go: [Option]s; fixture.go:
// [Extract], a pure fixture parser (parseFixture) and a writer through an
// [os.Root]; assert.go: the assertions on changes and contents;
// golden.go and goldendiff.go: golden patches and how a mismatch is
// explained; goldencontent.go: the file versions kept beside a golden
// tape; record.go: the tape of an Env (files, golden tapes, the
// online check); run.go: [Env.Run] and the command records it puts on
// the tape; report.go: what a failing test logs and the artifacts;
// chaos.go: the listing shuffler and short reads; faults.go: the injected
// failures; vary.go: [EnvVary], the moved root and [As]; pkgpath.go: the
// package path of the
// test; times_*.go: setting a symlink's times per platform; owner_*.go:
// the root's owner, for [AsRootOwner].
package helpers
