package helpers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/overlayfs"
)

// Env is the hermetic file system of one test: an overlay of a root
// directory, the file system to hand to the code under test, and the
// assertions and goldens that inspect what that code wrote. It belongs to
// the test given to [New]; its assertions report to that test.
type Env struct {
	t    testing.TB
	cfg  config
	ov   *overlayfs.Fs
	fsys afero.Fs // what the code under test gets: chaos(tape(ov)), as configured
	name string   // the test's name, for golden files
	pkg  string   // the test's package import path
	gold string   // absolute golden directory, fixed before any Chdir
	rec  *recording
	vary variation // what replay check -vary asks of this run (EnvVary)
	// given is the root as given to New (made absolute; the copy's under
	// -vary=rootpath): with Root, a spelling the tape maps to root-relative
	// paths, in names and in a command's argv.
	given string
}

// New returns the hermetic file system of t over the directory root: an
// [overlayfs.Fs] whose reads pass through to root and whose writes stay in
// memory. Everything it sets up is undone by t.Cleanup. A failure to set
// up (root missing, tape directory unwritable) is fatal to t.
//
// When the environment variable [tape.EnvDir] names a directory, the
// overlay is wrapped by a tape recorder and the test writes one tape
// there; see the package documentation.
func New(t testing.TB, root string, opts ...Option) *Env {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	return newEnv(t, root, cfg)
}

// NewTxtar is [New] over a fresh copy of the txtar fixture in file,
// materialized by [Extract] into a directory of t.TempDir(). file is
// resolved against the working directory at the call, typically the
// package directory ("testdata/tree.txtar").
func NewTxtar(t testing.TB, file string, opts ...Option) *Env {
	t.Helper()
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatalf("helpers: fixture: %v", err) // an os error, which names the file
	}
	return NewArchive(t, ar, opts...)
}

// NewArchive is [New] over a fresh copy of the parsed txtar archive ar,
// materialized by [Extract] into a directory of t.TempDir(). It suits
// fixtures written inline in a test with [txtar.Parse].
func NewArchive(t testing.TB, ar *txtar.Archive, opts ...Option) *Env {
	t.Helper()
	dir := t.TempDir()
	if err := Extract(ar, dir); err != nil {
		if errors.Is(err, ErrFixture) {
			t.Fatalf("helpers: %v", err) // says "bad fixture" already
		}
		t.Fatalf("helpers: fixture: %v", err)
	}
	return New(t, dir, opts...)
}

func newEnv(t testing.TB, root string, cfg config) *Env {
	t.Helper()
	vary, err := readVary()
	if err != nil {
		t.Fatalf("helpers: %v", err)
	}
	opts := cfg.overlay
	if cfg.asOwner { // of the root as given, before any relocation
		uid, gid, err := ownerOf(root)
		if err != nil {
			t.Fatalf("helpers: AsRootOwner: %v", err)
		}
		opts = append(opts[:len(opts):len(opts)], overlayfs.AsUser(uid, gid))
	}
	if vary.rootPath {
		if root, err = relocate(t.TempDir(), root, vary.seed); err != nil {
			t.Fatalf("helpers: %v", err)
		}
	}
	ov, err := overlayfs.New(root, opts...)
	if err != nil {
		// overlayfs.New names itself and the root; an empty root fails
		// there too (fs.ErrInvalid), most often an unset variable.
		t.Fatalf("helpers: %v", err)
	}
	e := &Env{t: t, cfg: cfg, ov: ov, fsys: ov, name: t.Name(), vary: vary, given: ov.Root()}
	if abs, err := filepath.Abs(root); err == nil {
		e.given = abs
	}
	e.pkg = cfg.pkg
	if e.pkg == "" {
		e.pkg = testPackage()
	}
	e.gold = cfg.goldenDir
	if e.gold == "" {
		e.gold = "testdata"
	}
	// Golden paths are fixed now: a Chdir below must not move them.
	if e.gold, err = filepath.Abs(e.gold); err != nil {
		t.Fatalf("helpers: golden directory: %v", err)
	}

	if e.rec, err = startRecording(e); err != nil {
		t.Fatalf("helpers: %v", err)
	}
	if e.rec != nil {
		// The root as given: the recorder adds its EvalSymlinks spelling,
		// Root, so names built from either are inside.
		e.fsys = e.rec.wrap(e.fsys, e.given)
	}
	if cfg.chaos || vary.listing || vary.shortRead {
		seed := vary.seed
		if cfg.chaos {
			if seed, err = chaosSeed(cfg); err != nil {
				t.Fatalf("helpers: %v", err)
			}
			t.Logf("helpers: chaos: directory listings shuffled with seed %d (reproduce with %s=%d)", seed, EnvChaosSeed, seed)
		}
		c := newChaosFs(e.fsys, seed, ov, ov.Root(), e.given)
		c.listing, c.shortRead = cfg.chaos || vary.listing, vary.shortRead
		e.fsys = c
	}
	// Registered after the fixture's TempDir (which is removed after this
	// runs) and before the test's own cleanups (which run before it).
	t.Cleanup(e.finish)
	if cfg.chdir {
		t.Chdir(ov.Root())
	}
	return e
}

// Fs returns the file system to hand to the code under test: the overlay,
// wrapped by the tape recorder when recording and by the chaos shuffler
// with [Chaos]. It takes the same names as [afero.OsFs]: absolute paths, or
// paths relative to the working directory.
func (e *Env) Fs() afero.Fs { return e.fsys }

// Overlay returns the overlay itself, for inspection (Changes, WriteDiff,
// IOFS, Snapshot, ...). Calls made on it directly are not recorded on the
// tape and not shuffled.
func (e *Env) Overlay() *overlayfs.Fs { return e.ov }

// Root returns the canonical absolute path of the root (symlinks
// resolved), the directory [Chdir] moves into.
func (e *Env) Root() string { return e.ov.Root() }

// Path returns the absolute name of rel, a slash-separated path relative to
// the root: the name to pass to code under test that wants absolute paths.
func (e *Env) Path(rel string) string {
	return filepath.Join(e.ov.Root(), filepath.FromSlash(rel))
}

// finish runs in t.Cleanup: it closes the tape (checking it against its
// golden), then reports the layer when the test failed.
func (e *Env) finish() {
	e.t.Helper()
	if e.rec != nil {
		e.rec.finish(e)
	}
	if e.t.Failed() {
		e.report()
	}
}

// goldenFile returns the golden file of the test with the given extension.
func (e *Env) goldenFile(ext string) string {
	return filepath.Join(e.gold, GoldenName(e.name)+ext)
}

// logf logs with the package's prefix.
func (e *Env) logf(format string, args ...any) {
	e.t.Helper()
	e.t.Logf("helpers: "+format, args...)
}

// updating reports whether goldens are to be rewritten, from
// [EnvUpdateGolden]. A value that is not a boolean is reported once per
// call site as an error, so a typo does not silently compare.
func (e *Env) updating() bool {
	e.t.Helper()
	v, ok := os.LookupEnv(EnvUpdateGolden)
	if !ok || v == "" {
		return false
	}
	on, err := parseBool(v)
	if err != nil {
		e.t.Errorf("helpers: %s=%q: %v", EnvUpdateGolden, v, err)
		return false
	}
	return on
}

func parseBool(v string) (bool, error) {
	switch v {
	case "1", "t", "T", "true", "TRUE", "True", "y", "yes":
		return true, nil
	case "0", "f", "F", "false", "FALSE", "False", "n", "no":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean (want 1 or 0)")
}
