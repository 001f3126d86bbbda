package helpers

import (
	"errors"
	"io/fs"
	"path"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// FuzzParseFixture: the fixture parser never panics and touches no file
// system; it refuses with ErrFixture or accepts a fixture whose names are
// local slash paths, given once, none below a symlink, holding every file
// section and one entry per dir and symlink line of the comment (counted
// here from the text). Parsing is deterministic.
func FuzzParseFixture(f *testing.F) {
	f.Add([]byte("prose\nmode bin/run 0755\n-- bin/run --\nx\n-- notes.txt --\nn\n"))
	f.Add([]byte("mode bin 0700\ndir \"e d\" 0750\nsymlink \"a l\" \"../t s\"\nsymlink sub/rel ../n\n-- n --\nn\n-- bin/t --\nt\n"))
	f.Add([]byte("symlink s ..\ndir s/x\n"))
	f.Add([]byte("symlink s x\nmode s 0644\n"))
	f.Add([]byte("dir a\n-- a --\n"))
	f.Add([]byte("mode a 17777\n-- a --\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ar := txtar.Parse(data)
		fx, err := parseFixture(ar)
		again, err2 := parseFixture(ar)
		if !reflect.DeepEqual(fx, again) || (err == nil) != (err2 == nil) {
			t.Fatalf("two parses differ: %v, %v", err, err2)
		}
		if err != nil {
			if !errors.Is(err, ErrFixture) {
				t.Fatalf("refused without ErrFixture: %v", err)
			}
			return
		}
		var dirs, links int
		for line := range strings.Lines(string(ar.Comment)) {
			switch verb, _, _ := strings.Cut(line, " "); verb {
			case "dir":
				dirs++
			case "symlink":
				links++
			}
		}
		if len(fx.files) != len(ar.Files) || len(fx.dirs) != dirs || len(fx.symlinks) != links {
			t.Fatalf("%d files, %d dirs, %d symlinks; the archive has %d, %d, %d",
				len(fx.files), len(fx.dirs), len(fx.symlinks), len(ar.Files), dirs, links)
		}
		isLink := map[string]bool{}
		for _, l := range fx.symlinks {
			isLink[l.name] = true
		}
		seen := map[string]bool{}
		var names []string
		for _, f := range fx.files {
			names = append(names, f.Name)
		}
		names = append(names, fx.dirs...)
		for _, l := range fx.symlinks {
			names = append(names, l.name)
		}
		for _, n := range names {
			if !fs.ValidPath(n) || n == "." || seen[n] {
				t.Fatalf("accepted name %q (valid %v, seen %v)", n, fs.ValidPath(n), seen[n])
			}
			seen[n] = true
			for p := path.Dir(n); p != "."; p = path.Dir(p) {
				if isLink[p] {
					t.Fatalf("accepted %q below the symlink %q", n, p)
				}
			}
		}
		for _, m := range fx.modes {
			if m.perm&^0o7777 != 0 || !fs.ValidPath(m.name) {
				t.Fatalf("accepted mode %q %o", m.name, m.perm)
			}
			for p := m.name; p != "."; p = path.Dir(p) {
				if isLink[p] {
					t.Fatalf("accepted mode %q through the symlink %q", m.name, p)
				}
			}
		}
	})
}
