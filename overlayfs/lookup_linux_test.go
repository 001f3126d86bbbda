package overlayfs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestBigDirectoryNotListedAtFirstMiss counts the opens of the lower
// directories (inotify): a fresh overlay that creates one file lists no
// directory; two files, only a small directory; many, each once.
func TestBigDirectoryNotListedAtFirstMiss(t *testing.T) {
	orig := bigDirTree(t)
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skip("inotify unavailable:", err)
	}
	defer unix.Close(fd)
	watch := map[int32]string{}
	for _, d := range []string{"big", "small"} {
		wd, err := unix.InotifyAddWatch(fd, filepath.Join(orig, d), unix.IN_OPEN)
		if err != nil {
			t.Skip("inotify unavailable:", err)
		}
		watch[int32(wd)] = d
	}
	opens := map[string]int{} // opens of the directory itself
	drain := func() {
		buf := make([]byte, 64<<10)
		for {
			m, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EAGAIN) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off+unix.SizeofInotifyEvent <= m; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&unix.IN_OPEN != 0 && ev.Len == 0 {
					opens[watch[ev.Wd]]++
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
	c := newCow(t, orig)
	create := func(d string, i int) {
		t.Helper()
		f, err := c.OpenFile(filepath.Join(orig, d, fmt.Sprintf("new-%02d", i)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for i, want := range []int{0, 1} {
		create("big", i)
		create("small", i)
		drain()
		if opens["big"] != 0 || opens["small"] != want {
			t.Fatalf("after %d creations in each: %d opens of big (want 0), %d of small (want %d)", i+1, opens["big"], opens["small"], want)
		}
	}
	for i := 2; i < 40; i++ {
		create("big", i)
		create("small", i)
	}
	drain()
	if opens["big"] != 1 || opens["small"] != 1 {
		t.Fatalf("after 40 creations in each: %d opens of big (want 1), %d of small (want 1)", opens["big"], opens["small"])
	}
}
