package helpers_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
)

// saveConfig is the code under test of the fault examples: it replaces
// name atomically (a temporary file, fsynced, renamed over it) and must
// leave the old file intact, and no temporary file behind, when any step
// fails.
func saveConfig(fsys afero.Fs, name string, data []byte) (err error) {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fsys.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.Rename(tmp, name)
}

const oldConfig = "-- config --\nversion=1\n"

// checkIntact fails the test unless config still holds version=1 and
// nothing else changed.
func checkIntact(t testing.TB, env *helpers.Env, err error) {
	if err == nil {
		t.Fatal("saveConfig reported success")
	}
	env.FileContent("config", "version=1\n")
	env.NoChanges()
	fmt.Println("failed with:", strings.ReplaceAll(err.Error(), env.Root()+"/", ""))
	fmt.Println("old config intact, no temporary file left")
}

func ExampleFailRename() {
	runExample("TestSaveConfigRenameFails", func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(oldConfig)),
			helpers.OverlayOptions(helpers.FailRename("config")))
		checkIntact(t, env, saveConfig(env.Fs(), env.Path("config"), []byte("version=2\n")))
	})
	// Output:
	// failed with: rename config.tmp config: input/output error
	// old config intact, no temporary file left
}

func ExampleFailSync() {
	runExample("TestSaveConfigFsyncFails", func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(oldConfig)),
			helpers.OverlayOptions(helpers.FailSync("config.tmp")))
		checkIntact(t, env, saveConfig(env.Fs(), env.Path("config"), []byte("version=2\n")))
	})
	// Output:
	// failed with: sync config.tmp: input/output error
	// old config intact, no temporary file left
}

func ExampleFailWrite() {
	runExample("TestSaveConfigWriteFails", func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(oldConfig)),
			helpers.OverlayOptions(helpers.FailWrite("config.tmp", 1)))
		checkIntact(t, env, saveConfig(env.Fs(), env.Path("config"), []byte("version=2\n")))
	})
	// Output:
	// failed with: write config.tmp: input/output error
	// old config intact, no temporary file left
}

func ExampleDiskFullAfter() {
	runExample("TestSaveConfigDiskFull", func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(oldConfig)),
			helpers.OverlayOptions(helpers.DiskFullAfter(4096)))
		err := saveConfig(env.Fs(), env.Path("config"), make([]byte, 10000))
		checkIntact(t, env, err)
		fmt.Println("ENOSPC:", errors.Is(err, syscall.ENOSPC))
	})
	// Output:
	// failed with: write config.tmp: no space left on device
	// old config intact, no temporary file left
	// ENOSPC: true
}
