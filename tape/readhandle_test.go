package tape

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/afero"
)

// closeFailFs is a MemMapFs whose handles of names containing "bad-close"
// fail their Close.
type closeFailFs struct{ afero.Fs }

type closeFailFile struct{ afero.File }

var errCloseFail = errors.New("close failed")

func (c closeFailFs) Open(name string) (afero.File, error) {
	f, err := c.Fs.Open(name)
	if err != nil || !strings.Contains(name, "bad-close") {
		return f, err
	}
	return closeFailFile{f}, nil
}

func (f closeFailFile) Close() error {
	f.File.Close()
	return errCloseFail
}

// TestEmitReadMatchesRecord: the records of read-only handles made by
// emitRead, which builds no Record, are byte for byte those of the Record
// path (appendRecord, held to json.Marshal by TestAppendRecordMatchesJSON),
// which the online check of WithReference forces, for handles that take
// the shortcut and handles next to its edge (an empty file, names to
// escape, a failed Close, a rename, a partial or scattered read).
func TestEmitReadMatchesRecord(t *testing.T) {
	mem := afero.NewMemMapFs()
	names := []string{"empty", "a.txt", "q\"uote", "<lt>", "bad\xffname", "d/sub/deep.go", "bad-close", "moved"}
	for i, n := range names {
		if err := afero.WriteFile(mem, "/r/"+n, []byte(strings.Repeat("x", i*100)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fsys := closeFailFs{mem}
	ops := func(w afero.Fs) {
		for _, n := range names {
			afero.ReadFile(w, "/r/"+n)
		}
		f, _ := w.Open("/r/d/sub/deep.go") // WriteFile made the directories
		buf := make([]byte, 10)
		f.Read(buf)
		f.ReadAt(buf, 100)
		f.Close()
		f, _ = w.Open("/r/moved")
		io.ReadAll(f)
		w.Rename("/r/moved", "/r/moved2")
		f.Close()
		f, _ = w.OpenFile("/r/a.txt", os.O_RDONLY|os.O_SYNC, 0)
		io.ReadAll(f)
		f.Close()
		f, _ = w.Open("/r/a.txt")
		io.ReadAll(f)
		f.Close()
		f.Close()                         // a second Close records nothing more
		w.Rename("/r/moved2", "/r/moved") // the same again in the second run
	}
	fast, rawFast := tapeOf(t, fsys, "/r", ops)
	var diverged []*Divergence
	_, rawChecked := tapeOf(t, fsys, "/r", ops, WithReference(fast, func(d *Divergence) { diverged = append(diverged, d) }))
	if len(diverged) > 0 {
		t.Errorf("the checked run diverged from the first: %+v", diverged[0])
	}
	a, b := lines(rawFast), lines(rawChecked)
	if len(a) != len(b) {
		t.Fatalf("%d lines without the online check, %d with it", len(a), len(b))
	}
	opens := 0
	for i := 1; i < len(a)-1; i++ {
		if a[i] != b[i] {
			t.Errorf("line %d:\nemitRead %s\nRecord   %s", i+1, a[i], b[i])
		}
		if strings.Contains(a[i], `"op":"open"`) {
			opens++
		}
	}
	if opens != len(names)+4 {
		t.Errorf("%d open records, want %d:\n%s", opens, len(names)+4, rawFast)
	}
	// What the shortcut must leave to the Record path, checked against
	// what the package doc says each record holds.
	recs := only(fast, OpOpen, "")
	if len(recs) != len(names)+4 {
		t.Fatalf("%d open records read back", len(recs))
	}
	for _, c := range []struct {
		i    int
		want func(Record) bool
		what string
	}{
		{0, func(r Record) bool { return r.RHash == emptyHash && r.RSize == 0 && len(r.Spans) == 0 }, "the empty file's hash, no size, no spans"},
		{2, func(r Record) bool { return r.Path == "q\"uote" && r.RSize == 200 }, "the quoted name"},
		{4, func(r Record) bool { return r.Path == "bad\xffname" && r.RSize == 400 }, "the name that is not UTF-8"},
		{6, func(r Record) bool { return len(r.Fails) == 1 && r.Fails[0] == "close:"+OutcomeOther && r.RSize == 600 }, "the failed Close"},
		{len(names), func(r Record) bool {
			return r.Path == "d/sub/deep.go" && len(r.Spans) == 2 && r.Spans[0] == Span{0, 10} && r.Spans[1] == Span{100, 10} && r.RSize == 500
		}, "the two spans read"},
		{len(names) + 1, func(r Record) bool { return r.Path == "moved" && r.To == "moved2" }, "the rename"},
		{len(names) + 2, func(r Record) bool { return r.Flag == "r|sync" && r.RSize == 100 }, "the flag"},
		{len(names) + 3, func(r Record) bool { return r.Flag == "r" && r.To == "" && len(r.Fails) == 0 && r.RSize == 100 }, "a plain read"},
	} {
		if r := recs[c.i]; !c.want(r) {
			t.Errorf("open record %d: want %s, got %+v", c.i, c.what, r)
		}
	}
}
