package overlayfs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestChtimesAgainstOS compares Chtimes with os.Chtimes on a copy of the
// same tree, name by name, for zero and non-zero times: on Linux a call
// with both times zero (UTIME_OMIT twice) succeeds without looking the
// name up, whatever it names, as the kernel's utimensat does.
func TestChtimesAgainstOS(t *testing.T) {
	orig := origTree(t, "project")
	t1 := time.Unix(1_700_000_000, 0)
	names := []string{
		"", "missing", "missing/x", "README.md", "README.md/x", "internal", "internal/",
		"link-to-readme", "dangling", "../outside-" + t.Name(), "/nonexistent-cowfs/x",
	}
	times := []struct {
		name         string
		atime, mtime time.Time
	}{
		{"both zero", time.Time{}, time.Time{}},
		{"atime only", t1, time.Time{}},
		{"mtime only", time.Time{}, t1},
		{"both", t1, t1},
	}
	for _, tm := range times {
		// One copy per combination: each name's call changes only that
		// name's times, which only that name's check reads.
		osRoot := osCopy(t, orig)
		cowRoot := osCopy(t, orig)
		c := newCow(t, cowRoot)
		for _, name := range names {
			abs := func(root string) string {
				if name == "" || filepath.IsAbs(name) {
					return name
				}
				return filepath.Join(root, name) + map[bool]string{true: "/"}[len(name) > 0 && name[len(name)-1] == '/']
			}
			if strings.HasPrefix(name, "..") && !(tm.atime.IsZero() && tm.mtime.IsZero()) {
				continue // a write outside the root: refused (ErrOutsideRoot), os changes it
			}
			want := describeErr(os.Chtimes(abs(osRoot), tm.atime, tm.mtime), osRoot)
			got := describeErr(c.Chtimes(abs(cowRoot), tm.atime, tm.mtime), cowRoot)
			if got != want {
				t.Errorf("%s: Chtimes(%q) = %s, os says %s", tm.name, name, got, want)
			}
			if got != "nil" {
				continue
			}
			if tm.mtime.IsZero() {
				if cs := c.Changes(); len(cs) != 0 {
					t.Errorf("%s: Chtimes(%q) changed %v", tm.name, name, cs)
				}
				continue
			}
			wfi, werr := os.Stat(abs(osRoot))
			gfi, gerr := c.Stat(abs(cowRoot))
			if werr != nil || gerr != nil || !gfi.ModTime().Equal(wfi.ModTime()) {
				t.Errorf("%s: after Chtimes(%q) mtime %v (%v), os %v (%v)", tm.name, name, gfi, gerr, wfi, werr)
			}
		}
	}
}
