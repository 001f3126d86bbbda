package gitdiff

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchFiles writes each (name, old, new) triple under dir/old and
// dir/new and returns the changes, whose Content reads from disk as git
// does.
func benchFiles(b *testing.B, dir string, files map[string][2]string) []Change {
	b.Helper()
	var cs []Change
	for name, sides := range files {
		var fs [2]*File
		for i, s := range []string{"old", "new"} {
			p := filepath.Join(dir, s, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(sides[i]), 0o644); err != nil {
				b.Fatal(err)
			}
			fs[i] = &File{Mode: 0o644, Content: func() ([]byte, error) { return os.ReadFile(p) }}
		}
		cs = append(cs, Change{Path: name, Old: fs[0], New: fs[1]})
	}
	return cs
}

func benchLines(r *rand.Rand, n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("\tline %d: %08x\n", i, r.Uint32())
	}
	return lines
}

func benchEdit(r *rand.Rand, lines []string, k int) string {
	out := append([]string(nil), lines...)
	for e := range k {
		out[r.IntN(len(out))] = fmt.Sprintf("\tedited %d: %08x\n", e, r.Uint32())
	}
	return strings.Join(out, "")
}

// BenchmarkWrite compares Write with `git diff --no-index --binary` on the
// same two trees (git includes its process start, Write reads the files
// and writes the patch to io.Discard); the ratio is cowfs/git.
func BenchmarkWrite(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name  string
		files func() map[string][2]string
	}{
		{"1000files-2000lines-5edits", func() map[string][2]string {
			m := map[string][2]string{}
			for i := range 1000 {
				lines := benchLines(r, 2000)
				m[fmt.Sprintf("d%02d/f%04d.txt", i%20, i)] = [2]string{strings.Join(lines, ""), benchEdit(r, lines, 5)}
			}
			return m
		}},
		{"100000lines-1edit", func() map[string][2]string {
			lines := benchLines(r, 100000)
			return map[string][2]string{"big.txt": {strings.Join(lines, ""), benchEdit(r, lines, 1)}}
		}},
		{"unrelated-30000lines", func() map[string][2]string {
			return map[string][2]string{"u.txt": {strings.Join(benchLines(r, 30000), ""), strings.Join(benchLines(r, 30000), "")}}
		}},
	}
	git, _ := lookGit()
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) { benchPair(b, git, c.files) })
	}
}

func benchPair(b *testing.B, git string, files func() map[string][2]string) {
	dir := b.TempDir()
	benchAgainstGit(b, git, dir, benchFiles(b, dir, files()))
}

// benchAgainstGit runs Write on changes and, as the peer, git diff
// --no-index of dir's old and new trees, which hold the same changes.
func benchAgainstGit(b *testing.B, git, dir string, changes []Change) {
	b.Run("cowfs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := Write(io.Discard, changes); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("git", func(b *testing.B) {
		if git == "" {
			b.Skip("git not found in PATH")
		}
		b.ReportAllocs()
		for b.Loop() {
			out, stderr, err := gitCmd(git, dir, nil, "diff", "--no-index", "--binary", "old", "new")
			if len(out) == 0 || len(stderr) > 0 {
				b.Fatalf("git diff: %v\n%s", err, stderr)
			}
		}
	})
}

// BenchmarkWriteRenames compares Write with `git diff --no-index` (which
// detects renames by default) on 1000 files that moved, each with 5 edited
// lines of 200: half keep their basename (git's basename round), half get
// a new one (the similarity matrix, 500×500). The ratio is cowfs/git.
func BenchmarkWriteRenames(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	dir := b.TempDir()
	var changes []Change
	side := func(tree, name, data string) *File {
		p := filepath.Join(dir, tree, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
		return &File{Mode: 0o644, Content: func() ([]byte, error) { return os.ReadFile(p) }}
	}
	for i := range 1000 {
		lines := benchLines(r, 200)
		from := fmt.Sprintf("src/d%02d/f%04d.txt", i%20, i)
		to := fmt.Sprintf("lib/d%02d/f%04d.txt", i%20, i)
		if i%2 == 1 {
			to = fmt.Sprintf("lib/d%02d/g%04d.txt", i%20, i)
		}
		changes = append(changes,
			Change{Path: from, Old: side("old", from, strings.Join(lines, ""))},
			Change{Path: to, New: side("new", to, benchEdit(r, lines, 5))})
	}
	var buf strings.Builder
	if err := Write(&buf, changes); err != nil {
		b.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\nrename from "); n != 1000 {
		b.Fatalf("%d renames, want 1000", n)
	}
	git, _ := lookGit()
	benchAgainstGit(b, git, dir, changes)
}
