package helpers

import (
	"github.com/cowfs/cowfs/overlayfs"
	"github.com/cowfs/cowfs/tape"
)

// Environment variables read by the package. None is a test flag: custom
// flags break `go test ./...` in packages that do not define them.
const (
	// EnvUpdateGolden, set to 1 (or true), makes golden patches and golden
	// tapes that differ from the run, or are missing, be rewritten instead
	// of failing the test. 0, false or unset compares.
	EnvUpdateGolden = "COWFS_UPDATE_GOLDEN"

	// EnvChaosSeed, set to a decimal uint64, is the seed [Chaos] uses
	// instead of a random one, to replay a run whose seed was logged.
	// Any other non-empty value is fatal to the test.
	EnvChaosSeed = "COWFS_CHAOS_SEED"

	// EnvTapeContent bounds the content versions kept beside the tapes
	// written to the [tape.EnvDir] directory: every version of a file of
	// at most that many bytes that a test reads or writes is stored,
	// content-addressed, in <dir>/content (see [tape.WithContent]), so that
	// replay check and replay diff can show a text diff of a diverged
	// file. Unset: [DefaultTapeContent]; 0: off; N: at most N bytes.
	EnvTapeContent = "COWFS_TAPE_CONTENT"

	// EnvRun is set by replay check to the number of the run, 1 to N, in
	// the environment of each run of the command. Package helpers does
	// not read it; a test or an example may, to vary on purpose and
	// reproducibly between runs.
	EnvRun = "COWFS_RUN"
)

// DefaultTapeContent is the size bound of content capture when
// [EnvTapeContent] is unset: 64 KiB.
const DefaultTapeContent = 64 << 10

// ContentDir is the name of the directory, inside the [tape.EnvDir]
// directory, where helpers keep content versions. replay finds it there.
const ContentDir = "content"

// LogLimit bounds how many bytes of the change list and of the patch a
// failing test logs. The files written to t.ArtifactDir() are complete.
const LogLimit = 16 << 10

// Option configures [New], [NewTxtar] and [NewArchive].
type Option func(*config)

type config struct {
	overlay    []overlayfs.Option
	chdir      bool
	goldenDir  string
	pkg        string
	goldenTape bool
	online     bool
	tapeMode   tape.Mode
	chaos      bool
	seed       uint64
	seedSet    bool
	artifacts  *bool // nil: as the -test.artifacts flag says
	asOwner    bool  // AsRootOwner
}

// Chdir makes the test run in the root: t.Chdir(root), undone at the end of
// the test. As with t.Chdir, the test must not be parallel. Golden files
// are still found in the directory the test started in.
func Chdir() Option {
	return func(c *config) { c.chdir = true }
}

// OverlayOptions passes options to [overlayfs.New], such as
// [overlayfs.WithUmask] or [overlayfs.DenyOutsideReads].
func OverlayOptions(opts ...overlayfs.Option) Option {
	return func(c *config) { c.overlay = append(c.overlay, opts...) }
}

// AsRootOwner makes [Env.Fs] check every operation as Linux checks it
// for the owner of the root directory (its uid and gid, read when the Env
// is made) without capabilities: [overlayfs.AsUser] of that identity. A
// test run as root, as in a CI container, then meets the EACCES and EPERM
// a developer's own checkout gives: a read-only file or directory, a
// directory it may not search, a chmod of a file it does not own.
func AsRootOwner() Option {
	return func(c *config) { c.asOwner = true }
}

// GoldenDir sets the directory of golden patches and tapes, "testdata" by
// default. A relative dir is resolved when the Env is made, before any
// [Chdir].
func GoldenDir(dir string) Option {
	return func(c *config) { c.goldenDir = dir }
}

// Package sets the Go import path written in tape headers, instead of the
// one derived from the test binary (see the package documentation).
func Package(importPath string) Option {
	return func(c *config) { c.pkg = importPath }
}

// GoldenTape records the test on a tape and, at the end of the test,
// compares it with the golden tape <GoldenDir>/<GoldenName>.tape in
// [tape.ModePath] (see [TapeMode]); with [EnvUpdateGolden] set, the golden
// is written instead when it is missing or differs. It records whether or
// not [tape.EnvDir] is set. The golden is named after the test: give a test
// one Env with a golden tape. Headers (with the volatile facts of the run
// that wrote the golden) take no part in the comparison.
func GoldenTape() Option {
	return func(c *config) { c.goldenTape = true }
}

// Online is [GoldenTape] with the comparison made while the test runs:
// every record is checked against the golden tape as it is made
// ([tape.WithReference]), and the first divergent call fails the test
// there, with the records that differ and the Go stack of the call. Later
// divergences are not reported. The check runs in the goroutine that made
// the call, so it reports with t.Errorf: the test goes on.
func Online() Option {
	return func(c *config) { c.goldenTape, c.online = true, true }
}

// TapeMode sets the mode in which [GoldenTape] and [Online] compare,
// [tape.ModePath] by default.
func TapeMode(m tape.Mode) Option {
	return func(c *config) { c.tapeMode = m }
}

// Chaos shuffles every directory listing the code under test reads through
// [Env.Fs] (File.Readdir, Readdirnames and ReadDir), so that code relying on
// an order the OS does not promise fails. The seed is random unless
// [EnvChaosSeed] is set, and is logged; [ChaosSeed] fixes it in code.
func Chaos() Option {
	return func(c *config) { c.chaos = true }
}

// ChaosSeed is [Chaos] with a fixed seed: the same seed gives the same
// orders for the same sequence of listings.
func ChaosSeed(seed uint64) Option {
	return func(c *config) { c.chaos, c.seed, c.seedSet = true, seed, true }
}
