package helpers_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
)

// FuzzExtract extracts arbitrary archives. Whatever the archive, nothing
// outside the target directory is created or changed; an accepted archive
// leaves every file section on disk with its bytes, and every symlink with
// its target; a refused one says why with ErrFixture or a file system
// error.
func FuzzExtract(f *testing.F) {
	for _, name := range []string{"small", "project", "links"} {
		b, err := os.ReadFile(filepath.Join(treesDir, name+".txtar"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(demo))
	f.Add([]byte("symlink s ..\ndir s/x\n"))
	f.Add([]byte("mode a 4755\ndir \"b c\" 0700\n-- a --\nx\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ar := txtar.Parse(data)
		parent := t.TempDir()
		victim := filepath.Join(parent, "victim")
		if err := os.WriteFile(victim, []byte("v"), 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(parent, "root")
		err := helpers.Extract(ar, dir)
		// Let the cleanup remove whatever modes the archive set.
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
			case d.IsDir():
				os.Chmod(p, 0o755)
			case d.Type() == 0:
				os.Chmod(p, 0o644)
			}
			return nil
		})
		if got := osNames(t, parent); !slices.Equal(got, []string{"root", "victim"}) {
			t.Fatalf("entries next to the root: %q", got)
		}
		if fi, serr := os.Stat(victim); serr != nil || fi.Mode() != 0o600 {
			t.Fatalf("the file next to the root changed: %v %v", fi.Mode(), serr)
		}
		var pe *fs.PathError
		var le *os.LinkError
		if err != nil {
			if !errors.Is(err, helpers.ErrFixture) && !errors.As(err, &pe) && !errors.As(err, &le) {
				t.Fatalf("Extract: %v (%T) is neither ErrFixture nor a file system error", err, err)
			}
			return
		}
		for _, file := range ar.Files {
			got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file.Name)))
			if err != nil || !bytes.Equal(got, file.Data) {
				t.Errorf("%s: %q, %v; want %q", file.Name, got, err, file.Data)
			}
		}
		for line := range strings.Lines(string(ar.Comment)) {
			if verb, _, _ := strings.Cut(line, " "); verb != "symlink" {
				continue
			}
			// The directive was accepted, so its name is a local path;
			// the target must read back verbatim.
			line = strings.TrimRight(line, "\r\n")
			fields := strings.Split(line, " ")
			if len(fields) != 3 || strings.ContainsAny(line, "\"\t") {
				continue // quoted forms and tabs are covered by TestExtract
			}
			target, err := os.Readlink(filepath.Join(dir, filepath.FromSlash(fields[1])))
			if err != nil || target != fields[2] {
				t.Errorf("symlink %s: %q, %v; want %q", fields[1], target, err, fields[2])
			}
		}
	})
}

// FuzzGoldenName: a golden name is one local file name, made of the
// characters the doc promises, and stable for a name that is already one.
func FuzzGoldenName(f *testing.F) {
	for _, s := range []string{"TestX", "TestX/case_#1", "..", "", "a/b/c", "ü/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		g := helpers.GoldenName(name)
		if g == "" || g == "." || g == ".." || !filepath.IsLocal(g+".patch") || strings.ContainsRune(g, '/') {
			t.Fatalf("GoldenName(%q) = %q is not one local file name", name, g)
		}
		for _, c := range []byte(g) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
				t.Fatalf("GoldenName(%q) = %q holds %q", name, g, c)
			}
		}
		if strings.Count(name, "/") > 0 && strings.Count(g, "__") < strings.Count(name, "/") {
			t.Fatalf("GoldenName(%q) = %q lost a subtest separator", name, g)
		}
		if helpers.GoldenName(g) != g {
			t.Fatalf("GoldenName is not idempotent on %q: %q", g, helpers.GoldenName(g))
		}
	})
}

// pathToPrefix is cmd/internal/objabi.PathToPrefix (Go 1.26), which the
// linker applies to a package path in symbol names: the oracle of
// FuzzCallerPackage.
func pathToPrefix(s string) string {
	slash := strings.LastIndex(s, "/")
	n := 0
	for r := 0; r < len(s); r++ {
		if c := s[r]; c <= ' ' || (c == '.' && r > slash) || c == '%' || c == '"' || c >= 0x7F {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789abcdef"
	p := make([]byte, 0, len(s)+2*n)
	for r := 0; r < len(s); r++ {
		if c := s[r]; c <= ' ' || (c == '.' && r > slash) || c == '%' || c == '"' || c >= 0x7F {
			p = append(p, '%', hex[c>>4], hex[c&0xF])
		} else {
			p = append(p, c)
		}
	}
	return string(p)
}

// FuzzCallerPackage: the package path is recovered from any symbol the
// linker would write for a function of that package.
func FuzzCallerPackage(f *testing.F) {
	f.Add("github.com/cowfs/cowfs/helpers_test", "TestX.func1")
	f.Add("gopkg.in/yaml.v3", "(*Decoder).Decode")
	f.Add("example.com/a b/%c", "F[...]")
	f.Add("main", "main")
	f.Fuzz(func(t *testing.T, pkg, fn string) {
		if pkg == "" || fn == "" || strings.Contains(fn, "/") || strings.HasSuffix(pkg, "/") {
			t.Skip()
		}
		sym := pathToPrefix(pkg) + "." + fn
		want := strings.TrimSuffix(pkg, "_test")
		if got := helpers.CallerPackage(sym); got != want {
			t.Fatalf("callerPackage(%q) = %q, want %q", sym, got, want)
		}
	})
}
