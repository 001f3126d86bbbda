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
// twice is an error, and so is an entry below a symlink of the archive or
// a mode directive on one. The archive is parsed and checked whole before
// anything is written, and the writing goes through an [os.Root] on dir,
// so nothing lands outside dir. Errors about the archive wrap [ErrFixture]; file
// system errors are returned as they are. An empty dir is an error wrapping
// [fs.ErrInvalid], not the working directory.
func Extract(ar *txtar.Archive, dir string) error {
	if dir == "" {
		return &fs.PathError{Op: "extract", Path: dir, Err: fmt.Errorf("empty directory: %w", fs.ErrInvalid)}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fx, err := parseFixture(ar)
	if err != nil {
		return err
	}
	return fx.write(dir)
}

// fixture is an archive parsed and checked: what Extract writes. Every
// name is a local slash path, given once, that does not reach through a
// symlink of the fixture.
type fixture struct {
	files    []txtar.File
	dirs     []string
	symlinks []fixtureLink
	modes    []fixtureMode
}

type fixtureLink struct{ name, target string }

type fixtureMode struct {
	name string
	perm fs.FileMode // octal bits, 07777
}

// parseFixture reads the file sections and directives of ar (see
// Extract) without touching any file system. Its errors wrap ErrFixture.
func parseFixture(ar *txtar.Archive) (*fixture, error) {
	fx := &fixture{files: ar.Files}
	seen := map[string]string{}
	for _, f := range ar.Files {
		if err := claim(seen, f.Name, "file"); err != nil {
			return nil, err
		}
	}
	for line := range strings.Lines(string(ar.Comment)) {
		if err := fx.parseDirective(strings.TrimRight(line, "\r\n"), seen); err != nil {
			return nil, err
		}
	}
	if err := fx.checkSymlinks(); err != nil {
		return nil, err
	}
	return fx, nil
}

// claim records name as an entry of kind what, refusing a name that is
// not a local slash path or is given twice.
func claim(seen map[string]string, name, what string) error {
	if !fs.ValidPath(name) || name == "." {
		return fmt.Errorf("%w: %s %q is not a local slash path", ErrFixture, what, name)
	}
	if prev, ok := seen[name]; ok {
		return fmt.Errorf("%w: %q given twice (%s, %s)", ErrFixture, name, prev, what)
	}
	seen[name] = what
	return nil
}

// parseDirective adds what one comment line says; prose lines add nothing.
func (fx *fixture) parseDirective(line string, seen map[string]string) error {
	verb, rest, _ := strings.Cut(line, " ")
	if verb != "mode" && verb != "dir" && verb != "symlink" {
		return nil
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: directive %q: %s", ErrFixture, line, fmt.Sprintf(format, a...))
	}
	args, err := splitArgs(rest)
	if err != nil {
		return bad("%v", err)
	}
	perm := func(name, s string) error {
		v, err := strconv.ParseUint(s, 8, 32)
		if err != nil || v&^0o7777 != 0 {
			return bad("bad permission %q", s)
		}
		fx.modes = append(fx.modes, fixtureMode{name, fs.FileMode(v)})
		return nil
	}
	switch {
	case verb == "mode" && len(args) == 2:
		if !fs.ValidPath(args[0]) {
			return bad("not a local slash path")
		}
		return perm(args[0], args[1])
	case verb == "dir" && (len(args) == 1 || len(args) == 2):
		if err := claim(seen, args[0], "dir"); err != nil {
			return err
		}
		fx.dirs = append(fx.dirs, args[0])
		if len(args) == 2 {
			return perm(args[0], args[1])
		}
		return nil
	case verb == "symlink" && len(args) == 2:
		if err := claim(seen, args[0], "symlink"); err != nil {
			return err
		}
		fx.symlinks = append(fx.symlinks, fixtureLink{args[0], args[1]})
		return nil
	}
	return bad("wrong number of arguments")
}

// checkSymlinks refuses an entry below a symlink of the fixture, and a
// mode directive on one: making or changing it would follow the link,
// possibly out of the directory.
func (fx *fixture) checkSymlinks() error {
	links := map[string]bool{}
	for _, l := range fx.symlinks {
		links[l.name] = true
	}
	if len(links) == 0 {
		return nil
	}
	through := func(name string, self bool) error {
		for p := name; p != "."; p = path.Dir(p) {
			if links[p] && (self || p != name) {
				return fmt.Errorf("%w: %q reaches through the symlink %q", ErrFixture, name, p)
			}
		}
		return nil
	}
	var errs []error
	for _, f := range fx.files {
		errs = append(errs, through(f.Name, false))
	}
	for _, d := range fx.dirs {
		errs = append(errs, through(d, false))
	}
	for _, l := range fx.symlinks {
		errs = append(errs, through(l.name, false))
	}
	for _, m := range fx.modes {
		errs = append(errs, through(m.name, true))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// write makes the fixture's entries under the directory dir through an
// os.Root, so that nothing lands outside dir whatever dir already holds.
func (fx *fixture) write(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, f := range fx.files {
		if err := root.MkdirAll(path.Dir(f.Name), 0o755); err != nil {
			return err
		}
		if err := root.WriteFile(f.Name, f.Data, 0o644); err != nil {
			return err
		}
	}
	for _, d := range fx.dirs {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, l := range fx.symlinks {
		if err := root.MkdirAll(path.Dir(l.name), 0o755); err != nil {
			return err
		}
		if err := root.Symlink(l.target, l.name); err != nil {
			return err
		}
	}
	if err := fx.setModes(root); err != nil {
		return err
	}
	return setFixtureTimes(root)
}

// setModes gives directories 0755 and files 0644 (the umask may have
// masked MkdirAll and WriteFile), then applies the mode directives.
func (fx *fixture) setModes(root *os.Root) error {
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch d.Type() {
		case fs.ModeDir:
			return root.Chmod(p, 0o755)
		case 0:
			return root.Chmod(p, 0o644)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range fx.modes {
		if err := root.Chmod(m.name, fileMode(m.perm)); err != nil {
			return err
		}
	}
	return nil
}

// setFixtureTimes gives every entry under root fixtureTime, children
// before their directories: creating an entry changes its parent's mtime,
// setting a time does not.
func setFixtureTimes(root *os.Root) error {
	var dirs []string
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			dirs = append(dirs, p)
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			// os.Root has no Lchtimes; WalkDir does not follow links,
			// so the parents of p are directories of the tree.
			return lchtimes(filepath.Join(root.Name(), filepath.FromSlash(p)), true, fixtureTime)
		}
		return root.Chtimes(p, fixtureTime, fixtureTime)
	})
	if err != nil {
		return err
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := root.Chtimes(d, fixtureTime, fixtureTime); err != nil {
			return err
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
