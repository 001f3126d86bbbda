package tape

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/spf13/afero"
)

// settle waits until path's version key is no longer racy, so a recorder
// may keep its hash.
func settle(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		k, ok := keyOf(fi)
		if !ok {
			t.Skipf("no version key on %s: %T", runtime.GOOS, fi.Sys())
		}
		if !k.racy(time.Now()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still racy after 5s", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// partialRead opens name, reads 10 bytes and closes: the recorder must
// still record the hash of the whole version.
func partialRead(t *testing.T, fsys afero.Fs, name string) {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(f, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestVersionHashReused: a second handle on an unchanged file reuses the
// hash (it reads only what the program reads, where the first read the
// rest back to hash it), and a same-size rewrite, a new version, is hashed
// again. Every recorded hash is checked against BLAKE3 of the bytes os
// reads.
func TestVersionHashReused(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	const size = 1 << 20
	mustWrite(t, name, pattern(size, 1))
	settle(t, name)
	cfs := newCountingFs(afero.NewOsFs())
	var deltas []int64
	step := func(fsys afero.Fs) {
		before := cfs.read.Load()
		partialRead(t, fsys, name)
		deltas = append(deltas, cfs.read.Load()-before)
	}
	var want []string
	tp, _ := tapeOf(t, cfs, dir, func(fsys afero.Fs) {
		step(fsys)
		h, _ := oracleHash(t, name)
		want = append(want, h)
		step(fsys)
		want = append(want, h)
		// Same size, other bytes, at once: ctime moves, the key changes.
		mustWrite(t, name, pattern(size, 2))
		step(fsys)
		h, _ = oracleHash(t, name)
		want = append(want, h)
	})
	opens := only(tp, OpOpen, "f")
	if len(opens) != 3 {
		t.Fatalf("%d open records, want 3", len(opens))
	}
	for i, r := range opens {
		if r.RHash != want[i] || r.RSize != size {
			t.Errorf("open %d: rhash %s rsize %d, want %s %d", i+1, r.RHash, r.RSize, want[i], size)
		}
	}
	if want[0] == want[2] {
		t.Fatal("rewrite did not change the content")
	}
	if got := []int64{deltas[0], deltas[1], deltas[2]}; got[0] != size || got[1] != 10 || got[2] != size {
		t.Errorf("bytes read from the file per handle = %v, want [%d 10 %d] (read back, reused, read back)", got, size, size)
	}
}

// TestVersionKeep: a hash is kept only for a version whose timestamps are
// older than the racy window at the moment its key was taken, and only
// while the file still has that key.
func TestVersionKeep(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	mustWrite(t, name, []byte("0123456789"))
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	k, ok := keyOf(fi)
	if !ok {
		t.Skipf("no version key on %s", runtime.GOOS)
	}
	ctime := time.Unix(0, k.ctime)
	for _, c := range []struct {
		name  string
		taken time.Time
		size  int64
		other bool // the file changed before keep
		kept  bool
	}{
		{"racy", ctime.Add(time.Millisecond), 10, false, false},
		{"settled", ctime.Add(3 * time.Second), 10, false, true},
		{"short hash", ctime.Add(3 * time.Second), 9, false, false},
		{"changed meanwhile", ctime.Add(3 * time.Second), 10, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cache versionCache
			v := versionState{tried: true, ok: true, key: k, taken: c.taken.UnixNano()}
			now := fi
			if c.other {
				mustWrite(t, name, []byte("abcdefghij"))
				if now, err = os.Stat(name); err != nil {
					t.Fatal(err)
				}
			}
			v.keep(&cache, now, "h", c.size)
			if _, got := cache.get(k); got != c.kept || len(cache.m) != map[bool]int{false: 0, true: 1}[c.kept] {
				t.Errorf("kept = %v, want %v (cache holds %d)", got, c.kept, len(cache.m))
			}
		})
	}
	// A file system without inodes gives no key.
	mem := afero.NewMemMapFs()
	afero.WriteFile(mem, "/f", []byte("x"), 0o644)
	mfi, _ := mem.Stat("/f")
	if _, ok := keyOf(mfi); ok {
		t.Error("MemMapFs file has a version key")
	}
}
