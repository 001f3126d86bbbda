package kernel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// canMount reports why overlay mounts are impossible here, or "".
func canMount(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	for _, s := range []string{"l", "u", "w", "m"} {
		if err := os.Mkdir(filepath.Join(d, s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	j := func(s string) string { return filepath.Join(d, s) }
	m, err := Mount(context.Background(), j("l"), j("u"), j("w"), j("m"), Options{UserXattr: !inInitUserNS()})
	if err != nil {
		return "overlay mount not permitted: " + err.Error()
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	return ""
}

func needMount(t testing.TB) {
	t.Helper()
	if why := canMount(t); why != "" {
		t.Skip(why)
	}
}

// mountDirs makes lower/upper/work/target under one temp dir, with name
// appended to each so odd characters reach the mount options.
func mountDirs(t testing.TB, name string) (lower, upper, work, target string) {
	t.Helper()
	d := t.TempDir()
	mk := func(s string) string {
		p := filepath.Join(d, s+name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return mk("lower"), mk("upper"), mk("work"), mk("mnt")
}

func TestMountWritesGoToUpper(t *testing.T) {
	needMount(t)
	for _, tc := range []struct {
		name   string
		legacy bool
	}{
		{"plain", false},
		{"odd ,chars:\\x=y", false},
		{"plain", true},
		{"odd ,chars:\\x=y", true},
		{strings.Repeat("long", 60), false}, // > 255 bytes: passed as a directory fd
	} {
		t.Run(tc.name+map[bool]string{true: "/mount2", false: "/fsopen"}[tc.legacy], func(t *testing.T) {
			lower, upper, work, target := mountDirs(t, tc.name)
			if err := os.WriteFile(filepath.Join(lower, "a"), []byte("lower"), 0o644); err != nil {
				t.Fatal(err)
			}
			opts := Options{UserXattr: !inInitUserNS()}
			var m *MountPoint
			if tc.legacy {
				if err := mountLegacy(lower, upper, work, target, opts, false); err != nil {
					t.Fatal(err)
				}
				m = &MountPoint{target: target}
			} else {
				var err error
				if m, err = Mount(context.Background(), lower, upper, work, target, opts); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(filepath.Join(target, "a"))
			if err != nil || string(got) != "lower" {
				t.Fatalf("read through mount: %q, %v", got, err)
			}
			if err := os.WriteFile(filepath.Join(target, "a"), []byte("upper"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := m.Unmount(); err != nil {
				t.Fatal(err)
			}
			if err := m.Unmount(); !errors.Is(err, os.ErrClosed) {
				t.Errorf("second Unmount: %v, want ErrClosed", err)
			}
			if b, _ := os.ReadFile(filepath.Join(lower, "a")); string(b) != "lower" {
				t.Errorf("lower changed: %q", b)
			}
			if b, _ := os.ReadFile(filepath.Join(upper, "a")); string(b) != "upper" {
				t.Errorf("upper has %q, want the write", b)
			}
		})
	}
}

func TestMountInPlace(t *testing.T) {
	needMount(t)
	lower, upper, work, _ := mountDirs(t, "")
	if err := os.WriteFile(filepath.Join(lower, "a"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Mount(context.Background(), lower, upper, work, lower, Options{UserXattr: !inInitUserNS()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(lower, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(lower, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("removed through the mount but still there: %v", err)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(lower, "a")); err != nil {
		t.Errorf("real lower lost its file: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(upper, "a"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("upper/a is not a 0/0 whiteout: %+v %v", st, err)
	}
}

func TestMountErrors(t *testing.T) {
	needMount(t)
	ctx := context.Background()
	opts := Options{UserXattr: !inInitUserNS()}

	t.Run("not a directory", func(t *testing.T) {
		lower, upper, work, target := mountDirs(t, "")
		f := filepath.Join(lower, "file")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Mount(ctx, f, upper, work, target, opts)
		if !errors.Is(err, unix.ENOTDIR) {
			t.Errorf("got %v, want ENOTDIR", err)
		}
	})
	t.Run("upper on overlay", func(t *testing.T) {
		lower, upper, work, target := mountDirs(t, "")
		m, err := Mount(ctx, lower, upper, work, target, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Unmount()
		l2, _, _, t2 := mountDirs(t, "2")
		u2, w2 := filepath.Join(target, "u"), filepath.Join(target, "w")
		for _, d := range []string{u2, w2} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		_, err = Mount(ctx, l2, u2, w2, t2, opts)
		if !errors.Is(err, ErrUpperFilesystem) {
			t.Errorf("got %v, want ErrUpperFilesystem", err)
		}
	})
	t.Run("upper and work on two filesystems", func(t *testing.T) {
		lower, upper, _, target := mountDirs(t, "")
		work := "/dev/shm"
		if st, err := os.Stat(work); err != nil || !st.IsDir() {
			t.Skip("no /dev/shm tmpfs to put the work dir on")
		}
		w, err := os.MkdirTemp(work, "cowfs-work")
		if err != nil {
			t.Skip("cannot write /dev/shm: ", err)
		}
		defer os.RemoveAll(w)
		_, err = Mount(ctx, lower, upper, w, target, opts)
		if !errors.Is(err, ErrUpperFilesystem) {
			t.Errorf("got %v, want ErrUpperFilesystem", err)
		}
	})
	t.Run("read-only fallback", func(t *testing.T) {
		lower, upper, work, target := mountDirs(t, "")
		// An immutable work dir makes the kernel mount read-only, silently.
		fd, err := unix.Open(work, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, fsImmutableFL); err != nil {
			t.Skip("cannot make the work dir immutable (chattr +i): ", err)
		}
		defer unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, 0)
		m, err := Mount(ctx, lower, upper, work, target, opts)
		if err == nil {
			m.Unmount()
		}
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("got %v, want ErrReadOnly", err)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(target, &st); err != nil || st.Type == unix.OVERLAYFS_SUPER_MAGIC {
			t.Errorf("read-only overlay left mounted on %s", target)
		}
	})
	t.Run("data too long for one page", func(t *testing.T) {
		long := "/" + string(make([]byte, 0))
		for len(long) < 2000 {
			long += "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		}
		_, err := legacyData(long, long, long, opts, false)
		if !errors.Is(err, unix.ENAMETOOLONG) {
			t.Errorf("got %v, want ENAMETOOLONG", err)
		}
	})
}

func TestEscapeOption(t *testing.T) {
	for in, want := range map[string]string{
		"/a/b":     "/a/b",
		`/a,b:c\d`: `/a\,b\:c\\d`,
		"/x y=z":   "/x y=z",
	} {
		if got := escapeOption(in); got != want {
			t.Errorf("escapeOption(%q) = %q, want %q", in, got, want)
		}
	}
}

// fsImmutableFL is FS_IMMUTABLE_FL from linux/fs.h (chattr +i).
const fsImmutableFL = 0x10
