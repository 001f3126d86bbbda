package sparse_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cowfs/cowfs/internal/sparse"
)

// TestWriteAndCopy writes contents with holes of every kind (leading,
// inner, trailing, unaligned zeros, none) with Write and with Copy, reads
// them back with os (the content must be exactly the input), and checks
// with the file system's block count that a file of mostly zeros takes far
// less than its size.
func TestWriteAndCopy(t *testing.T) {
	const mib = 1 << 20
	big := make([]byte, 16*mib)
	copy(big[5*mib+100:], "inner data")
	copy(big[len(big)-3:], "end")
	cases := map[string][]byte{
		"empty":          nil,
		"small":          []byte("hello\n"),
		"zeros":          make([]byte, 3*mib),
		"zeros+tail":     append(make([]byte, 2*sparse.Block+10), 'x'),
		"unaligned zero": append([]byte("x"), make([]byte, sparse.Block)...),
		"mostly holes":   big,
		"dense":          bytes.Repeat([]byte("0123456789abcdef"), mib/16),
	}
	for name, data := range cases {
		for _, how := range []string{"Write", "Copy"} {
			t.Run(name+"/"+how, func(t *testing.T) {
				p := filepath.Join(t.TempDir(), "f")
				fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				if how == "Write" {
					err = sparse.Write(fh, data)
				} else {
					var n int64
					n, err = sparse.Copy(fh, io.MultiReader(bytes.NewReader(data)))
					if err == nil && n != int64(len(data)) {
						t.Errorf("Copy = %d bytes, want %d", n, len(data))
					}
				}
				if cerr := fh.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("read back %d bytes, differing from the %d written", len(got), len(data))
				}
				if a := allocated(t, p); len(data) >= mib && a >= 0 {
					dense := name == "dense"
					if !dense && a > mib/4 {
						t.Errorf("%d bytes allocated for %d bytes of mostly zeros: holes were written", a, len(data))
					}
					if dense && a < int64(len(data)) {
						t.Errorf("%d bytes allocated for %d dense bytes", a, len(data))
					}
				}
			})
		}
	}
}

// TestCopyFromSparseFile copies from a sparse file (as an *os.File at an
// offset, and as an io.SectionReader over one), where Copy reads only the
// data regions: the copy reads back exactly as os reads the source range,
// and takes far less space than its size.
func TestCopyFromSparseFile(t *testing.T) {
	const size = 64 << 20
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	fh, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	for off, s := range map[int64]string{0: "start", 10<<20 + 7: "inner", size - 3: "end"} {
		if _, err := fh.WriteAt([]byte(s), off); err != nil {
			t.Fatal(err)
		}
	}
	whole, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		off  int64
		r    func(f *os.File) io.Reader
	}{
		{"file", 0, func(f *os.File) io.Reader { return f }},
		{"file at an offset", 3, func(f *os.File) io.Reader { f.Seek(3, io.SeekStart); return f }},
		{"section", 0, func(f *os.File) io.Reader { return io.NewSectionReader(f, 0, size) }},
		{"inner section", 1 << 20, func(f *os.File) io.Reader { return io.NewSectionReader(f, 1<<20, 10<<20) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := os.Open(src)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			r := tc.r(in)
			want := whole[tc.off:]
			if s, ok := r.(*io.SectionReader); ok {
				want = whole[tc.off : tc.off+s.Size()]
			}
			dst := filepath.Join(t.TempDir(), "dst")
			out, err := os.Create(dst)
			if err != nil {
				t.Fatal(err)
			}
			n, err := sparse.Copy(out, r)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil || n != int64(len(want)) {
				t.Fatalf("Copy = %d, %v; want %d bytes", n, err, len(want))
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the copy differs from the source range")
			}
			if a := allocated(t, dst); a > 1<<20 {
				t.Errorf("%d bytes allocated for a copy that is nearly all hole", a)
			}
		})
	}
}
