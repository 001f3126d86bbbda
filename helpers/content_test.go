package helpers_test

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"

	"github.com/cowfs/cowfs/helpers"
	"github.com/cowfs/cowfs/tape"
)

// stored returns the bytes kept under the BLAKE3 of data in the content
// directory beside the tapes in dir, computed here with blake3 itself.
func stored(t *testing.T, dir string, data []byte) ([]byte, error) {
	t.Helper()
	sum := blake3.Sum256(data)
	h := hex.EncodeToString(sum[:])
	return os.ReadFile(filepath.Join(dir, helpers.ContentDir, h[:2], h))
}

// recordWrites runs a fake test that writes each of files through its Env
// while recording in a fresh COWFS_TAPE_DIR, and returns that directory.
func recordWrites(t *testing.T, limit string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv(tape.EnvDir, dir)
	if limit == "unset" {
		os.Unsetenv(helpers.EnvTapeContent)
	} else {
		t.Setenv(helpers.EnvTapeContent, limit)
	}
	newFake(t, "TestWrites").run(func(tb testing.TB) {
		env := helpers.New(tb, tb.TempDir())
		for name, data := range files {
			require.NoError(t, afero.WriteFile(env.Fs(), env.Path(name), []byte(data), 0o644))
		}
	}).wantClean(t)
	return dir
}

func TestTapeContentKeptBesideTapes(t *testing.T) {
	t.Setenv(helpers.EnvTapeContent, "") // restored at the end
	small := "small file\n"
	big := string(make([]byte, helpers.DefaultTapeContent+1))

	dir := recordWrites(t, "unset", map[string]string{"small.txt": small, "big.bin": big})
	got, err := stored(t, dir, []byte(small))
	require.NoError(t, err, "the default keeps a small version")
	assert.Equal(t, small, string(got))
	_, err = stored(t, dir, []byte(big))
	assert.ErrorIs(t, err, os.ErrNotExist, "past 64 KiB nothing is kept")

	dir = recordWrites(t, "0", map[string]string{"small.txt": small})
	_, err = os.Stat(filepath.Join(dir, helpers.ContentDir))
	assert.ErrorIs(t, err, os.ErrNotExist, "COWFS_TAPE_CONTENT=0 turns capture off")

	dir = recordWrites(t, "4", map[string]string{"small.txt": small, "tiny": "abc"})
	_, err = stored(t, dir, []byte(small))
	assert.ErrorIs(t, err, os.ErrNotExist, "COWFS_TAPE_CONTENT=4 keeps nothing larger")
	got, err = stored(t, dir, []byte("abc"))
	require.NoError(t, err)
	assert.Equal(t, "abc", string(got))
}
