package kernel

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// nestedUpper makes an upper holding depth nested directories d/d/d/...,
// each with a file, and returns it.
func nestedUpper(tb testing.TB, depth int) string {
	tb.Helper()
	upper := tb.TempDir()
	// One level at a time through a directory descriptor: the path grows
	// past PATH_MAX.
	fd, err := unix.Open(upper, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	for range depth {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			tb.Fatal(err)
		}
		ffd, err := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			tb.Fatal(err)
		}
		unix.Write(ffd, []byte("x"))
		unix.Close(ffd)
		next, err := unix.Openat(fd, "d", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			tb.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	return upper
}

// flatUpper makes an upper holding n directories side by side, each with
// a file: the same entries as nestedUpper's, without the depth.
func flatUpper(tb testing.TB, n int) string {
	tb.Helper()
	upper := tb.TempDir()
	for i := range n {
		d := filepath.Join(upper, "d"+strconv.Itoa(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return upper
}

// BenchmarkImportNested imports an upper of 2,000 nested directories
// (d/d/d/..., a file in each; issue 23 measured 7 s) and, as its peer in
// the same run, 2,000 directories side by side: the ratio shows what the
// depth costs (1 for an import linear in the entries).
func BenchmarkImportNested(b *testing.B) {
	const n = 2000
	uppers := map[string]string{"nested": nestedUpper(b, n), "flat": flatUpper(b, n)}
	for _, shape := range []string{"nested", "flat"} {
		b.Run(shape+"-"+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f, err := overlayfs.New(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				if err := Import(uppers[shape], f, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
