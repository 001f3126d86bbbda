package gitdiff

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden patches in testdata/golden")

func reg(s string) entry  { return entry{0o644, s} }
func exe(s string) entry  { return entry{0o755, s} }
func link(s string) entry { return entry{fs.ModeSymlink, s} }

var binData = "PNG\x00\x01\x02" + strings.Repeat("\xff\x00binary", 20)

// goldenCases: each is checked against its golden patch, then applied
// with real git apply and git apply -R and with go-gitdiff.
var goldenCases = []struct {
	name     string
	old, new tree
}{
	{"new", tree{}, tree{"dir/new.txt": reg("one\ntwo\n")}},
	{"new-empty", tree{}, tree{"empty": reg("")}},
	{"new-exec", tree{}, tree{"run.sh": exe("#!/bin/sh\necho hi\n")}},
	{"delete", tree{"gone.txt": reg("a\nb\n"), "keep": reg("k\n")}, tree{"keep": reg("k\n")}},
	{"delete-empty", tree{"empty": reg("")}, tree{}},
	{"modify", tree{"f": reg("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n")},
		tree{"f": reg("1\n2\nthree\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\nfifteen\n16\n")}},
	{"modify-two-hunks", tree{"f": reg("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n")},
		tree{"f": reg("one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\neighteen\n")}},
	{"mode", tree{"f": reg("x\n")}, tree{"f": exe("x\n")}},
	{"mode-and-content", tree{"f": exe("x\n")}, tree{"f": reg("y\n")}},
	{"symlink-new", tree{}, tree{"l": link("../target dir/file")}},
	{"symlink-retarget", tree{"l": link("a")}, tree{"l": link("b")}},
	{"symlink-delete", tree{"l": link("a"), "a": reg("a\n")}, tree{"a": reg("a\n")}},
	{"file-to-symlink", tree{"x": reg("data\n")}, tree{"x": link("data")}},
	{"symlink-to-file", tree{"x": link("data")}, tree{"x": exe("data\n")}},
	{"dir-to-file", tree{"P/x": reg("x\n"), "P/y/z": reg("z\n"), "P-1": reg("p\n"), "P.a/b": reg("b\n")},
		tree{"P": reg("now a file\n"), "P-1": reg("p\n"), "P.a/b": reg("b\n")}},
	{"file-to-dir", tree{"P": reg("a file\n"), "P-1": reg("p\n")},
		tree{"P/x": reg("x\n"), "P/y/z": reg("z\n"), "P-1": reg("p\n")}},
	{"dir-to-symlink", tree{"P/x": reg("x\n"), "d/x": reg("dx\n")}, tree{"P": link("d"), "d/x": reg("dx\n")}},
	{"symlink-to-dir", tree{"P": link("d"), "d/x": reg("dx\n")}, tree{"P/x": reg("x\n"), "d/x": reg("dx\n")}},
	{"no-eol-added", tree{"f": reg("a\nb")}, tree{"f": reg("a\nb\n")}},
	{"no-eol-removed", tree{"f": reg("a\nb\n")}, tree{"f": reg("a\nb")}},
	{"no-eol-both", tree{"f": reg("a\nb")}, tree{"f": reg("a\nc")}},
	{"crlf", tree{"f": reg("a\r\nb\r\nc\r\n")}, tree{"f": reg("a\r\nB\r\nc\r\n")}},
	{"cr-only", tree{"f": reg("a\rb\rc\r")}, tree{"f": reg("a\rb\rc\rd")}},
	{"invalid-utf8-long-line", tree{"f": reg("\xff\xfe\n" + strings.Repeat("x", 10000) + "\n")},
		tree{"f": reg("\xff\xfd\n" + strings.Repeat("x", 10000) + "\n")}},
	{"quoted-names", tree{"tab\there": reg("t\n"), `q"uote`: reg("q\n")}, tree{
		"tab\there": reg("T\n"), "sp ace/f g": reg("s\n"), "nl\nname": reg("n\n"), `back\slash`: reg("b\n"),
		"é/ü": reg("u\n"), "\x01ctl\x7f": reg("c\n"),
	}},
	{"binary-new", tree{}, tree{"b.bin": reg(binData)}},
	{"binary-modify", tree{"b.bin": reg(binData)}, tree{"b.bin": exe(binData + "more\x00")}},
	{"binary-delete", tree{"b.bin": reg(binData)}, tree{}},
	{"text-to-binary", tree{"f": reg("text\n")}, tree{"f": reg("bin\x00ary")}},
	{"empty-to-content", tree{"f": reg("")}, tree{"f": reg("a\n")}},
	{"content-to-empty", tree{"f": reg("a\nb\n")}, tree{"f": reg("")}},
	{"patch-like-content", tree{"f": reg("keep\n-- \n--- a/x\n+++ b/x\n@@ -1 +1 @@\ndiff --git a/x b/x\n\\ No newline at end of file\nGIT binary patch\nliteral 0\n\n   \nend\n")},
		tree{"f": reg("keep\n-- \nnew\n--- a/y\n+++ b/x\n@@ -1 +1 @@\n\\ No newline at end of file\ndiff --git a/x b/x\nGIT binary patch\n\n   \n\t\nend")}},
	{"unchanged", tree{"f": reg("same\n"), "l": link("t")}, tree{"f": reg("same\n"), "l": link("t")}},
}

func TestGolden(t *testing.T) {
	git, gitErr := lookGit()
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, changesBetween(tc.old, tc.new, true)); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", tc.name+".patch")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("patch differs from %s:\ngot:\n%s\nwant:\n%s", golden, buf.Bytes(), want)
			}
			got, err := applyGoGitdiff(tc.old, buf.Bytes())
			if err != nil {
				t.Fatalf("go-gitdiff: %v", err)
			}
			if d := treeDiff(tc.new, got); d != "" {
				t.Fatalf("go-gitdiff result:\n%s", d)
			}
			if buf.Len() == 0 {
				if d := treeDiff(tc.old, tc.new); d != "" {
					t.Fatalf("empty patch for a change:\n%s", d)
				}
				return
			}
			if git == "" {
				t.Skipf("git not found in PATH (%v): golden patch not applied with git", gitErr)
			}
			roundTrip(t, git, tc.old, tc.new, buf.Bytes())
		})
	}
}
