package tape

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
)

// linkOsFs is afero's OsFs with os.Link: a file system with hard links, the
// oracle for what a link record must describe.
type linkOsFs struct{ afero.OsFs }

func (linkOsFs) Link(oldname, newname string) error { return os.Link(oldname, newname) }

// TestLinkRecord: Link is forwarded and recorded as a link record (old
// name, new name, outcome); its final state makes the two names one entry,
// as os does: a write through one name and the same write through the
// other leave equal final states, which a copy instead of a link does not.
func TestLinkRecord(t *testing.T) {
	record := func(via string, link bool) *Tape {
		root := t.TempDir()
		mustWrite(t, filepath.Join(root, "a"), []byte("alpha"))
		tp, _ := tapeOf(t, linkOsFs{}, root, func(fsys afero.Fs) {
			l := fsys.(interface{ Link(string, string) error })
			if link {
				if err := l.Link(filepath.Join(root, "a"), filepath.Join(root, "b")); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := afero.WriteFile(fsys, filepath.Join(root, "b"), []byte("alpha"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := afero.WriteFile(fsys, filepath.Join(root, via), []byte("new"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := l.Link(filepath.Join(root, "a"), filepath.Join(root, "b")); !errors.Is(err, os.ErrExist) {
				t.Fatalf("second link: %v, want EEXIST", err)
			}
			// The oracle: os says both names hold what was written.
			for _, n := range []string{"a", "b"} {
				if got, _ := os.ReadFile(filepath.Join(root, n)); link && string(got) != "new" {
					t.Fatalf("os: %s holds %q", n, got)
				}
			}
		})
		return tp
	}
	viaA, viaB := record("a", true), record("b", true)
	recs := only(viaA, OpLink, "a")
	if len(recs) != 2 || recs[0].To != "b" || recs[0].Err != "" || recs[1].Err != OutcomeExist {
		t.Fatalf("link records: %+v", recs)
	}
	if d := Compare(viaA, viaB, ModeFinal); d != nil {
		t.Errorf("a write through either name of a link: final states differ: %v", d)
	}
	if d := Compare(viaA, record("b", false), ModeFinal); d == nil {
		t.Errorf("a link and a copy written through the copy: final states equal")
	}
	var noLink afero.Fs = afero.NewMemMapFs()
	rec := NewRecorder(&discard{})
	err := rec.Wrap(noLink, "/").(*Fs).Link("/a", "/b")
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Link on a file system without links: %v", err)
	}
}

type discard struct{}

func (*discard) Write(p []byte) (int, error) { return len(p), nil }
