package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"golang.org/x/sys/unix"
)

// bindSocketEnv makes the test binary bind a unix socket at the path it
// names and exit, leaving the socket file: a command that leaves a socket,
// as a test server's ctl.sock.
const bindSocketEnv = "COWFS_KERNEL_TEST_BIND"

func init() {
	p := os.Getenv(bindSocketEnv)
	if p == "" {
		return
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrUnix{Name: p})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bind %s: %v\n", p, err)
		exit(1)
	}
	exit(0) // not os.Exit: under -race that waits a second (GORACE atexit_sleep_ms)
}

// specialModes are Run's modes that this file's tests exercise.
func specialModes() []runMode {
	var out []runMode
	for _, m := range runModes() {
		if m.name == "Run" || m.name == "Run-copy" {
			out = append(out, m)
		}
	}
	return out
}

// TestRunRootWithSpecialFiles: a root that merely contains a FIFO and a
// socket runs in both modes; the command sees them as what they are, and
// they are no change.
func TestRunRootWithSpecialFiles(t *testing.T) {
	for _, mode := range specialModes() {
		t.Run(mode.name, func(t *testing.T) {
			if mode.name == "Run" {
				needMount(t)
			}
			root := t.TempDir()
			writeTree(t, root)
			if err := unix.Mkfifo(filepath.Join(root, "pipe"), 0o640); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mknod(filepath.Join(root, "d/ctl.sock"), unix.S_IFSOCK|0o600, 0); err != nil {
				t.Fatal(err)
			}
			f, err := overlayfs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", `test -p pipe && test -S d/ctl.sock && echo x > a`)
			cmd.Dir = root
			var out strings.Builder
			cmd.Stderr = &out
			if err := mode.run(context.Background(), f, cmd); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if got := changeStrings(f); !slices.Equal(got, []string{"M a"}) {
				t.Errorf("changes %q, want only M a", got)
			}
		})
	}
}

// TestRunDeviceNodeSkipped: a device node the command leaves cannot be in
// a layer; Run imports everything else and then names it in an error
// wrapping ErrUnsupportedType. Oracle for the rest: the command's other
// effects, as the kernel overlay or the copy shows them.
func TestRunDeviceNodeSkipped(t *testing.T) {
	probe := filepath.Join(t.TempDir(), "null")
	if err := unix.Mknod(probe, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Skip("making device nodes needs CAP_MKNOD: ", err)
	}
	for _, mode := range specialModes() {
		t.Run(mode.name, func(t *testing.T) {
			if mode.name == "Run" {
				needMount(t)
			}
			root := t.TempDir()
			writeTree(t, root)
			f, err := overlayfs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", `echo before > b1 && mknod d/mydev c 1 3 && mknod blk b 7 0 && echo after > z9 && rm d/b`)
			cmd.Dir = root
			var out strings.Builder
			cmd.Stderr = &out
			// Unconfined: the sandbox refuses to make device nodes (issue 22).
			err = mode.run(context.Background(), f, cmd, Unconfined())
			if !errors.Is(err, ErrUnsupportedType) {
				t.Fatalf("Run: %v, want ErrUnsupportedType\n%s", err, out.String())
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Errorf("the command itself failed: %v\n%s", err, out.String())
			}
			for _, name := range []string{"mydev", "character device 1:3", "blk", "block device 7:0"} {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("error %q does not name %s", err, name)
				}
			}
			if got, want := changeStrings(f), []string{"A b1", "A z9", "D d/b"}; !slices.Equal(got, want) {
				t.Errorf("changes %q, want %q: everything but the devices", got, want)
			}
		})
	}
}

// TestImportSkipsDevices: Import of an upper holding a device node applies
// the rest and names the device afterwards.
func TestImportSkipsDevices(t *testing.T) {
	upper := t.TempDir()
	if err := unix.Mknod(filepath.Join(upper, "dev"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Skip("making device nodes needs CAP_MKNOD: ", err)
	}
	if err := os.WriteFile(filepath.Join(upper, "zz"), []byte("z"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(upper, "aa"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := overlayfs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = Import(upper, f, Options{})
	var pe *os.PathError
	if !errors.Is(err, ErrUnsupportedType) || !errors.As(err, &pe) || pe.Path != filepath.Join(upper, "dev") {
		t.Fatalf("Import: %v, want a PathError at %s wrapping ErrUnsupportedType", err, filepath.Join(upper, "dev"))
	}
	if got := changeStrings(f); !slices.Equal(got, []string{"A aa", "A zz"}) {
		t.Errorf("changes %q", got)
	}
}

// TestSpecialFilesRoundTrip: FIFOs and sockets in an upper dir are
// imported as layer entries of their own type, and Materialize writes them
// back so that the real kernel overlay shows what the layer does (the
// oracle: the mounted view against f's view, types, modes and owners).
func TestSpecialFilesRoundTrip(t *testing.T) {
	lower := t.TempDir()
	writeTree(t, lower)
	upper := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(upper, "d"), 0o755))
	must(unix.Mkfifo(filepath.Join(upper, "pipe"), 0o640))
	must(unix.Mknod(filepath.Join(upper, "d/srv.sock"), unix.S_IFSOCK|0o600, 0))
	must(unix.Mkfifo(filepath.Join(upper, "a"), 0o600)) // replaces a lower file
	f, err := overlayfs.New(lower)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(upper, f, Options{}); err != nil {
		t.Fatal(err)
	}
	types := map[string]overlayfs.EntryType{}
	for _, e := range f.Layer() {
		types[e.Path] = e.Type
	}
	for p, want := range map[string]overlayfs.EntryType{"pipe": overlayfs.EntryFIFO, "d/srv.sock": overlayfs.EntrySocket, "a": overlayfs.EntryFIFO} {
		if types[p] != want {
			t.Errorf("%s: layer entry %v, want %v", p, types[p], want)
		}
	}
	fi, err := f.Lstat(filepath.Join(lower, "pipe"))
	if err != nil || fi.Mode() != fs.ModeNamedPipe|0o640 {
		t.Errorf("Lstat pipe: %v, %v", fi, err)
	}
	if why := canMount(t); why != "" {
		t.Skip("the kernel-view half needs an overlay mount: ", why)
	}
	checkKernelView(t, f, Options{UserXattr: !inInitUserNS()}, cmpOpts{times: true, owners: true})
}

// TestOCISpecialFiles: a FIFO goes through an OCI layer tar and back; a
// socket, which tar cannot carry, is refused by name instead of dropped.
func TestOCISpecialFiles(t *testing.T) {
	root := t.TempDir()
	f, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.PutEntry(overlayfs.LayerEntry{Path: "pipe", Type: overlayfs.EntryFIFO, Mode: 0o640}, nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteOCILayer(f, &buf); err != nil {
		t.Fatal(err)
	}
	g, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := ReadOCILayer(&buf, g); err != nil {
		t.Fatal(err)
	}
	fi, err := g.Lstat(filepath.Join(root, "pipe"))
	if err != nil || fi.Mode() != fs.ModeNamedPipe|0o640 {
		t.Errorf("pipe after the round trip: %v, %v", fi, err)
	}
	if err := f.PutEntry(overlayfs.LayerEntry{Path: "ctl.sock", Type: overlayfs.EntrySocket, Mode: 0o600}, nil); err != nil {
		t.Fatal(err)
	}
	err = WriteOCILayer(f, io.Discard)
	if !errors.Is(err, ErrUnrepresentable) || !strings.Contains(err.Error(), "ctl.sock") {
		t.Errorf("socket in an OCI layer: %v, want ErrUnrepresentable naming it", err)
	}
}
