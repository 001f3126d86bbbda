package kernel

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// quotaScript fills the disk: a 20,000-byte file where 8 KiB fit, then
// directories until the inodes run out, then a write to a file that
// exists. It reports each step's status.
const quotaScript = `cd "$COWFS_ROOT"
: > status
head -c 20000 /dev/zero > big 2>/dev/null; echo "big $?"
for i in 1 2 3 4 5 6 7 8; do mkdir d$i 2>/dev/null || { echo "mkdir d$i failed"; break; }; done
echo x >> status || echo "status: write failed"
`

// TestRunQuota: a command run on an Fs with WithQuota(8192, 6) sees the
// same ENOSPC, and leaves the same tree, as a plain run of it on a real
// tmpfs mounted with size=8192,nr_inodes=7 (the oracle); the layer holds
// what it managed to write and counts it.
func TestRunQuota(t *testing.T) {
	needMount(t)
	// The oracle: a plain run in a tmpfs of the quota's size.
	mem := t.TempDir()
	if err := unix.Mount("tmpfs", mem, "tmpfs", 0, "size=8192,nr_inodes=7"); err != nil {
		t.Skipf("mounting a tmpfs: %v", err)
	}
	defer unix.Unmount(mem, unix.MNT_DETACH)
	plain := exec.Command("sh", "-c", quotaScript)
	plain.Env = append(os.Environ(), "COWFS_ROOT="+mem)
	want, err := plain.Output()
	if err != nil {
		t.Fatalf("plain run: %v", err)
	}

	root := t.TempDir()
	f, err := overlayfs.New(root, overlayfs.WithQuota(8192, 6))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command("sh", "-c", quotaScript)
	cmd.Stdout = &out
	var mode Mode
	if err := Run(context.Background(), f, cmd, WithTempDir(os.TempDir()), func(c *runConfig) { c.report = func(m Mode) { mode = m } }); err != nil {
		t.Fatalf("Run: %v (output %q)", err, out.String())
	}
	if mode.Kind != ModeOverlay {
		t.Skipf("ran in mode %v: the quota applies to the overlay mode", mode.Kind)
	}
	if out.String() != string(want) {
		t.Errorf("the command saw:\n%s\nin a real tmpfs:\n%s", out.String(), want)
	}
	if w, g := quotaTree(t, afero.NewOsFs(), mem), quotaTree(t, f, root); w != g {
		t.Errorf("trees differ:\ntmpfs:\n%s\nlayer:\n%s", w, g)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mem, &st); err != nil {
		t.Fatal(err)
	}
	wantUse := overlayfs.Usage{Bytes: int64(st.Blocks-st.Bfree) * int64(st.Bsize), Inodes: int64(st.Files-st.Ffree) - 1}
	if got := f.Usage(); got != wantUse {
		t.Errorf("the layer counts %+v; the tmpfs holds %+v", got, wantUse)
	}
	t.Logf("command output:\n%s", out.String())
}

// quotaTree lists the tree under dir: names, types and sizes.
func quotaTree(t *testing.T, fsys afero.Fs, dir string) string {
	var sb strings.Builder
	err := afero.Walk(fsys, dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if fi.IsDir() {
			fmt.Fprintf(&sb, "%s/\n", rel)
		} else {
			fmt.Fprintf(&sb, "%s %d\n", rel, fi.Size())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}
