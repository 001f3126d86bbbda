package overlayfs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// bigDirTree is a lower tree with a directory too big to list at the first
// miss in it (big, 600 names: more than one 4 KiB block on ext4, more than
// 4 KiB of size on tmpfs and btrfs) and a small one.
func bigDirTree(t *testing.T) string {
	t.Helper()
	orig := filepath.Join(t.TempDir(), "orig")
	for _, d := range []string{"big", "small"} {
		if err := os.MkdirAll(filepath.Join(orig, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 600 {
		if err := os.WriteFile(filepath.Join(orig, "big", fmt.Sprintf("lower-file-%04d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(orig, "small", fmt.Sprintf("f%d", i)), []byte("y"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(filepath.Join(orig, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() <= 4096 {
		t.Skipf("this file system gives a directory of 600 names the size %d: not a big directory here", fi.Size())
	}
	return orig
}

// TestMissesInBigDirectory: lookups that miss in a big lower directory
// (creations, failed Stats, O_EXCL creations over lower names) agree with
// os on a copy before, at and after the point where the overlay lists the
// directory's names, and in a small one listed at once.
func TestMissesInBigDirectory(t *testing.T) {
	orig := bigDirTree(t)
	var ops []op
	for i := range 40 {
		for _, d := range []string{"big", "small"} {
			ops = append(ops,
				stat(fmt.Sprintf("%s/new-%02d", d, i)),
				writeFile(fmt.Sprintf("%s/new-%02d", d, i), "n", 0o644),
				stat(fmt.Sprintf("%s/new-%02d", d, i)),
				lstat(fmt.Sprintf("%s/lower-file-%04d", d, i*7)),
				openFile(1, fmt.Sprintf("%s/lower-file-%04d", d, i*11), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600),
				closeH(1),
				openFile(1, fmt.Sprintf("%s/f%d", d, i%5), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600),
				closeH(1),
			)
		}
	}
	ops = append(ops, open(2, "big"), readdirnames(2, -1), closeH(2))
	if err := errors.Join(differential(t, orig, ops)...); err != nil {
		t.Fatal(err)
	}
}

// TestManyHandlesFollowRenames keeps several handles open at once (lower
// and layer directories, a lower file) while their directories are
// renamed, filled and removed, and lists and stats through every one of
// them, against os on a copy: each open handle must follow its own
// directory, however many others are open, opened before or after it,
// or closed in between.
func TestManyHandlesFollowRenames(t *testing.T) {
	orig := origTree(t, "project")
	ops := []op{
		mkdir("made", 0o755), writeFile("made/m", "m", 0o644),
		open(0, "a/b"), open(1, "internal"), open(2, "made"), open(3, "cmd/tool"), open(4, "a/b/c/d"),
		open(5, "README.md"), closeH(3), open(3, "empty"),
		rename("a", "a2"), rename("internal", "in2"), rename("made", "made2"), rename("empty", "a2/e2"),
		writeFile("a2/b/new", "n", 0o644), writeFile("in2/new", "n", 0o644), writeFile("made2/new", "n", 0o644),
		writeFile("a2/e2/new", "n", 0o644), writeFile("a2/b/c/d/new", "n", 0o644),
		readdirnames(0, -1), readdirnames(1, -1), readdirnames(2, -1), readdirnames(3, -1), readdirnames(4, -1),
		fstat(0), fstat(1), fstat(2), fstat(3), fstat(4), fstat(5), read(5, 8),
		closeH(1), open(1, "in2/util"), rename("in2", "in3"), rename("a2/b", "b3"),
		seek(0, 0, 0), readdirnames(0, -1), readdirnames(1, -1), seek(4, 0, 0), readdirnames(4, -1),
		removeAll("b3"), removeAll("made2"), fstat(0), fstat(2), fstat(4),
	}
	if err := errors.Join(differential(t, orig, ops)...); err != nil {
		t.Fatal(err)
	}
}
