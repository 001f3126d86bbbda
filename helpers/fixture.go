package helpers

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/tools/txtar"
)

// fixtureTime is the modification time Extract gives every entry, so that
// two extractions of one archive are identical trees.
var fixtureTime = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// ErrFixture is wrapped by the errors of [Extract] about the archive itself:
// a bad directive, a name that is not a local path, an entry given twice.
var ErrFixture = errors.New("bad fixture")

// Extract writes the files of ar into the directory dir, creating dir if
// needed. File sections become regular files of mode 0644 in directories of
// mode 0755 (whatever the umask). Lines of the archive comment starting
// with one of these words are directives, other lines are prose:
//
//	mode PATH PERM        set the permission bits (octal) of a file or directory
//	dir PATH [PERM]       an empty directory (default 0755)
//	symlink PATH TARGET   a symbolic link to TARGET, stored verbatim
//
// A PATH or TARGET holding a space is written as a Go double-quoted string.
// This is the format of the repository's testdata/trees. Every entry gets
// 2024-01-02T03:04:05Z as modification time (symlinks too where the
// platform allows), so two extractions are identical trees.
//
// Names must be local slash paths (no "..", no leading slash); a name given
// twice is an error. Errors about the archive wrap [ErrFixture]; file
// system errors are returned as they are. An empty dir is an error wrapping
// [fs.ErrInvalid], not the working directory.
func Extract(ar *txtar.Archive, dir string) error {
	if dir == "" {
		return &fs.PathError{Op: "extract", Path: dir, Err: fmt.Errorf("empty directory: %w", fs.ErrInvalid)}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	seen := map[string]string{}
	local := func(name, what string) (string, error) {
		if !fs.ValidPath(name) || name == "." {
			return "", fmt.Errorf("%w: %s %q is not a local slash path", ErrFixture, what, name)
		}
		if prev, ok := seen[name]; ok {
			return "", fmt.Errorf("%w: %q given twice (%s, %s)", ErrFixture, name, prev, what)
		}
		seen[name] = what
		if err := noSymlinkIn(dir, path.Dir(name)); err != nil {
			return "", err
		}
		return filepath.Join(dir, filepath.FromSlash(name)), nil
	}
	mkparents := func(p string) error { return os.MkdirAll(filepath.Dir(p), 0o755) }

	for _, f := range ar.Files {
		p, err := local(f.Name, "file")
		if err != nil {
			return err
		}
		if err := mkparents(p); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	type chmod struct {
		name string
		perm fs.FileMode
	}
	var modes []chmod
	for line := range strings.Lines(string(ar.Comment)) {
		line = strings.TrimRight(line, "\r\n")
		verb, rest, _ := strings.Cut(line, " ")
		if verb != "mode" && verb != "dir" && verb != "symlink" {
			continue
		}
		args, err := splitArgs(rest)
		if err != nil {
			return fmt.Errorf("%w: directive %q: %v", ErrFixture, line, err)
		}
		perm := func(s string) (fs.FileMode, error) {
			v, err := strconv.ParseUint(s, 8, 32)
			if err != nil || v&^0o7777 != 0 {
				return 0, fmt.Errorf("%w: directive %q: bad permission %q", ErrFixture, line, s)
			}
			return fs.FileMode(v), nil
		}
		switch {
		case verb == "mode" && len(args) == 2:
			if !fs.ValidPath(args[0]) {
				return fmt.Errorf("%w: directive %q: not a local slash path", ErrFixture, line)
			}
			m, err := perm(args[1])
			if err != nil {
				return err
			}
			modes = append(modes, chmod{args[0], m})
		case verb == "dir" && (len(args) == 1 || len(args) == 2):
			p, err := local(args[0], "dir")
			if err != nil {
				return err
			}
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			if len(args) == 2 {
				m, err := perm(args[1])
				if err != nil {
					return err
				}
				modes = append(modes, chmod{args[0], m})
			}
		case verb == "symlink" && len(args) == 2:
			p, err := local(args[0], "symlink")
			if err != nil {
				return err
			}
			if err := mkparents(p); err != nil {
				return err
			}
			if err := os.Symlink(args[1], p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: directive %q: wrong number of arguments", ErrFixture, line)
		}
	}
	// The umask may have masked MkdirAll and WriteFile: set every mode.
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch d.Type() {
		case fs.ModeDir:
			dirs = append(dirs, p)
			return os.Chmod(p, 0o755)
		case 0:
			return os.Chmod(p, 0o644)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range modes {
		// os.Chmod follows symlinks: a mode directive must not reach
		// through one, out of dir.
		if err := noSymlinkIn(dir, m.name); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(m.name)), fileMode(m.perm)); err != nil {
			return err
		}
	}
	// Times last, children before their directories: creating an entry
	// changes its parent's mtime, setting a time does not.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return lchtimes(p, d.Type()&fs.ModeSymlink != 0, fixtureTime)
	})
	if err != nil {
		return err
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := os.Chtimes(d, fixtureTime, fixtureTime); err != nil {
			return err
		}
	}
	return nil
}

// noSymlinkIn refuses a slash path rel under dir that reaches through a
// symlink made by an earlier directive: creating or changing something
// there would follow it, possibly out of dir. Missing components are fine
// (they are created as directories).
func noSymlinkIn(dir, rel string) error {
	if rel == "." {
		return nil
	}
	for i := 0; i <= len(rel); i++ {
		if i < len(rel) && rel[i] != '/' {
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel[:i])))
		if err != nil {
			return nil
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: %q reaches through the symlink %q", ErrFixture, rel, rel[:i])
		}
	}
	return nil
}

// fileMode turns octal permission bits (07777), setuid, setgid and sticky
// included, into what os.Chmod takes.
func fileMode(v fs.FileMode) fs.FileMode {
	m := v & 0o777
	if v&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// splitArgs splits a directive's arguments on spaces and tabs; an argument
// starting with a double quote is a Go quoted string.
func splitArgs(s string) ([]string, error) {
	var out []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return out, nil
		}
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, err
			}
			u, err := strconv.Unquote(q)
			if err != nil {
				return nil, err
			}
			out = append(out, u)
			s = s[len(q):]
			continue
		}
		i := strings.IndexAny(s, " \t")
		if i < 0 {
			i = len(s)
		}
		out = append(out, s[:i])
		s = s[i:]
	}
}
