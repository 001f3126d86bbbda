package tape

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/afero"
	"github.com/zeebo/blake3"
)

// oracleHash is BLAKE3 of the bytes os holds at path now.
func oracleHash(t testing.TB, path string) (string, int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("oracle read: %v", err)
	}
	s := blake3.Sum256(b)
	return hex.EncodeToString(s[:]), int64(len(b))
}

func sum(b []byte) string {
	s := blake3.Sum256(b)
	return hex.EncodeToString(s[:])
}

// tapeOf runs fn on fsys wrapped by a fresh recorder rooted at root and
// returns the tape read back, failing on any recorder or reader error.
func tapeOf(t testing.TB, fsys afero.Fs, root string, fn func(afero.Fs), opts ...Option) (*Tape, []byte) {
	t.Helper()
	var buf bytes.Buffer
	rec := NewRecorder(&buf, opts...)
	fn(rec.Wrap(fsys, root))
	if err := rec.Close(); err != nil {
		t.Fatalf("Recorder.Close: %v", err)
	}
	raw := bytes.Clone(buf.Bytes())
	tp, err := Read(&buf)
	if err != nil {
		t.Fatalf("Read: %v\n%s", err, raw)
	}
	if tp.Truncated {
		t.Fatalf("tape of a closed recorder reads as truncated")
	}
	return tp, raw
}

// only returns the records with op op (and path path when not "").
func only(tp *Tape, op, path string) []Record {
	var out []Record
	for _, r := range tp.Records {
		if r.Op == op && (path == "" || r.Path == path) {
			out = append(out, r)
		}
	}
	return out
}

func mustWrite(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pattern returns n bytes that differ at every offset modulo 251.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%251) ^ seed
	}
	return b
}

// countingFs counts the bytes read through its file handles, to prove the
// recorder reads nothing twice.
type countingFs struct {
	afero.Fs
	read *atomic.Int64
}

func newCountingFs(inner afero.Fs) countingFs {
	return countingFs{Fs: inner, read: new(atomic.Int64)}
}

func (c countingFs) Open(name string) (afero.File, error) {
	f, err := c.Fs.Open(name)
	if err != nil {
		return nil, err
	}
	return countingFile{f, c.read}, nil
}

func (c countingFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	f, err := c.Fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countingFile{f, c.read}, nil
}

type countingFile struct {
	afero.File
	read *atomic.Int64
}

func (f countingFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.read.Add(int64(n))
	return n, err
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.read.Add(int64(n))
	return n, err
}

var _ io.ReaderAt = countingFile{}

// specChain computes a tape's chain hash from its lines (header first,
// trailer excluded, no newlines) as FORMAT.md defines it for the header's
// minor version, with one-shot BLAKE3 calls over the bytes and nothing of
// package tape's reader or chain type.
func specChain(t testing.TB, lines []string) string {
	t.Helper()
	var h struct {
		Minor int `json:"minor"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
		t.Fatalf("specChain: header: %v", err)
	}
	if h.Minor >= 2 {
		// BLAKE3 of the tape's bytes before the trailer line.
		s := blake3.Sum256([]byte(strings.Join(lines, "\n") + "\n"))
		return hex.EncodeToString(s[:])
	}
	c := blake3.Sum256([]byte(lines[0]))
	for _, l := range lines[1:] {
		c = blake3.Sum256(append(c[:], l...))
	}
	return hex.EncodeToString(c[:])
}
