package kernel

import (
	"bytes"
	"errors"
	"github.com/cowfs/cowfs/internal/longtest"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// TestMaterializeKeepsHoles materializes a layer file with a 64 MiB hole
// and a copied-up sparse lower file: in the upper, read with os, the bytes
// are exact and the file system allocated far less than their size.
func TestMaterializeKeepsHoles(t *testing.T) {
	const size = 64 << 20
	lower := t.TempDir()
	if err := os.WriteFile(filepath.Join(lower, "sparse"), []byte("head"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(lower, "sparse"), size); err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := f.OpenFile(filepath.Join(lower, "big"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, err1 := fh.WriteAt([]byte("start"), 0)
	_, err2 := fh.WriteAt([]byte("end"), size-3)
	if err := errors.Join(err1, err2, fh.Close(), f.Chmod(filepath.Join(lower, "sparse"), 0o600)); err != nil {
		t.Fatal(err)
	}
	upper := filepath.Join(t.TempDir(), "upper")
	if err := Materialize(f, upper, Options{UserXattr: true}); err != nil {
		t.Fatal(err)
	}
	wantBig := make([]byte, size)
	copy(wantBig, "start")
	copy(wantBig[size-3:], "end")
	wantSparse := make([]byte, size)
	copy(wantSparse, "head")
	for name, want := range map[string][]byte{"big": wantBig, "sparse": wantSparse} {
		p := filepath.Join(upper, name)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes in the upper, not the %d bytes of the view", name, len(got), len(want))
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Blocks*512 > 1<<20 {
			t.Errorf("%s: %d bytes allocated for a file of %d bytes that is nearly all hole", name, st.Blocks*512, size)
		}
	}
}

// TestImportSparseBounded imports an upper holding a sparse 1 GiB file
// (a few bytes at its start, middle and end): the Go heap grows by less
// than 64 MiB (runtime.MemStats: every byte allocated during Import,
// TotalAlloc, not only what is live). The layer's content is the file's
// (streamed and compared with os's read of the upper), the upper can be
// removed meanwhile, and Commit writes it to the root with its holes,
// again allocating less than 64 MiB; the root's file reads back as the
// upper's did.
func TestImportSparseBounded(t *testing.T) {
	// 256 MiB (four times the bound) by default, 1 GiB with COWFS_LONG.
	size := int64(longtest.N(256<<20, 1<<30))
	lower, upper := t.TempDir(), filepath.Join(t.TempDir(), "upper")
	if err := os.Mkdir(upper, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(lower, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(upper, "big")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for off, s := range map[int64]string{0: "start", size / 2: "middle", size - 3: "end"} {
		if _, err := fh.WriteAt([]byte(s), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 0, 64)
	readSpans := func(name string) []byte {
		got := make([]byte, 0, 64)
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, off := range []int64{0, size / 2, size - 3} {
			b := make([]byte, 6)
			n, _ := f.ReadAt(b, off)
			got = append(got, b[:n]...)
		}
		return got
	}
	want = append(want, readSpans(p)...)
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	allocated := func(do func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		do()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	var ierr error
	if a := allocated(func() { ierr = Import(upper, f, Options{UserXattr: true}) }); ierr != nil {
		t.Fatal(ierr)
	} else if a >= 64<<20 {
		t.Errorf("Import of a sparse 1 GiB file allocated %d MiB", a>>20)
	} else {
		t.Logf("Import of a sparse 1 GiB file allocated %d KiB", a>>10)
	}
	if err := os.RemoveAll(upper); err != nil {
		t.Fatal(err)
	}
	var layerFile overlayfs.LayerEntry
	for _, e := range f.Layer() {
		if e.Path == "big" {
			layerFile = e
		}
	}
	if layerFile.Size != size {
		t.Fatalf("the layer's big has size %d, want %d", layerFile.Size, size)
	}
	var cerr error
	if a := allocated(func() { cerr = f.Commit() }); cerr != nil {
		t.Fatal(cerr)
	} else if a >= 64<<20 {
		t.Errorf("Commit of the imported sparse 1 GiB file allocated %d MiB", a>>20)
	} else {
		t.Logf("Commit of the imported sparse 1 GiB file allocated %d KiB", a>>10)
	}
	committed := filepath.Join(lower, "big")
	var st unix.Stat_t
	if err := unix.Stat(committed, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.Blocks*512 > 1<<20 {
		t.Errorf("committed file: %d bytes, %d allocated; want %d bytes, nearly all hole", st.Size, st.Blocks*512, size)
	}
	if got := readSpans(committed); !bytes.Equal(got, want) {
		t.Errorf("committed file reads %q at the written offsets, the upper read %q", got, want)
	}
	// The rest of the file is zeros: compare it whole, streaming, with a
	// file of zeros of the same size (what os reads from the upper's holes).
	if ok, err := zerosBut(committed, map[int64]string{0: "start", size / 2: "middle", size - 3: "end"}); err != nil || !ok {
		t.Errorf("committed file differs from the upper's content outside the written spans (%v)", err)
	}
}

// zerosBut reports whether the file at name holds zeros everywhere except
// the given strings at the given offsets.
func zerosBut(name string, spans map[int64]string) (bool, error) {
	f, err := os.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf, zeros := make([]byte, 1<<20), make([]byte, 1<<20)
	var off int64
	for {
		n, err := f.ReadAt(buf, off)
		chunk := buf[:n]
		for at, s := range spans {
			for i := range len(s) {
				if p := at + int64(i) - off; p >= 0 && p < int64(n) {
					if chunk[p] != s[i] {
						return false, nil
					}
					chunk[p] = 0
				}
			}
		}
		if !bytes.Equal(chunk, zeros[:n]) {
			return false, nil
		}
		off += int64(n)
		if err != nil {
			return true, nil
		}
	}
}
