package gitdiff

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"testing"
)

// streamed returns a File of data that Write reads through Open, and
// counts the calls of Content.
func streamed(data []byte, mode fs.FileMode, contentCalls *int) *File {
	return &File{
		Mode: mode,
		Content: func() ([]byte, error) {
			*contentCalls++
			return data, nil
		},
		Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		Size: int64(len(data)),
	}
}

func loaded(data []byte, mode fs.FileMode) *File {
	return &File{Mode: mode, Content: func() ([]byte, error) { return data, nil }}
}

// TestStreamedMatchesLoaded: big binary files given with Open give the
// very patch they give loaded whole (created, deleted, modified, renamed
// exactly, mode changed only, unchanged), without a call of Content; a big
// text file is loaded and diffed by lines as before.
func TestStreamedMatchesLoaded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bin := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
	a, b := bin(streamMin+777), bin(2*streamMin+5)
	sparse := make([]byte, 3*streamMin)
	copy(sparse[streamMin:], "data")
	text := bytes.Repeat([]byte("line of text\n"), streamMin/10)
	text2 := append(bytes.Clone(text), "one more\n"...)
	cases := map[string][]struct {
		path     string
		old, new []byte
		om, nm   fs.FileMode
	}{
		"create and delete": {{"new", nil, a, 0, 0o644}, {"old", b, nil, 0o755, 0}},
		"modify":            {{"f", a, b, 0o644, 0o644}, {"s", sparse, append(bytes.Clone(sparse), 1), 0o644, 0o644}},
		"exact rename":      {{"from", b, nil, 0o644, 0}, {"to", nil, b, 0, 0o644}},
		"mode only":         {{"x", sparse, sparse, 0o644, 0o755}},
		"unchanged":         {{"u", a, a, 0o644, 0o644}},
		"text":              {{"t", text, text2, 0o644, 0o644}},
	}
	for name, cs := range cases {
		var want, got bytes.Buffer
		var wantCh, gotCh []Change
		calls := 0
		for _, c := range cs {
			w, g := Change{Path: c.path}, Change{Path: c.path}
			if c.old != nil {
				w.Old, g.Old = loaded(c.old, c.om), streamed(c.old, c.om, &calls)
			}
			if c.new != nil {
				w.New, g.New = loaded(c.new, c.nm), streamed(c.new, c.nm, &calls)
			}
			wantCh, gotCh = append(wantCh, w), append(gotCh, g)
		}
		if err := Write(&want, wantCh); err != nil {
			t.Fatal(err)
		}
		if err := Write(&got, gotCh); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want.Bytes(), got.Bytes()) {
			t.Errorf("%s: the streamed patch differs (%d bytes, loaded %d)", name, got.Len(), want.Len())
		}
		wantCalls := 0
		if name == "text" {
			wantCalls = 2
		}
		if calls != wantCalls {
			t.Errorf("%s: Content called %d times, want %d", name, calls, wantCalls)
		}
	}
}

// TestStreamedSizeChange: content that is not the Size it was given (a
// file changed while the patch is written) is an error, not a wrong patch.
func TestStreamedSizeChange(t *testing.T) {
	data := make([]byte, streamMin+10)
	calls := 0
	f := streamed(data, 0o644, &calls)
	f.Size--
	err := Write(io.Discard, []Change{{Path: "f", New: f}})
	if !errors.Is(err, errSizeChanged) {
		t.Errorf("Write = %v, want errSizeChanged", err)
	}
}
