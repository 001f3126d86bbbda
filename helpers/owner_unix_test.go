//go:build unix

package helpers_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
)

// TestAsRootOwner checks that AsRootOwner checks as the root's owner: a
// file it made read-only refuses a write (as os does for a process of
// that owner: checked on a real copy when this test is not root), a new
// file is the owner's, and without the option nothing is checked.
func TestAsRootOwner(t *testing.T) {
	noTapes(t)
	env := helpers.NewArchive(t, txtar.Parse([]byte(demo)), helpers.AsRootOwner())
	fi, err := os.Stat(env.Root())
	if err != nil {
		t.Fatal(err)
	}
	owner := fi.Sys().(*syscall.Stat_t)
	notes := env.Path("notes.txt")
	if err := env.Fs().Chmod(notes, 0o444); err != nil {
		t.Fatalf("chmod by the owner: %v", err)
	}
	_, err = env.Fs().OpenFile(notes, os.O_WRONLY, 0)
	if !errors.Is(err, syscall.EACCES) {
		t.Errorf("write to a read-only file: %v, want EACCES", err)
	}
	if os.Geteuid() != 0 {
		// The oracle: os, as this (non-root) owner, on a real copy.
		p := filepath.Join(t.TempDir(), "notes.txt")
		os.WriteFile(p, nil, 0o444)
		if _, oerr := os.OpenFile(p, os.O_WRONLY, 0); !errors.Is(oerr, syscall.EACCES) {
			t.Errorf("os says %v", oerr)
		}
	}
	if err := afero.WriteFile(env.Fs(), env.Path("new"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	nfi, err := env.Fs().Stat(env.Path("new"))
	if err != nil {
		t.Fatal(err)
	}
	if st := nfi.Sys().(*syscall.Stat_t); st.Uid != owner.Uid || st.Gid != owner.Gid {
		t.Errorf("new file owned by %d:%d, want the root's %d:%d", st.Uid, st.Gid, owner.Uid, owner.Gid)
	}

	plain := helpers.NewArchive(t, txtar.Parse([]byte(demo)))
	plain.Fs().Chmod(plain.Path("notes.txt"), 0o444)
	f, err := plain.Fs().OpenFile(plain.Path("notes.txt"), os.O_WRONLY, fs.ModePerm)
	if err != nil {
		t.Fatalf("without AsRootOwner: %v", err)
	}
	f.Close()
}
