package tape

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
)

// fixedKeyFs serves files from a MemMapFs but reports for each the same
// inode, size, mtime and ctime whatever its bytes: what a real file
// system shows for a same-size rewrite within one timestamp tick.
type fixedKeyFs struct {
	countingFs
	ctime time.Time
}

type fixedKeyInfo struct {
	os.FileInfo
	st *syscall.Stat_t
}

func (fi fixedKeyInfo) Sys() any { return fi.st }

func (c fixedKeyFs) info(fi os.FileInfo) os.FileInfo {
	ts := syscall.NsecToTimespec(c.ctime.UnixNano())
	return fixedKeyInfo{fi, &syscall.Stat_t{Dev: 1, Ino: 42, Size: fi.Size(), Mtim: ts, Ctim: ts, Mode: syscall.S_IFREG | 0o644}}
}

func (c fixedKeyFs) Stat(name string) (os.FileInfo, error) {
	fi, err := c.countingFs.Stat(name)
	if err != nil {
		return nil, err
	}
	return c.info(fi), nil
}

func (c fixedKeyFs) Open(name string) (afero.File, error) {
	f, err := c.countingFs.Open(name)
	if err != nil {
		return nil, err
	}
	return fixedKeyFile{f, c}, nil
}

type fixedKeyFile struct {
	afero.File
	fs fixedKeyFs
}

func (f fixedKeyFile) Stat() (os.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return f.fs.info(fi), nil
}

// TestVersionSameTickRewrite: a same-size rewrite that leaves device,
// inode, size, mtime and ctime as they were (two writes within one
// timestamp tick) is hashed again when those timestamps are recent: the
// racy rule keeps the first hash out of the cache. The control with old
// timestamps shows that the cache would otherwise have answered, so the
// first part tests the rule and not a miss.
func TestVersionSameTickRewrite(t *testing.T) {
	const size = 64 << 10
	run := func(t *testing.T, ctime time.Time) (rhashes []string, read []int64, want []string) {
		mem := afero.NewMemMapFs()
		must(t, afero.WriteFile(mem, "/r/f", pattern(size, 1), 0o644))
		cfs := fixedKeyFs{newCountingFs(mem), ctime}
		tp, _ := tapeOf(t, cfs, "/r", func(fsys afero.Fs) {
			for i, seed := range []byte{1, 2} {
				if i > 0 {
					must(t, afero.WriteFile(mem, "/r/f", pattern(size, seed), 0o644))
				}
				want = append(want, sum(pattern(size, seed)))
				before := cfs.read.Load()
				partialRead(t, fsys, "/r/f")
				read = append(read, cfs.read.Load()-before)
			}
		})
		for _, r := range only(tp, OpOpen, "f") {
			rhashes = append(rhashes, r.RHash)
		}
		return rhashes, read, want
	}
	t.Run("recent", func(t *testing.T) {
		got, read, want := run(t, time.Now())
		if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("rhash = %v, want %v: the rewrite within the tick was not hashed again", got, want)
		}
		if read[1] != size {
			t.Errorf("second handle read %d bytes, want the whole %d (hashed again)", read[1], size)
		}
	})
	t.Run("settled control", func(t *testing.T) {
		got, read, want := run(t, time.Now().Add(-time.Hour))
		if len(got) != 2 || got[1] != want[0] || read[1] != 10 {
			t.Errorf("rhash = %v, second handle read %d bytes: want the first hash reused (%s) and 10 bytes read", got, read[1], want[0])
		}
	})
}

// TestVersionSameMtimeRehashed: a file rewritten with other bytes of the
// same size and given back its old mtime (as tar or cp -p do) has the old
// size and mtime but a new ctime; a recorder that reused the old version's
// hash reads and hashes it again.
func TestVersionSameMtimeRehashed(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	const size = 256 << 10
	mustWrite(t, name, pattern(size, 1))
	settle(t, name)
	before, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	cfs := newCountingFs(afero.NewOsFs())
	var read []int64
	var want []string
	step := func(fsys afero.Fs) {
		n := cfs.read.Load()
		partialRead(t, fsys, name)
		read = append(read, cfs.read.Load()-n)
		h, _ := oracleHash(t, name)
		want = append(want, h)
	}
	tp, _ := tapeOf(t, cfs, dir, func(fsys afero.Fs) {
		step(fsys)
		step(fsys) // reuses the hash
		mustWrite(t, name, pattern(size, 2))
		must(t, os.Chtimes(name, before.ModTime(), before.ModTime()))
		after, err := os.Stat(name)
		must(t, err)
		sb, sa := before.Sys().(*syscall.Stat_t), after.Sys().(*syscall.Stat_t)
		if sa.Size != sb.Size || sa.Mtim != sb.Mtim || sa.Ino != sb.Ino || sa.Ctim == sb.Ctim {
			t.Fatalf("rewrite: stat %+v, before %+v: want the same inode, size and mtime, another ctime", sa, sb)
		}
		step(fsys)
	})
	opens := only(tp, OpOpen, "f")
	if len(opens) != 3 {
		t.Fatalf("%d open records, want 3", len(opens))
	}
	for i, r := range opens {
		if r.RHash != want[i] {
			t.Errorf("open %d: rhash %s, os holds %s", i+1, r.RHash, want[i])
		}
	}
	if want[0] == want[2] {
		t.Fatal("the rewrite did not change the bytes")
	}
	if read[1] != 10 || read[2] != size {
		t.Errorf("bytes read per handle %v: want the second to reuse the hash (10) and the third to hash again (%d)", read, size)
	}
}

// TestVersionWriteAfterStat: a read-only handle that found its version's
// hash at its Stat does not keep it when a write through the recorder
// comes before its reads (the handle hashes the bytes it reads) or
// between them (it hashes what the file holds at its Close, read back
// once): its rhash is never the old version's when it read other bytes.
func TestVersionWriteAfterStat(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	const size = 64 << 10
	cfs := newCountingFs(afero.NewOsFs())
	var want []string
	var read []int64
	tp, _ := tapeOf(t, cfs, dir, func(fsys afero.Fs) {
		for i, seed := range []byte{1, 2} {
			mustWrite(t, name, pattern(size, seed))
			settle(t, name)
			_, err := afero.ReadFile(fsys, name) // hashes this version and keeps it
			must(t, err)
			f, err := fsys.Open(name)
			must(t, err)
			_, err = f.Stat() // finds the hash
			must(t, err)
			before := cfs.read.Load()
			if i == 1 {
				_, err = io.ReadFull(f, make([]byte, 10))
				must(t, err)
			}
			must(t, afero.WriteFile(fsys, name, pattern(size, seed+10), 0o644)) // through the recorder
			_, err = io.ReadAll(f)
			must(t, err)
			must(t, f.Close())
			read = append(read, cfs.read.Load()-before)
			want = append(want, sum(pattern(size, seed)), sum(pattern(size, seed+10)))
		}
	})
	var got []string
	for _, r := range only(tp, OpOpen, "f") {
		if r.Flag == "r" {
			got = append(got, r.RHash)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("rhash of the read-only handles %v, want %v", got, want)
	}
	if read[0] != size || read[1] != 2*size {
		t.Errorf("bytes read %v: want %d (the handle hashes as it reads), then %d (its reads and one read-back at Close)", read, size, 2*size)
	}
}
