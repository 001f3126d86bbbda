package overlayfs_test

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/afero"
)

// TestDifferentialListingEdges pins the edges of the listing and Changes
// fast paths against os on a copy (runScenarios compares every step, the
// final trees and Changes()):
//   - Changes skips the lower below layer directories the lower has no
//     directory at (created, or replacing a file), but not below opaque
//     directories over lower ones, whose children it still compares;
//     names like "x-y" sort between "x" and "x/z";
//   - a handle opened on a lower directory lists from its own descriptor
//     only while the directory is where it was opened.
func TestDifferentialListingEdges(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "changes/created-trees", ops: []op{
			mkdirAll("n/m/o", 0o755), writeFile("n/m/o/f", "f", 0o644), writeFile("n/g", "g", 0o644),
			writeFile("n-x", "x", 0o644), writeFile("n.y", "y", 0o644), mkdir("n/m/p", 0o700),
		}},
		{name: "changes/dir-over-file", ops: []op{
			remove("README.md"), mkdir("README.md", 0o755), mkdirAll("README.md/deep/er", 0o755),
			writeFile("README.md/deep/er/x", "x", 0o644), writeFile("README.md-2", "2", 0o644),
		}},
		{name: "changes/opaque-over-lower-dir", ops: []op{
			removeAll("internal/util"), mkdir("internal/util", 0o755),
			writeFile("internal/util/util.go", "package util\n", 0o644), // may equal the lower's: compared, not assumed added
			writeFile("internal/util/new.go", "package util\n", 0o644),
			mkdirAll("internal/util/deep/nested", 0o755), writeFile("internal/util/deep/nested/leaf.txt", "leaf\n", 0o644),
			writeFile("internal/util-x", "x", 0o644),
		}},
		{name: "changes/opaque-then-created-below", ops: []op{
			removeAll("a"), mkdir("a", 0o755), mkdirAll("a/b/c", 0o755), writeFile("a/b/c/file.txt", "in a/b/c\n", 0o644),
			writeFile("a/b-", "-", 0o644), writeFile("a/b/new", "n", 0o644),
		}},
		{name: "changes/symlinked-dir-path", ops: []op{
			writeFile("link-to-internal/util/added.go", "a", 0o644), mkdir("link-to-internal/zz", 0o755),
			writeFile("link-to-internal/zz/f", "f", 0o644),
		}},
		{name: "handle/renamed-after-open", ops: []op{
			open(0, "internal/util"), rename("internal", "moved"), readdir(0, -1), seek(0, 0, io.SeekStart), readdirnames(0, -1),
		}},
		{name: "handle/changed-after-open", ops: []op{
			open(0, "internal/util"), writeFile("internal/util/zz", "z", 0o644), remove("internal/util/util_test.go"),
			chmod("internal/util/util.go", 0o600), readdir(0, -1),
		}},
		{name: "handle/names-then-entries", ops: []op{
			open(0, "internal/util"), readdirnames(0, 1), readDirH(0, -1),
		}},
		{name: "handle/names-then-infos", ops: []op{
			open(0, "internal/util"), readdirnames(0, 2), chmod("internal/util/util_test.go", 0o640), readdir(0, -1),
		}},
		{name: "handle/removed-after-open", ops: []op{
			open(0, "internal/util/deep/nested"), removeAll("internal/util/deep"), readdir(0, -1), readdirnames(0, 1),
		}},
	})
}

// TestReaddirPagesSeeLayerChanges: Readdir(n) looks each page's entries up
// when it returns them, as os's Readdir lstats them then: an entry removed
// through the Fs after the first page is left out, one chmodded shows its
// new mode, as os shows on a copy where the same was done. The names are
// chosen so that cowfs (sorted) returns them on the later pages.
func TestReaddirPagesSeeLayerChanges(t *testing.T) {
	orig := t.TempDir()
	for _, name := range []string{"a", "b", "c", "d"} {
		if err := os.WriteFile(filepath.Join(orig, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cp := osCopy(t, orig)
	c := newCow(t, orig)
	h, err := c.Open(orig)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	first, err := h.Readdir(1)
	if err != nil || len(first) != 1 || first[0].Name() != "a" {
		t.Fatalf("first page: %v, %v; want [a]", first, err)
	}
	for _, dir := range []string{orig, cp} {
		fsys := map[bool]interface {
			Remove(string) error
			Chmod(string, os.FileMode) error
		}{true: c, false: osTarget{}}[dir == orig]
		if err := fsys.Remove(filepath.Join(dir, "c")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Chmod(filepath.Join(dir, "d"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for {
		fis, err := h.Readdir(1)
		for _, fi := range fis {
			got = append(got, info(fi))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for _, name := range []string{"b", "d"} {
		fi, err := os.Lstat(filepath.Join(cp, name))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, info(fi))
	}
	if !slices.Equal(got, want) {
		t.Errorf("later pages:\n\tgot  %q\n\twant %q", got, want)
	}
}

// TestReaddirLargeMerged: a directory of 3,000 lower names (sharing long
// prefixes, so the sort splits deep) with layer files among them, some
// lower names removed and some replaced, lists exactly what os lists on a
// copy where the same was done, in sorted order, through every listing
// call and page size.
func TestReaddirLargeMerged(t *testing.T) {
	orig := t.TempDir()
	for i := range 3000 {
		name := filepath.Join(orig, fmt.Sprintf("testdata_fixture_%04d.txt", i*7%3000))
		if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			if err := os.Mkdir(filepath.Join(orig, fmt.Sprintf("d%d", i)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	cp := osCopy(t, orig)
	c := newCow(t, orig)
	for _, dir := range []string{orig, cp} {
		var fsys target = osTarget{}
		if dir == orig {
			fsys = c
		}
		for i := 0; i < 3000; i += 97 {
			name := filepath.Join(dir, fmt.Sprintf("testdata_fixture_%04d.txt", i))
			var err error
			switch i % 3 {
			case 0:
				err = fsys.Remove(name)
			case 1:
				err = writeAfero(fsys, name, "replaced")
			default:
				err = writeAfero(fsys, name+".new", "new")
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range []int{-1, 4, 7, 1000} { // at most 1,000 pages: the listing op stops there
		for _, kind := range []string{"Readdir", "Readdirnames", "ReadDir"} {
			list := listCall(kind, 0, n)
			want, got := newEnv(osTarget{}, cp, false), newEnv(c, orig, true)
			for _, e := range []*env{want, got} {
				open(0, "").run(e)
			}
			if w, g := list.run(want), list.run(got); w != g {
				t.Errorf("%s(%d):\n\twant %s\n\tgot  %s", kind, n, abbrev(w), abbrev(g))
			}
			want.closeAll()
			got.closeAll()
		}
	}
}

func writeAfero(fsys target, name, data string) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte(data)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestReaddirOutsideAfterChdir: a directory outside the root, opened by a
// relative name, lists its entries with their infos after the working
// directory changed, page by page and whole, as os's handle does (os
// lstats relative to the open directory, not by the name it was given).
func TestReaddirOutsideAfterChdir(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.MkdirAll(filepath.Join(outside, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "o"), []byte("o"), 0o640); err != nil {
		t.Fatal(err)
	}
	c := newCow(t, t.TempDir())
	for _, n := range []int{2, -1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var got, want []string
			for _, side := range []struct {
				fsys target
				out  *[]string
			}{{osTarget{}, &want}, {c, &got}} {
				t.Chdir(base)
				h, err := side.fsys.Open("outside")
				if err != nil {
					t.Fatal(err)
				}
				t.Chdir(outside + "/sub")
				fis, err := h.Readdir(n)
				if err != nil {
					t.Fatal(err)
				}
				for _, fi := range fis {
					*side.out = append(*side.out, info(fi))
				}
				h.Close()
				slices.Sort(*side.out)
			}
			if !slices.Equal(got, want) {
				t.Errorf("Readdir(%d):\n\tgot  %q\n\twant %q", n, got, want)
			}
		})
	}
}

// oddNames are names a listing must carry byte for byte and sort bytewise:
// control bytes, bytes above 0x7f that are not UTF-8, dots, spaces, the
// longest name Linux allows, and names that are prefixes of others.
var oddNames = []string{
	"\x01", "\x01\x01", "a\x7f", "\x80\xff", "\xc3\xa9t\xc3\xa9", "sp ace", "new\nline", "back\\slash",
	"...", ".hidden", "..x", "-", "a", "a.b", "a-b", strings.Repeat("l", 255), strings.Repeat("l", 254),
	strings.Repeat("m", 254) + "\xff",
}

// TestReaddirOddNamesAndLongListings: lower directories with odd names,
// with names long enough that getdents takes many calls to list them (far
// more than 8 KiB of records), and with nothing at all, list through
// every listing call and page size exactly what os lists on a copy where
// the same layer changes were made.
func TestReaddirOddNamesAndLongListings(t *testing.T) {
	orig := t.TempDir()
	mk := func(rel string) {
		if err := os.MkdirAll(filepath.Join(orig, rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	put := func(rel string) {
		if err := os.WriteFile(filepath.Join(orig, rel), []byte(rel), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("odd")
	for _, n := range oddNames {
		put("odd/" + n)
	}
	mk("odd/dir\x02")
	if err := os.Symlink("\x80\xff", filepath.Join(orig, "odd", "link\xfe")); err != nil {
		t.Fatal(err)
	}
	mk("long")
	for i := range 400 { // 400 records of over 200 bytes: about 90 KiB
		put(fmt.Sprintf("long/%s%04d", strings.Repeat("n", 200), i*13%400))
	}
	mk("empty")
	cp := osCopy(t, orig)
	c := newCow(t, orig)
	for _, dir := range []string{orig, cp} {
		var fsys target = osTarget{}
		if dir == orig {
			fsys = c
		}
		for _, rel := range []string{"odd/\x01 ", "odd/\x7f", "odd/a\x7f", "odd/" + strings.Repeat("l", 253), "empty/new\xff",
			fmt.Sprintf("long/%s%04d.new", strings.Repeat("n", 200), 7)} {
			if err := writeAfero(fsys, filepath.Join(dir, rel), "layer"); err != nil {
				t.Fatal(err)
			}
		}
		for _, rel := range []string{"odd/...", "odd/" + strings.Repeat("l", 255), fmt.Sprintf("long/%s%04d", strings.Repeat("n", 200), 9)} {
			if err := fsys.Remove(filepath.Join(dir, rel)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, sub := range []string{"odd", "long", "empty"} {
		for _, n := range []int{-1, 1, 7, 1000} {
			for _, kind := range []string{"Readdir", "Readdirnames", "ReadDir"} {
				var w, g string
				for _, side := range []struct {
					fsys target
					root string
					out  *string
				}{{osTarget{}, cp, &w}, {c, orig, &g}} {
					h, err := side.fsys.Open(filepath.Join(side.root, sub))
					if err != nil {
						t.Fatal(err)
					}
					names, out := listPages(h, kind, n, side.root)
					h.Close()
					if side.fsys == c && !slices.IsSorted(names) {
						t.Errorf("%s: %s(%d): not sorted: %q", sub, kind, n, names)
					}
					*side.out = out
				}
				if w != g {
					t.Errorf("%s: %s(%d):\n\twant %s\n\tgot  %s", sub, kind, n, w, g)
				}
			}
		}
	}
}

// listPages lists h with the listing call kind in pages of n (once for n
// <= 0) until an error, and once more, and returns the names in the order
// listed and a rendering of the pages' sizes and errors and of the
// entries, sorted by name (os's own order is not).
func listPages(h afero.File, kind string, n int, root string) ([]string, string) {
	type ent struct{ name, s string }
	var ents []ent
	var sizes, errs []string
	last := false
	for i := 0; ; i++ {
		var got []ent
		var err error
		switch kind {
		case "Readdirnames":
			var names []string
			names, err = h.Readdirnames(n)
			for _, name := range names {
				got = append(got, ent{name, fmt.Sprintf("%q", name)})
			}
		case "Readdir":
			var fis []fs.FileInfo
			fis, err = h.Readdir(n)
			for _, fi := range fis {
				got = append(got, ent{fi.Name(), info(fi)})
			}
		default:
			var des []fs.DirEntry
			des, err = h.(fs.ReadDirFile).ReadDir(n)
			for _, de := range des {
				fi, ierr := de.Info()
				got = append(got, ent{de.Name(), fmt.Sprintf("%q type=%v info={%s} %s", de.Name(), de.Type(), info(fi), errClass(ierr))})
			}
		}
		ents = append(ents, got...)
		sizes = append(sizes, strconv.Itoa(len(got)))
		errs = append(errs, describeErr(err, root))
		if last {
			break
		}
		last = err != nil || n <= 0 || i == 1000 // and one call more: the end again

	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.name
	}
	slices.SortFunc(ents, func(a, b ent) int { return strings.Compare(a.name, b.name) })
	var b strings.Builder
	fmt.Fprintf(&b, "chunks=%v errs=%v", sizes, errs)
	for _, e := range ents {
		b.WriteString("\n\t\t" + e.s)
	}
	return names, b.String()
}
