package gitdiff

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
)

func TestWriteInvalidChanges(t *testing.T) {
	f := reg("x\n").file()
	cases := []struct {
		name    string
		changes []Change
	}{
		{"empty path", []Change{{Path: "", New: f}}},
		{"leading slash", []Change{{Path: "/a", New: f}}},
		{"trailing slash", []Change{{Path: "a/", New: f}}},
		{"double slash", []Change{{Path: "a//b", New: f}}},
		{"dot", []Change{{Path: "a/./b", New: f}}},
		{"dotdot", []Change{{Path: "../a", New: f}}},
		{"NUL", []Change{{Path: "a\x00b", New: f}}},
		{"twice", []Change{{Path: "a", New: f}, {Path: "a", Old: f}}},
		{"directory mode", []Change{{Path: "a", New: &File{Mode: fs.ModeDir | 0o755, Content: f.Content}}}},
		{"device mode", []Change{{Path: "a", Old: &File{Mode: fs.ModeDevice, Content: f.Content}}}},
		{"nil content", []Change{{Path: "a", New: &File{Mode: 0o644}}}},
		{"file under new file", []Change{{Path: "P", New: f}, {Path: "P/x", New: f}}},
		{"file under old file", []Change{{Path: "P/x", Old: f}, {Path: "P", Old: f}}},
		{"file under file, siblings between", []Change{{Path: "P", New: f}, {Path: "P-1", New: f}, {Path: "P.a/b", New: f}, {Path: "P/x/y", New: f}}},
	}
	for _, tc := range cases {
		var buf bytes.Buffer
		err := Write(&buf, tc.changes)
		if !errors.Is(err, ErrInvalidChange) {
			t.Errorf("%s: err = %v, want ErrInvalidChange", tc.name, err)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: wrote %q before failing validation", tc.name, buf.Bytes())
		}
	}
	// Siblings that only share a prefix are not a contradiction.
	ok := []Change{{Path: "P", New: f}, {Path: "P-1/x", New: f}, {Path: "P.x", New: f}, {Path: "Pa/b", New: f}}
	if err := Write(io.Discard, ok); err != nil {
		t.Errorf("prefix siblings: %v", err)
	}
}

// TestContentLazyOnce: each Content is called once, change by change, so
// a failing Content stops Write before later files are read.
func TestContentLazyOnce(t *testing.T) {
	calls := map[string]int{}
	boom := errors.New("boom")
	file := func(name string, err error) *File {
		return &File{Mode: 0o644, Content: func() ([]byte, error) {
			calls[name]++
			return []byte(name + "\n"), err
		}}
	}
	changes := []Change{
		{Path: "c", Old: file("c-old", nil), New: file("c-new", nil)},
		{Path: "b", New: file("b", boom)},
		{Path: "a", Old: file("a", nil)},
	}
	err := Write(io.Discard, changes)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("err = %v, want it to wrap boom and name \"b\"", err)
	}
	want := map[string]int{"a": 1, "b": 1}
	if len(calls) != len(want) || calls["a"] != 1 || calls["b"] != 1 {
		t.Fatalf("Content calls = %v, want %v (c comes after the failure)", calls, want)
	}
	clear(calls)
	changes[1].New = file("b", nil)
	if err := Write(io.Discard, changes); err != nil {
		t.Fatal(err)
	}
	for name, n := range calls {
		if n != 1 {
			t.Errorf("Content of %s called %d times", name, n)
		}
	}
	if len(calls) != 4 {
		t.Errorf("Content calls = %v, want all four sides once", calls)
	}
}

type failWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n <= 0 {
		return 0, errDiskFull
	}
	w.n--
	return len(p), nil
}

func TestWriterError(t *testing.T) {
	var changes []Change
	for i := range 100 {
		changes = append(changes, Change{Path: strings.Repeat("d/", i) + "f", New: reg(strings.Repeat("line\n", 5000)).file()})
	}
	read := 0
	for i := range changes {
		c := changes[i].New.Content
		changes[i].New.Content = func() ([]byte, error) { read++; return c() }
	}
	err := Write(&failWriter{n: 1}, changes)
	if !errors.Is(err, errDiskFull) {
		t.Fatalf("err = %v, want errDiskFull", err)
	}
	if read == len(changes) {
		t.Errorf("Write read every file after the writer failed")
	}
}
