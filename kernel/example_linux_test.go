package kernel_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cowfs/cowfs/kernel"
	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// exampleRoot makes a small real tree to overlay.
func exampleRoot() string {
	root, err := os.MkdirTemp("", "cowfs-example-")
	if err != nil {
		log.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, "conf"), 0o755)
	os.WriteFile(filepath.Join(root, "conf/app.ini"), []byte("debug=false\n"), 0o644)
	os.WriteFile(filepath.Join(root, "old.log"), []byte("..."), 0o644)
	return root
}

func describe(upper string) {
	filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == upper {
			return err
		}
		rel, _ := filepath.Rel(upper, p)
		var st unix.Stat_t
		unix.Lstat(p, &st)
		kind := "file"
		switch {
		case d.IsDir():
			kind = "dir"
		case st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0:
			kind = "whiteout"
		}
		fmt.Println(kind, rel)
		return nil
	})
}

func ExampleMaterialize() {
	root := exampleRoot()
	defer os.RemoveAll(root)
	f, _ := overlayfs.New(root)
	afero.WriteFile(f, filepath.Join(root, "conf/app.ini"), []byte("debug=true\n"), 0o644)
	f.Remove(filepath.Join(root, "old.log"))

	upper := filepath.Join(os.TempDir(), fmt.Sprintf("cowfs-upper-%d", os.Getpid()))
	defer os.RemoveAll(upper)
	// user.* xattrs: no privilege needed, mount with userxattr.
	if err := kernel.Materialize(f, upper, kernel.Options{UserXattr: true}); err != nil {
		log.Fatal(err)
	}
	describe(upper)
	// Output:
	// dir conf
	// file conf/app.ini
	// whiteout old.log
}

func ExampleImport() {
	root := exampleRoot()
	defer os.RemoveAll(root)
	// An upper dir as the kernel leaves it after `echo x > new; rm old.log`.
	upper, _ := os.MkdirTemp("", "cowfs-upper-")
	defer os.RemoveAll(upper)
	os.WriteFile(filepath.Join(upper, "new"), []byte("x\n"), 0o644)
	if err := unix.Mknod(filepath.Join(upper, "old.log"), unix.S_IFCHR, 0); err != nil {
		log.Fatal(err)
	}

	f, _ := overlayfs.New(root)
	if err := kernel.Import(upper, f, kernel.Options{}); err != nil {
		log.Fatal(err)
	}
	for _, c := range f.Changes() {
		fmt.Println(c)
	}
	// Output:
	// A new
	// D old.log
}

func ExampleRun() {
	root := exampleRoot()
	defer os.RemoveAll(root)
	f, _ := overlayfs.New(root)

	// The script uses the root's real absolute path; the real tree is not
	// touched. Without mount privileges Run falls back to a copy, where
	// $COWFS_ROOT points.
	cmd := exec.Command("sh", "-c", `cd "$COWFS_ROOT" && echo 'debug=true' >> conf/app.ini && rm old.log && mkdir out && echo ok > out/result`)
	if err := kernel.Run(context.Background(), f, cmd); err != nil {
		log.Fatal(err)
	}
	for _, c := range f.Changes() {
		fmt.Println(c)
	}
	real, _ := os.ReadFile(filepath.Join(root, "conf/app.ini"))
	fmt.Printf("real file: %q\n", real)
	// Output:
	// M conf/app.ini
	// D old.log
	// A out
	// A out/result
	// real file: "debug=false\n"
}

func ExampleWriteOCILayer() {
	root := exampleRoot()
	defer os.RemoveAll(root)
	f, _ := overlayfs.New(root)
	f.RemoveAll(filepath.Join(root, "conf"))
	f.Mkdir(filepath.Join(root, "conf"), 0o755) // replaces the lower dir: opaque
	f.Remove(filepath.Join(root, "old.log"))

	var buf bytes.Buffer
	if err := kernel.WriteOCILayer(f, &buf); err != nil {
		log.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		fmt.Println(h.Name)
	}
	// Output:
	// ./
	// conf/
	// conf/.wh..wh..opq
	// .wh.old.log
}

func ExampleMount() {
	// Needs root, or a user namespace (unshare -Urm) and UserXattr: true.
	lower, upper, work, target := "/srv/base", "/tmp/up", "/tmp/work", "/mnt/merged"
	m, err := kernel.Mount(context.Background(), lower, upper, work, target, kernel.Options{})
	if err != nil {
		log.Fatal(err) // e.g. "mount /mnt/merged: fsopen: operation not permitted [mounting needs CAP_SYS_ADMIN: ...]"
	}
	defer m.Unmount()
}

// The command may write under the root and its private TMPDIR; a write
// anywhere else fails inside it, unless the path is given to WithWritable
// (a build cache, say). What it writes there is not captured.
func ExampleWithWritable() {
	root := exampleRoot()
	defer os.RemoveAll(root)
	cache, _ := os.MkdirTemp("", "cowfs-cache-")
	defer os.RemoveAll(cache)
	f, _ := overlayfs.New(root)

	script := `echo built > "$COWFS_ROOT/out.txt"
if echo entry 2>/dev/null > "$0/entry"; then echo "cache written"; else echo "cache refused"; fi`
	for _, opts := range [][]kernel.RunOption{nil, {kernel.WithWritable(cache)}} {
		cmd := exec.Command("sh", "-c", script, cache)
		cmd.Stdout = os.Stdout
		var mode kernel.Mode
		opts = append(opts, kernel.WithModeReport(func(m kernel.Mode) { mode = m }))
		if err := kernel.Run(context.Background(), f, cmd, opts...); err != nil {
			log.Fatal(err)
		}
		fmt.Println("confined:", mode.Confined)
	}
	for _, c := range f.Changes() {
		fmt.Println(c)
	}
	// Output:
	// cache refused
	// confined: true
	// cache written
	// confined: true
	// A out.txt
}

func ExampleWithNetwork() {
	root := exampleRoot()
	defer os.RemoveAll(root)
	f, _ := overlayfs.New(root)

	// /proc/net/dev lists the interfaces of the reader's network namespace.
	const list = `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort`
	interfaces := func(opts ...kernel.RunOption) string {
		var out bytes.Buffer
		cmd := exec.Command("sh", "-c", list)
		cmd.Stdout = &out
		if err := kernel.Run(context.Background(), f, cmd, opts...); err != nil {
			log.Fatal(err)
		}
		return strings.Join(strings.Fields(out.String()), " ")
	}
	host, err := exec.Command("sh", "-c", list).Output()
	if err != nil {
		log.Fatal(err)
	}
	// By default the command has a network namespace of its own, with only
	// a loopback interface; WithNetwork gives it the host's.
	fmt.Println("default:", interfaces())
	fmt.Println("WithNetwork, the host's:", interfaces(kernel.WithNetwork()) == strings.Join(strings.Fields(string(host)), " "))
	// Output:
	// default: lo
	// WithNetwork, the host's: true
}

func ExampleWithDirRenames() {
	root := exampleRoot()
	defer os.RemoveAll(root)
	f, _ := overlayfs.New(root)

	// A command that renames a directory the root already has. As root
	// the overlay records the rename; in a user namespace it could not
	// (rename(2) would fail with EXDEV), and WithDirRenames makes Run
	// take the copy there, saying so in Mode.Fallback.
	cmd := exec.Command("sh", "-c", `cd "$COWFS_ROOT" && mv conf settings`)
	if err := kernel.Run(context.Background(), f, cmd, kernel.WithDirRenames()); err != nil {
		log.Fatal(err)
	}
	for _, c := range f.Changes() {
		fmt.Println(c)
	}
	// Output:
	// D conf
	// D conf/app.ini
	// A settings
	// A settings/app.ini
}
