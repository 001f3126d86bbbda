package overlayfs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cowfs/cowfs/overlayfs"
)

// TestNewEmptyRoot: "" is not the working directory (an unset variable
// would overlay the package directory) but an invalid argument.
func TestNewEmptyRoot(t *testing.T) {
	f, err := overlayfs.New("")
	assert.Nil(t, f)
	require.ErrorIs(t, err, fs.ErrInvalid)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "overlayfs.New", pe.Op)

	// The same through an extra root.
	_, err = overlayfs.New(t.TempDir(), overlayfs.WithRoot(""))
	require.ErrorIs(t, err, fs.ErrInvalid)
}

// TestNewNotADirectory: the error os would give (ENOTDIR), said once.
func TestNewNotADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "m_test.go")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err := overlayfs.New(file)
	require.ErrorIs(t, err, syscall.ENOTDIR)
	assert.Equal(t, 1, strings.Count(err.Error(), "not a directory"), "%v", err)
	assert.Equal(t, "overlayfs.New "+file+": not a directory", err.Error())
}
