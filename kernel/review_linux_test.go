package kernel

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestReviewReadOnlyPassedFilesStayReadOnly: a confined command given
// descriptors opened read-only (as extra files) on a file of the real root
// and on one outside every writable path may read them, but reopening them
// for writing by /proc/self/fd/N must fail as any other write there does:
// confineSelf grants write rights on every regular file passed, whatever
// the descriptor's access mode, so the command wrote the real root (under
// the overlay, unseen by the layer) and the outside file. Oracle: the disk
// around the root, as os sees it, before and after.
func TestReviewReadOnlyPassedFilesStayReadOnly(t *testing.T) {
	needLandlock(t)
	for _, mode := range runModes() {
		t.Run(mode.name, func(t *testing.T) {
			mode.require(t)
			base := t.TempDir()
			root, out := filepath.Join(base, "root"), filepath.Join(base, "outside")
			for _, d := range []string{root, out} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range []string{filepath.Join(root, "in.txt"), filepath.Join(out, "out.txt")} {
				if err := os.WriteFile(p, []byte("keep\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before, err := dirTree(base)
			if err != nil {
				t.Fatal(err)
			}
			in, err := os.Open(filepath.Join(root, "in.txt"))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			outF, err := os.Open(filepath.Join(out, "out.txt"))
			if err != nil {
				t.Fatal(err)
			}
			defer outF.Close()
			f := newOverlay(t, root)
			cmd := exec.Command("sh", "-c", `cat <&3 >/dev/null; echo pwned >> /proc/self/fd/3; echo pwned >> /proc/self/fd/4; true`)
			cmd.Dir, cmd.ExtraFiles = root, []*os.File{in, outF}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := mode.run(context.Background(), f, cmd); err != nil {
				t.Logf("Run: %v\n%s", err, stderr.String())
			}
			after, err := dirTree(base)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffTrees(before, after, cmpOpts{times: true, owners: true}); err != nil {
				t.Errorf("a write through a read-only descriptor reached the disk:\n%v", err)
			}
		})
	}
}
