package gitdiff

import (
	"bytes"
	"fmt"
	"github.com/cowfs/cowfs/internal/longtest"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lines returns n distinct numbered lines.
func lines(tag string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s line %d of some length\n", tag, i)
	}
	return b.String()
}

// replaceLines replaces k of the lines of s, evenly spread.
func replaceLines(s string, k int) string {
	ls := strings.SplitAfter(s, "\n")
	ls = ls[:len(ls)-1]
	for i := range k {
		j := i * len(ls) / k
		ls[j] = fmt.Sprintf("edited %d\n", j)
	}
	return strings.Join(ls, "")
}

// renameHeaders returns the "from -> to NN%" of each rename in a patch.
func renameHeaders(patch string) []string {
	re := regexp.MustCompile(`(?m)^similarity index (\d+)%\nrename from (.*)\nrename to (.*)$`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(patch, -1) {
		out = append(out, fmt.Sprintf("%s -> %s %s%%", m[2], m[3], m[1]))
	}
	slices.Sort(out)
	return out
}

var renameCases = []struct {
	name     string
	old, new tree
	want     []string // renameHeaders of the patch
}{
	{
		name: "exact",
		old:  tree{"a.txt": reg(lines("a", 10)), "keep": reg("k\n")},
		new:  tree{"b.txt": reg(lines("a", 10)), "keep": reg("k\n")},
		want: []string{"a.txt -> b.txt 100%"},
	},
	{
		name: "exact with mode change",
		old:  tree{"run.sh": reg(lines("s", 5))},
		new:  tree{"bin/run": exe(lines("s", 5))},
		want: []string{"run.sh -> bin/run 100%"},
	},
	{
		name: "edited, above the threshold",
		old:  tree{"old.go": reg(lines("g", 20))},
		new:  tree{"new.go": reg(replaceLines(lines("g", 20), 5))},
		want: []string{"old.go -> new.go 75%"},
	},
	{
		name: "edited, below the threshold",
		old:  tree{"old.go": reg(lines("g", 20))},
		new:  tree{"new.go": reg(replaceLines(lines("g", 20), 12))},
	},
	{
		name: "directory",
		old: tree{
			"pkg/a.go": reg(lines("a", 8)), "pkg/b.go": reg(lines("b", 8)),
			"pkg/sub/c.go": reg(lines("c", 8)), "pkg/link": link("a.go"),
		},
		new: tree{
			"lib/a.go": reg(lines("a", 8)), "lib/b.go": reg(replaceLines(lines("b", 8), 2)),
			"lib/sub/c.go": reg(lines("c", 8)), "lib/link": link("a.go"),
		},
		want: []string{"pkg/a.go -> lib/a.go 100%", "pkg/b.go -> lib/b.go 75%", "pkg/link -> lib/link 100%", "pkg/sub/c.go -> lib/sub/c.go 100%"},
	},
	{
		name: "identical contents pair by basename",
		old:  tree{"x/one": reg("same\n"), "x/two": reg("same\n")},
		new:  tree{"y/two": reg("same\n"), "y/one": reg("same\n")},
		want: []string{"x/one -> y/one 100%", "x/two -> y/two 100%"},
	},
	{
		name: "binary with an edit",
		old:  tree{"img.bin": reg(binData)},
		new:  tree{"img2.bin": reg(binData + "more")},
		want: []string{"img.bin -> img2.bin 75%"},
	},
	{
		name: "file into the place of its directory",
		old:  tree{"d/f": reg(lines("d", 6))},
		new:  tree{"d": reg(lines("d", 6))},
		want: []string{"d/f -> d 100%"},
	},
	{
		name: "names that need quoting",
		old:  tree{"sp ace/é": reg(lines("q", 6))},
		new:  tree{"tab\there/q\"uote": reg(lines("q", 6))},
		want: []string{`"sp ace/\303\251" -> "tab\there/q\"uote" 100%`},
	},
}

// TestRenamesGitApply: each case's patch carries the renames wanted, and
// real git apply turns the old tree into the new one and -R back.
func TestRenamesGitApply(t *testing.T) {
	git := gitPath(t)
	for _, tc := range renameCases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, Write(&buf, changesBetween(tc.old, tc.new, false)))
			assert.Equal(t, tc.want, renameHeaders(buf.String()), "patch:\n%s", buf.String())
			roundTrip(t, git, tc.old, tc.new, buf.Bytes())
		})
	}
}

// TestRenamesLikeGit compares the renames found, and their similarity, with
// git's own rename detection (git diff --no-index, which renames by
// default at 50%) on the same trees on disk.
func TestRenamesLikeGit(t *testing.T) {
	git := gitPath(t)
	for _, tc := range renameCases {
		if strings.ContainsAny(strings.Join(slices.Collect(func(yield func(string) bool) {
			for p := range tc.new {
				yield(p)
			}
		}), ""), "\t\"é") {
			continue // git diff --name-status quotes these differently
		}
		t.Run(tc.name, func(t *testing.T) {
			compareWithGit(t, git, tc.old, tc.new)
		})
	}
	n := longtest.N(60, 200)
	if testing.Short() {
		n = 30
	}
	for i := range n {
		r := rand.New(rand.NewPCG(uint64(i), 16))
		old := tree{}
		for range r.IntN(8) + 2 {
			old.put(simplePath(r), entry{0o644, lines(fmt.Sprint(r.IntN(5)), r.IntN(20)+1)})
		}
		new := old.clone()
		for p, e := range old {
			switch r.IntN(4) {
			case 0: // moved, maybe edited
				delete(new, p)
				if r.IntN(2) == 0 {
					e.data = replaceLines(e.data, r.IntN(8)+1)
				}
				new.put(simplePath(r), e)
			case 1:
				delete(new, p)
			}
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { compareWithGit(t, git, old, new) })
	}
}

func simplePath(r *rand.Rand) string {
	elems := []string{"a", "b", "c", "d.txt", "e.go"}
	p := make([]string, r.IntN(3)+1)
	for i := range p {
		p[i] = elems[r.IntN(len(elems))]
	}
	return strings.Join(p, "/")
}

// compareWithGit writes old and new as two directories and compares
// git's "R<score>" lines with the renames of our patch, then applies the
// patch with git both ways.
func compareWithGit(t *testing.T, git string, old, new tree) {
	t.Helper()
	dir := t.TempDir()
	for name, tr := range map[string]tree{"o": old, "n": new} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, name), 0o755))
		writeTree(t, filepath.Join(dir, name), tr)
	}
	out, stderr, err := gitCmd(git, dir, nil, "diff", "--no-index", "--name-status", "o", "n")
	if err != nil && len(out) == 0 {
		t.Fatalf("git diff: %v\n%s", err, stderr)
	}
	var want []string
	for l := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(l, "\n"), "\t")
		if strings.HasPrefix(f[0], "R") {
			score := strings.TrimLeft(f[0][1:], "0")
			if score == "" {
				score = "0"
			}
			want = append(want, fmt.Sprintf("%s -> %s %s%%", strings.TrimPrefix(f[1], "o/"), strings.TrimPrefix(f[2], "n/"), score))
		}
	}
	slices.Sort(want)
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, changesBetween(old, new, false)))
	assert.Equal(t, want, renameHeaders(buf.String()), "git diff --name-status:\n%s\nour patch:\n%s", out, buf.String())
	if buf.Len() > 0 {
		roundTrip(t, git, old, new, buf.Bytes())
	}
}

// TestSpanHashIgnoresCRBeforeLF: as in git, CRLF text scores as its LF
// form, and binary content keeps its CRs.
func TestSpanHashIgnoresCRBeforeLF(t *testing.T) {
	lf := lines("x", 10)
	crlf := strings.ReplaceAll(lf, "\n", "\r\n")
	assert.Equal(t, spanHash([]byte(lf)), spanHash([]byte(crlf)))
	assert.NotEqual(t, spanHash([]byte("\x00"+lf)), spanHash([]byte("\x00"+crlf)))
}

// FuzzRenameScore: a file deleted and another created, with any two
// contents; whether they pair as a rename, and at which similarity, is
// what git diff --no-index says of the same two files. flags&1 makes the
// new file executable, flags&2 gives it the old basename (git's stricter
// basename round). Starts git per input: CI runs a fixed, small number.
func FuzzRenameScore(f *testing.F) {
	f.Add([]byte(lines("a", 20)), []byte(replaceLines(lines("a", 20), 5)), uint8(0))
	f.Add([]byte(lines("a", 20)), []byte(replaceLines(lines("a", 20), 12)), uint8(2))
	f.Add([]byte("x\r\ny\r\n"), []byte("x\ny\n"), uint8(1))
	f.Add([]byte(binData), []byte(binData+"more"), uint8(0))
	f.Add([]byte("no newline"), []byte("no newline at all"), uint8(2))
	f.Add([]byte(""), []byte(""), uint8(3))
	git, err := lookGit()
	if err != nil {
		f.Skipf("git not found in PATH (%v): renames are compared with git's", err)
	}
	f.Fuzz(func(t *testing.T, a, b []byte, flags uint8) {
		mode, name := fs.FileMode(0o644), "new/other.txt"
		if flags&1 != 0 {
			mode = 0o755
		}
		if flags&2 != 0 {
			name = "new/name.txt"
		}
		compareWithGit(t, git, tree{"old/name.txt": {0o644, string(a)}}, tree{name: {mode, string(b)}})
	})
}
