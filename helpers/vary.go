package helpers

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/tape"
)

// Environment variables set by `replay check -vary` in the runs it
// perturbs. The helpers apply the variations only they can make; the
// others (TZ, LANG, umask, GOMAXPROCS, HOME, TMPDIR, test order) are made
// by replay in the environment of the command.
const (
	// EnvVary is the comma-separated list of the variations of the run.
	// Package helpers applies three of them to every Env: "listing"
	// (directory listings in a seeded order, as [Chaos]), "shortread"
	// (File.Read returns fewer bytes than asked, 1 to 512, as a pipe
	// or a network file system may) and "rootpath" (the root is copied to
	// a directory at another absolute path first). The whole list and the
	// seed are written in the tape header's info ("vary", "vary-seed").
	// Unknown names are ignored: they are replay's to apply.
	EnvVary = "COWFS_VARY"

	// EnvVarySeed is the decimal uint64 seed of the variations of
	// [EnvVary]. A value that is not a seed is fatal to the test.
	EnvVarySeed = "COWFS_VARY_SEED"
)

// variation is what EnvVary and EnvVarySeed ask of the helpers.
type variation struct {
	names     []string
	seed      uint64
	listing   bool
	shortRead bool
	rootPath  bool
}

// readVary reads EnvVary and EnvVarySeed. An unset EnvVary is no
// variation.
func readVary() (variation, error) {
	var v variation
	list := os.Getenv(EnvVary)
	if list == "" {
		return v, nil
	}
	for n := range strings.SplitSeq(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		v.names = append(v.names, n)
		switch n {
		case "listing":
			v.listing = true
		case "shortread":
			v.shortRead = true
		case "rootpath":
			v.rootPath = true
		}
	}
	if s := os.Getenv(EnvVarySeed); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return v, fmt.Errorf("%s=%q: not a seed (want a decimal uint64)", EnvVarySeed, s)
		}
		v.seed = seed
	}
	return v, nil
}

// on reports whether the run varies anything.
func (v variation) on() bool { return len(v.names) > 0 }

// tapeInfo returns the header info recording the variations of the run.
func (v variation) tapeInfo() []tape.Option {
	if !v.on() {
		return nil
	}
	return []tape.Option{
		tape.WithInfo("vary", strings.Join(v.names, ",")),
		tape.WithInfo("vary-seed", strconv.FormatUint(v.seed, 10)),
	}
}

// relocate copies the tree at root into a fresh directory of t's TempDir
// whose absolute path depends on the seed (its depth and names), and
// returns the copy's path: code that writes the root's absolute path into
// its output then writes another one. Only the path changes: modes,
// modification times (access times are set to them), symlinks and empty
// directories are kept; other file types are skipped. Directories
// get their modes and times after their contents are copied, so a
// read-only directory is copied as a non-root user too, and its time is
// not the time its copy was filled.
func relocate(tmp, root string, seed uint64) (string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	dst := tmp
	for i := range 1 + seed%3 {
		dst = filepath.Join(dst, fmt.Sprintf("vary-%d-%d", seed%1000, i))
	}
	dst = filepath.Join(dst, filepath.Base(abs))
	type dirMeta struct {
		path string
		fi   fs.FileInfo
	}
	var dirs []dirMeta // in walk order: parents before children
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(abs, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, dirMeta{to, fi})
			return os.MkdirAll(to, 0o700)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
			return lchtimes(to, true, fi.ModTime())
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, b, 0o600); err != nil {
				return err
			}
			return keepMeta(to, fi)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0 && err == nil; i-- {
		err = keepMeta(dirs[i].path, dirs[i].fi)
	}
	if err != nil {
		return "", fmt.Errorf("vary rootpath: copying the root %s: %w", abs, err)
	}
	return dst, nil
}

// keepMeta gives the copy at p the mode and modification time of fi.
func keepMeta(p string, fi fs.FileInfo) error {
	if err := os.Chmod(p, fi.Mode().Perm()); err != nil {
		return err
	}
	return lchtimes(p, false, fi.ModTime())
}

// As finds in fsys, or in the file systems it wraps, the first one that
// implements T, as errors.As does along a chain of errors: it tries fsys,
// then what its Unwrap() afero.Fs or Inner() afero.Fs method returns, and
// so on. Wrappers of an [overlayfs.Fs] (the tape recorder, the chaos
// shuffler of [Env.Fs]) reach its optional methods this way:
//
//	if l, ok := helpers.As[interface{ Lstat(string) (fs.FileInfo, error) }](env.Fs()); ok {
//		fi, err := l.Lstat(name)
//	}
//
// A method found below a recording wrapper is not recorded on the tape.
func As[T any](fsys afero.Fs) (T, bool) {
	for range 64 { // a cycle of wrappers must not hang
		if t, ok := fsys.(T); ok {
			return t, true
		}
		switch w := fsys.(type) {
		case interface{ Unwrap() afero.Fs }:
			fsys = w.Unwrap()
		case interface{ Inner() afero.Fs }:
			fsys = w.Inner()
		default:
			var zero T
			return zero, false
		}
		if fsys == nil {
			break
		}
	}
	var zero T
	return zero, false
}
