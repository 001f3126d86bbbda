package overlayfs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/afero"
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

// TestUmaskAtFirstCreation: New does not read the umask; the Fs reads it
// when it first creates something, as os reads it at a creation, and
// keeps it for itself, its forks and its extra roots. The modes are
// checked against files os creates under the same umask.
func TestUmaskAtFirstCreation(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no umask")
	}
	root, extra, osDir := t.TempDir(), t.TempDir(), t.TempDir()
	old := setUmask(0o077)
	defer setUmask(old)
	c := newCow(t, root, overlayfs.WithRoot(extra))
	fork := c.Fork() // before any creation: shares the umask read later

	setUmask(0o022)
	osMode := func(name string, dir bool) fs.FileMode {
		p := filepath.Join(osDir, name)
		if dir {
			require.NoError(t, os.Mkdir(p, 0o777))
		} else {
			require.NoError(t, os.WriteFile(p, nil, 0o666))
		}
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		return fi.Mode()
	}
	cowMode := func(fsys *overlayfs.Fs, p string, dir bool) fs.FileMode {
		if dir {
			require.NoError(t, fsys.Mkdir(p, 0o777))
		} else {
			require.NoError(t, afero.WriteFile(fsys, p, nil, 0o666))
		}
		fi, err := fsys.Lstat(p)
		require.NoError(t, err)
		return fi.Mode()
	}
	assert.Equal(t, osMode("f", false), cowMode(c, filepath.Join(root, "f"), false), "file")
	assert.Equal(t, osMode("d", true), cowMode(c, filepath.Join(root, "d"), true), "directory")

	// Read once: a later change of the process umask is not seen by c, its
	// fork or its extra root (WithUmask is the way to change it).
	setUmask(0o077)
	want := fs.FileMode(0o644)
	assert.Equal(t, want, cowMode(c, filepath.Join(root, "g"), false), "after the umask changed")
	assert.Equal(t, want, cowMode(fork, filepath.Join(root, "g"), false), "fork")
	assert.Equal(t, want, cowMode(c, filepath.Join(extra, "g"), false), "extra root")
	assert.Equal(t, want, cowMode(c.Fork(), filepath.Join(root, "h"), false), "later fork")

	// WithUmask wins.
	w := newCow(t, root, overlayfs.WithUmask(0o002))
	assert.Equal(t, fs.FileMode(0o664), cowMode(w, filepath.Join(root, "f"), false), "WithUmask")

	// Created files are owned by the process, as os gives them.
	if fi, err := c.Lstat(filepath.Join(root, "f")); assert.NoError(t, err) {
		ofi, err := os.Lstat(filepath.Join(osDir, "f"))
		require.NoError(t, err)
		u, g, ok := sysOwner(fi)
		ou, og, _ := sysOwner(ofi)
		assert.True(t, ok)
		assert.Equal(t, [2]uint32{ou, og}, [2]uint32{u, g}, "owner")
	}
}

// TestNewRootForms: New canonicalizes the root as filepath.EvalSymlinks
// does, and fails as os.Stat of it fails, whether or not the path holds a
// symlink (New skips the per-component lstats only when none does).
func TestNewRootForms(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "dir")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(base, "file"), nil, 0o644))
	for link, target := range map[string]string{"link": "dir", "flink": "file", "dangling": "missing", "loop": "loop"} {
		require.NoError(t, os.Symlink(target, filepath.Join(base, link)))
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	rel, err := filepath.Rel(wd, dir)
	require.NoError(t, err)
	for _, root := range []string{
		dir, dir + "/", dir + "//sub/..", dir + "/./sub", rel, rel + "/sub/..",
		filepath.Join(base, "link"), filepath.Join(base, "link", "sub"), base + "/link/sub/../sub",
		filepath.Join(base, "file"), filepath.Join(base, "flink"), filepath.Join(base, "missing"),
		filepath.Join(base, "dangling"), filepath.Join(base, "loop"), filepath.Join(base, "file", "x"),
		filepath.Join(base, "missing", ".."),
	} {
		c, err := overlayfs.New(root)
		fi, statErr := os.Stat(root)
		switch {
		case statErr != nil:
			if assert.Error(t, err, "New(%q)", root) {
				assert.Equal(t, errClass(statErr), errClass(err), "New(%q) = %v; os.Stat says %v", root, err, statErr)
			}
		case !fi.IsDir():
			assert.ErrorIs(t, err, syscall.ENOTDIR, "New(%q)", root)
		default:
			require.NoError(t, err, "New(%q)", root)
			abs, _ := filepath.Abs(root)
			want, _ := filepath.EvalSymlinks(abs)
			assert.Equal(t, want, c.Root(), "New(%q).Root()", root)
		}
	}
}
