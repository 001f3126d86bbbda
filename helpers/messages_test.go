package helpers_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/overlayfs"
	"github.com/cowfs/cowfs/tape"
)

// fatalOf runs body on a fake test and returns the one message it failed
// with.
func fatalOf(t *testing.T, body func(tb testing.TB)) string {
	t.Helper()
	f := newFake(t, "TestMsg").run(body)
	require.True(t, f.fatal, "the set-up did not fail; logs:\n%s", f.Logs())
	return f.Errors()
}

// once reports whether sub occurs exactly once in s.
func once(s, sub string) bool { return strings.Count(s, sub) == 1 }

func TestEmptyRootIsInvalid(t *testing.T) {
	noTapes(t)
	msg := fatalOf(t, func(tb testing.TB) { helpers.New(tb, "") })
	assert.Equal(t, "helpers: overlayfs.New : empty root: invalid argument", msg)

	err := helpers.Extract(txtar.Parse([]byte(demo)), "")
	require.ErrorIs(t, err, fs.ErrInvalid)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
}

func TestMessagesSayThingsOnce(t *testing.T) {
	noTapes(t)
	file := filepath.Join(t.TempDir(), "plain")
	require.NoError(t, os.WriteFile(file, nil, 0o644))

	// A root that is a file: "not a directory" once (os says it).
	msg := fatalOf(t, func(tb testing.TB) { helpers.New(tb, file) })
	assert.True(t, once(msg, "not a directory"), "%s", msg)
	assert.True(t, once(msg, file), "%s", msg)

	// A bad fixture: "fixture" and "helpers" once each.
	msg = fatalOf(t, func(tb testing.TB) {
		helpers.NewArchive(tb, txtar.Parse([]byte("-- ../escape --\nx\n")))
	})
	assert.True(t, once(msg, "helpers"), "%s", msg)
	assert.True(t, once(msg, "fixture"), "%s", msg)
	assert.True(t, strings.HasPrefix(msg, "helpers: bad fixture: "), "%s", msg)
	assert.True(t, errors.Is(helpers.Extract(txtar.Parse([]byte("-- ../escape --\nx\n")), t.TempDir()), helpers.ErrFixture))

	// A missing fixture file: the os error names it; "fixture" once.
	msg = fatalOf(t, func(tb testing.TB) { helpers.NewTxtar(tb, filepath.Join(t.TempDir(), "none.txtar")) })
	assert.True(t, once(msg, "fixture"), "%s", msg)
	assert.True(t, once(msg, "no such file or directory"), "%s", msg)

	// An unusable COWFS_TAPE_DIR is named, with its value.
	bad := filepath.Join(file, "tapes")
	t.Setenv(tape.EnvDir, bad)
	msg = fatalOf(t, func(tb testing.TB) { helpers.New(tb, t.TempDir()) })
	assert.True(t, strings.HasPrefix(msg, "helpers: "+tape.EnvDir+"="+bad+": "), "%s", msg)
	assert.True(t, once(msg, "not a directory"), "%s", msg)

	// And a bad COWFS_CHAOS_SEED, which would otherwise replay another order.
	t.Setenv(tape.EnvDir, "")
	t.Setenv(helpers.EnvChaosSeed, "12x")
	msg = fatalOf(t, func(tb testing.TB) { helpers.New(tb, t.TempDir(), helpers.Chaos()) })
	assert.Equal(t, `helpers: COWFS_CHAOS_SEED="12x": not a seed (want a decimal uint64)`, msg)
	t.Setenv(helpers.EnvChaosSeed, "")

	// So is a bad COWFS_TAPE_CONTENT.
	t.Setenv(tape.EnvDir, t.TempDir())
	t.Setenv(helpers.EnvTapeContent, "lots")
	msg = fatalOf(t, func(tb testing.TB) { helpers.New(tb, t.TempDir()) })
	assert.Equal(t, `helpers: COWFS_TAPE_CONTENT="lots": not a byte count (want 0 to turn capture off, or N > 0)`, msg)
}

// A relative name written from the package directory is outside the root:
// the error says where the name was taken from, the root, and the fix, and
// still matches ErrOutsideRoot and fs.ErrPermission; nothing lands on disk.
func TestRelativeOutsideRootMessage(t *testing.T) {
	env := helpers.New(t, t.TempDir())
	f, err := env.Fs().Create("gen-outside-root.txt")
	if err == nil {
		f.Close()
		t.Fatal("Create of a relative name outside the root succeeded")
	}
	assert.ErrorIs(t, err, overlayfs.ErrOutsideRoot)
	assert.ErrorIs(t, err, fs.ErrPermission)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "gen-outside-root.txt", pe.Path)
	for _, want := range []string{env.Root(), "env.Path(name)", "helpers.Chdir()"} {
		assert.Contains(t, err.Error(), want)
	}
	_, statErr := os.Stat("gen-outside-root.txt")
	assert.ErrorIs(t, statErr, fs.ErrNotExist, "the refused write left a file in the package directory")
	// An absolute name outside keeps the short message.
	_, err = env.Fs().Create(filepath.Join(t.TempDir(), "x"))
	assert.ErrorIs(t, err, overlayfs.ErrOutsideRoot)
	assert.NotContains(t, err.Error(), "helpers.Chdir()")
}
