//go:build linux

package overlayfs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/internal/longtest"
	"github.com/cowfs/cowfs/overlayfs"
)

// The identities of the AsUser differential: the user, its primary group,
// a supplementary group, and another user.
const (
	permUID   = 65534
	permGID   = 65534
	permSup   = 5000
	permOther = 1000
)

// permEntry is one entry of the permission fixture.
type permEntry struct {
	path     string
	mode     fs.FileMode // type bits: fs.ModeDir, fs.ModeSymlink
	uid, gid int
	target   string // symlink
}

// permFixture has every mode the issue names (0, 0500, 0700, 0755, 0644,
// 0600, sticky 01777, setgid 02775), entries of the user, of its groups
// and of other users. Parents come before children; modes are set after
// the children are made.
var permFixture = []permEntry{
	{"open", fs.ModeDir | 0o755, 0, 0, ""},
	{"open/f644", 0o644, 0, 0, ""},
	{"open/f600", 0o600, 0, 0, ""},
	{"open/f666", 0o666, 0, 0, ""},
	{"open/own", 0o644, permUID, permGID, ""},
	{"open/ownro", 0o444, permUID, permGID, ""},
	{"open/grp", 0o660, 0, permGID, ""},
	{"open/sup", 0o640, 0, permSup, ""},
	{"open/none", 0, 0, 0, ""},
	{"open/noother", 0o604, permOther, permGID, ""}, // group class: no access, no fall through
	{"d0", fs.ModeDir, 0, 0, ""},
	{"d0/x", 0o644, 0, 0, ""},
	{"d500", fs.ModeDir | 0o500, permUID, permGID, ""},
	{"d500/x", 0o644, permUID, permGID, ""},
	{"d700", fs.ModeDir | 0o700, 0, 0, ""},
	{"d700/x", 0o644, 0, 0, ""},
	{"d755", fs.ModeDir | 0o755, 0, 0, ""},
	{"d755/x", 0o644, 0, 0, ""},
	{"d755/sub", fs.ModeDir | 0o755, 0, 0, ""},
	{"d755/sub/y", 0o666, 0, 0, ""},
	{"d311", fs.ModeDir | 0o311, 0, 0, ""}, // search without read
	{"d311/x", 0o644, 0, 0, ""},
	{"d744", fs.ModeDir | 0o744, 0, 0, ""}, // read without search
	{"d744/x", 0o644, 0, 0, ""},
	{"tmp", fs.ModeDir | fs.ModeSticky | 0o777, 0, 0, ""},
	{"tmp/mine", 0o644, permUID, permGID, ""},
	{"tmp/theirs", 0o666, permOther, permOther, ""},
	{"tmp/rootf", 0o666, 0, 0, ""},
	{"tmp/dir", fs.ModeDir | 0o777, permOther, permOther, ""},
	{"sgid", fs.ModeDir | fs.ModeSetgid | 0o775, 0, permSup, ""},
	{"sgid/x", 0o664, 0, permSup, ""},
	{"sgw", fs.ModeDir | fs.ModeSetgid | 0o777, 0, permSup, ""}, // setgid, writable by all
	{"mine", fs.ModeDir | 0o755, permUID, permGID, ""},
	{"mine/a", 0o644, permUID, permGID, ""},
	{"mine/rootowned", 0o644, 0, 0, ""},
	{"mine/sg", 0o2755, permUID, permOther, ""},
	{"mine/sub", fs.ModeDir | 0o700, permUID, permGID, ""},
	{"mine/sub/b", 0o600, permUID, permGID, ""},
	{"mine/rd", fs.ModeDir | 0o555, 0, 0, ""}, // a root directory the user may not write
	{"mine/rd/z", 0o644, 0, 0, ""},
	{"other", fs.ModeDir | 0o775, permOther, permSup, ""},
	{"other/y", 0o660, permOther, permSup, ""},
	{"wdir", fs.ModeDir | 0o777, 0, 0, ""},
	{"wdir/z", 0o644, 0, 0, ""},
	{"wdir/zd", fs.ModeDir | 0o755, 0, 0, ""},
	{"wdir/zd/q", 0o644, 0, 0, ""},
	{"wdir/ze", fs.ModeDir | 0o755, permUID, permGID, ""},
	{"lnk", fs.ModeSymlink, 0, 0, "open/f644"},
	{"dlnk", fs.ModeSymlink, 0, 0, "d755"},
	{"tlnk", fs.ModeSymlink, 0, 0, "d700/x"},
}

// makePermFixture writes the fixture under dir, as root.
func makePermFixture(t testing.TB, dir string) {
	t.Helper()
	for _, e := range permFixture {
		p := filepath.Join(dir, e.path)
		var err error
		switch {
		case e.mode.IsDir():
			err = os.Mkdir(p, 0o700)
		case e.mode&fs.ModeSymlink != 0:
			err = os.Symlink(e.target, p)
		default:
			err = os.WriteFile(p, []byte(e.path), 0o600)
		}
		if err == nil && e.uid|e.gid != 0 { // root's already
			err = os.Lchown(p, e.uid, e.gid)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range slices.Backward(permFixture) {
		if e.mode&fs.ModeSymlink != 0 {
			continue
		}
		if err := os.Chmod(filepath.Join(dir, e.path), e.mode&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid|fs.ModeSetuid)); err != nil {
			t.Fatal(err)
		}
	}
}

// permNames are the names operations act on: the fixture's and new ones.
var permNames = func() []string {
	var out []string
	for _, e := range permFixture {
		out = append(out, e.path)
	}
	for _, d := range []string{"", "open/", "d0/", "d500/", "d700/", "d755/", "d311/", "d744/", "tmp/", "sgid/", "sgw/", "mine/", "mine/sub/", "mine/rd/", "other/", "wdir/", "wdir/zd/", "tmp/dir/", "dlnk/"} {
		out = append(out, d+"new", d+"n2")
	}
	return append(out, "lnk/x", "dlnk/x", "d0/x/y")
}()

// randPermOp returns a random operation on the fixture's names.
func randPermOp(r *rand.Rand) permOp {
	name := func() string { return permNames[r.IntN(len(permNames))] }
	pick := func(xs ...uint32) uint32 { return xs[r.IntN(len(xs))] }
	switch r.IntN(15) {
	case 14:
		return permOp{Op: []string{"fsread", "fsreaddir", "fsstat"}[r.IntN(3)], A: permNames[r.IntN(len(permFixture))]}
	case 13:
		return permOp{Op: "removeall", A: name()}
	case 0, 1:
		flags := []int{os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND,
			os.O_CREATE | os.O_WRONLY, os.O_CREATE | os.O_EXCL | os.O_WRONLY, os.O_CREATE | os.O_RDWR | os.O_TRUNC}
		return permOp{Op: "open", A: name(), Flag: flags[r.IntN(len(flags))], Mode: pick(0o644, 0o600, 0o666, 0o755, 0o2775)}
	case 2:
		return permOp{Op: "mkdir", A: name(), Mode: pick(0o755, 0o700, 0o777, 0o1777, 0o500, 0o2775)}
	case 3:
		return permOp{Op: "remove", A: name()}
	case 4:
		return permOp{Op: "rename", A: name(), B: name()}
	case 5:
		return permOp{Op: "chmod", A: name(), Mode: pick(0o644, 0o600, 0o755, 0o2755, 0o777, 0o1777, 0, 0o4755)}
	case 6:
		ids := []int{-1, permUID, 0, permOther}
		gids := []int{-1, permGID, permSup, 0, permOther}
		return permOp{Op: "chown", A: name(), UID: ids[r.IntN(len(ids))], GID: gids[r.IntN(len(gids))]}
	case 7:
		// Not with two zero times: Linux's utimensat then succeeds even
		// for a missing name, which overlayfs (with or without AsUser)
		// does not follow.
		return permOp{Op: "chtimes", A: name()}
	case 8:
		return permOp{Op: "symlink", A: name(), B: name()}
	case 9:
		return permOp{Op: "link", A: name(), B: name()}
	case 10:
		return permOp{Op: "readdir", A: name()}
	case 11:
		return permOp{Op: "lstat", A: name()}
	}
	return permOp{Op: "stat", A: name()}
}

// TestAsUserDifferential runs sequences of operations as uid 65534
// (without, then with, a supplementary group) on two sides: os in a child
// process that dropped to that identity, on a real copy of the fixture,
// and overlayfs.New(copy, AsUser(...)) here. The sequences are permCases,
// then random ones (30 per group set; 1,000 under COWFS_LONG). Each
// operation's outcome (errno, or what it read, listed or stat'ed) and the
// final trees (types, modes, owners, contents, link counts, symlink
// targets) must be equal: the overlay's view as root sees it, and for the
// first sequences the tree its Commit writes.
func TestAsUserDifferential(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the fixture has other users' entries and the oracle drops to uid 65534")
	}
	n := longtest.N(30, 1000)
	for _, groups := range [][]int{nil, {permSup}} {
		t.Run(fmt.Sprintf("groups=%v", groups), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(uint64(len(groups))*1e6+1, 24))
			seqs := slices.Clone(permCases)
			for range n {
				var ops []permOp
				for range 1 + r.IntN(10) {
					ops = append(ops, randPermOp(r))
				}
				seqs = append(seqs, ops)
			}
			permDifferential(t, seqs, groups)
		})
	}
}

// permCases are the rules of AsUser one by one, each a sequence the
// differential runs before its random ones: the cases a random run may
// miss.
var permCases = [][]permOp{
	{{Op: "fsread", A: "d700/x"}, {Op: "fsread", A: "d744/x"}, {Op: "fsread", A: "open/f600"}, {Op: "fsread", A: "open/sup"}, {Op: "fsreaddir", A: "d311"}, {Op: "fsreaddir", A: "d744"}, {Op: "fsstat", A: "d744/x"}, {Op: "fsstat", A: "tlnk"}, {Op: "fsreaddir", A: "tmp"}, {Op: "fsreaddir", A: "open/f600"}, {Op: "fsreaddir", A: "open/f644"}},
	{{Op: "removeall", A: "wdir/zd"}, {Op: "removeall", A: "mine"}, {Op: "removeall", A: "tmp"}, {Op: "removeall", A: "wdir/ze"}, {Op: "removeall", A: "d744"}, {Op: "removeall", A: "d311"}},
	{{Op: "mkdir", A: "mine/new", Mode: 0o755}, {Op: "mkdir", A: "mine/new/d", Mode: 0o755}, {Op: "open", A: "mine/new/d/f", Flag: os.O_CREATE | os.O_WRONLY, Mode: 0o644}, {Op: "chmod", A: "mine/new/d", Mode: 0o500}, {Op: "removeall", A: "mine/new"}, {Op: "chmod", A: "mine/new/d", Mode: 0o300}, {Op: "removeall", A: "mine/new"}, {Op: "chmod", A: "mine/new/d", Mode: 0o700}, {Op: "removeall", A: "mine/new"}, {Op: "removeall", A: "dlnk"}},
	{{Op: "chmod", A: "mine/sg", Mode: 0o2755}, {Op: "stat", A: "mine/sg"}}, // setgid dropped: not in group 1000
	{{Op: "chmod", A: "mine/a", Mode: 0o2755}, {Op: "stat", A: "mine/a"}},   // kept: in group 65534
	{{Op: "chown", A: "mine/a", UID: -1, GID: permSup}, {Op: "stat", A: "mine/a"}},
	{{Op: "chown", A: "mine/a", UID: permUID, GID: permOther}},
	{{Op: "chown", A: "mine/a", UID: 0, GID: -1}},
	{{Op: "chown", A: "open/f644", UID: 0, GID: -1}}, // its own uid, not the user's
	{{Op: "chown", A: "open/f644", UID: -1, GID: -1}},
	{{Op: "chtimes", A: "open/f666"}, {Op: "chtimes", A: "mine/a"}},
	{{Op: "open", A: "sgid/new", Flag: os.O_CREATE | os.O_WRONLY, Mode: 0o644}, {Op: "stat", A: "sgid/new"}},
	{{Op: "open", A: "sgid/new", Flag: os.O_CREATE | os.O_WRONLY, Mode: 0o2775}, {Op: "stat", A: "sgid/new"}, {Op: "open", A: "mine/new", Flag: os.O_CREATE | os.O_WRONLY, Mode: 0o2775}, {Op: "stat", A: "mine/new"}},
	{{Op: "chmod", A: "mine/a", Mode: 0o6755}, {Op: "open", A: "mine/a", Flag: os.O_WRONLY}, {Op: "stat", A: "mine/a"}},
	{{Op: "chmod", A: "mine/a", Mode: 0o2644}, {Op: "open", A: "mine/a", Flag: os.O_RDWR | os.O_TRUNC}, {Op: "stat", A: "mine/a"}},
	{{Op: "chmod", A: "mine/sg", Mode: 0o4644}, {Op: "open", A: "mine/sg", Flag: os.O_RDONLY | os.O_TRUNC}, {Op: "stat", A: "mine/sg"}},
	{{Op: "open", A: "sgw/n2", Flag: os.O_CREATE | os.O_RDONLY, Mode: 0o2775}, {Op: "stat", A: "sgw/n2"}, {Op: "open", A: "mine/n2", Flag: os.O_CREATE | os.O_RDONLY, Mode: 0o2775}, {Op: "stat", A: "mine/n2"}},
	{{Op: "mkdir", A: "sgid/new", Mode: 0o755}, {Op: "stat", A: "sgid/new"}, {Op: "mkdir", A: "sgid/new/d", Mode: 0o700}, {Op: "stat", A: "sgid/new/d"}},
	{{Op: "open", A: "open/noother", Flag: os.O_RDONLY}, {Op: "open", A: "open/grp", Flag: os.O_RDWR}, {Op: "open", A: "open/sup", Flag: os.O_RDONLY}},
	{{Op: "open", A: "open/own", Flag: os.O_WRONLY | os.O_TRUNC}, {Op: "open", A: "open/ownro", Flag: os.O_WRONLY | os.O_TRUNC}, {Op: "open", A: "open/ownro", Flag: os.O_CREATE | os.O_RDONLY}},
	{{Op: "stat", A: "d744/."}, {Op: "stat", A: "d311/."}, {Op: "readdir", A: "d744/."}, {Op: "stat", A: "d744/.."}, {Op: "mkdir", A: "d744/."}, {Op: "stat", A: "open/f644/."}},
	{{Op: "readdirinfo", A: "d744"}, {Op: "readdirinfo", A: "d755"}, {Op: "readdirinfo", A: "d311"}, {Op: "mkdir", A: "mine/new", Mode: 0o755}, {Op: "chmod", A: "mine/new", Mode: 0o644}, {Op: "readdirinfo", A: "mine/new"}},
	{{Op: "readdir", A: "d311"}, {Op: "stat", A: "d311/x"}, {Op: "readdir", A: "d744"}, {Op: "stat", A: "d744/x"}, {Op: "lstat", A: "d744"}},
	{{Op: "remove", A: "tmp/theirs"}, {Op: "remove", A: "tmp/mine"}, {Op: "rename", A: "tmp/rootf", B: "tmp/new"}, {Op: "rename", A: "tmp/mine", B: "tmp/rootf"}},
	{{Op: "rename", A: "mine/rd", B: "wdir/new"}, {Op: "rename", A: "wdir/zd", B: "wdir/new"}, {Op: "rename", A: "wdir/ze", B: "mine/new"}},
	{{Op: "remove", A: "mine/rd/z"}, {Op: "remove", A: "mine/rd"}, {Op: "remove", A: "d500/x"}, {Op: "remove", A: "wdir/zd"}},
	{{Op: "link", A: "open/f666", B: "wdir/l"}, {Op: "link", A: "open/f644", B: "wdir/l2"}, {Op: "link", A: "mine/rootowned", B: "mine/l"}, {Op: "link", A: "mine/a", B: "d500/l"}},
	{{Op: "symlink", A: "x", B: "d500/s"}, {Op: "symlink", A: "x", B: "mine/s"}, {Op: "lstat", A: "mine/s"}},
	{{Op: "stat", A: "tlnk"}, {Op: "stat", A: "dlnk/x"}, {Op: "open", A: "lnk", Flag: os.O_WRONLY}},
	{{Op: "mkdir", A: "mine/new", Mode: 0o777}, {Op: "chmod", A: "mine/new", Mode: 0}, {Op: "open", A: "mine/new/f", Flag: os.O_CREATE | os.O_WRONLY, Mode: 0o644}, {Op: "chmod", A: "mine/new", Mode: 0o300}, {Op: "open", A: "mine/new/f", Flag: os.O_CREATE | os.O_WRONLY, Mode: 0o644}, {Op: "readdir", A: "mine/new"}},
}

// permDifferential runs each sequence of operations on both sides (see
// TestAsUserDifferential) as uid 65534, gid 65534 and groups.
func permDifferential(t *testing.T, ops [][]permOp, groups []int) {
	// A directory every user may search: t.TempDir's are root's, 0700.
	base, err := os.MkdirTemp("", "cowfs-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	// The test binary, where the user may run it.
	exe := filepath.Join(base, "test.bin")
	if err := copyExe(exe); err != nil {
		t.Fatal(err)
	}
	seqs := make([]permSeq, len(ops))
	for i := range seqs {
		seqs[i] = permSeq{Root: filepath.Join(base, fmt.Sprint("os", i)), Ops: ops[i]}
		if err := os.Mkdir(seqs[i].Root, 0o755); err != nil {
			t.Fatal(err)
		}
		makePermFixture(t, seqs[i].Root)
	}
	want := runPermChild(t, exe, base, seqs, groups)
	// The overlays' lowers: one each for the sequences that commit, one
	// shared by the others (an overlay never writes its lower).
	const commits = 5
	shared := filepath.Join(base, "ov")
	for i, s := range seqs {
		low := shared
		if i < commits {
			low = filepath.Join(base, fmt.Sprint("ov", i))
		}
		if i <= commits {
			if err := os.Mkdir(low, 0o755); err != nil {
				t.Fatal(err)
			}
			makePermFixture(t, low)
		}
		fsys, err := overlayfs.New(low, overlayfs.AsUser(permUID, permGID, groups...), overlayfs.WithUmask(0o022))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, op := range s.Ops {
			got = append(got, runPermOp(fsys, low, op))
		}
		bad := false
		for j := range s.Ops {
			if j >= len(want[i]) || got[j] != want[i][j] {
				bad = true
			}
		}
		// The overlay's view as root sees it; the first sequences also
		// commit it and compare the disk (Commit's fsyncs cost).
		restore := overlayfs.Unchecked(fsys)
		wt, gt := permTree(t, osLinker{&afero.OsFs{}}, s.Root), permTree(t, fsys, low)
		restore()
		if i < commits && wt == gt {
			if err := fsys.Commit(); err != nil {
				t.Fatalf("seq %d: commit: %v", i, err)
			}
			gt = permTree(t, osLinker{&afero.OsFs{}}, low)
		}
		if bad || wt != gt {
			var b strings.Builder
			for j, op := range s.Ops {
				w := ""
				if j < len(want[i]) {
					w = want[i][j]
				}
				mark := "  "
				if w != got[j] {
					mark = "!!"
				}
				fmt.Fprintf(&b, "%s %+v: os %q, overlay %q\n", mark, op, w, got[j])
			}
			if wt != gt {
				fmt.Fprintf(&b, "tree differs:\n%s", lineDiff(wt, gt))
			}
			t.Fatalf("groups %v, sequence %d:\n%s", groups, i, b.String())
		}
	}
}

// runPermChild runs the sequences with os in a child process of uid
// 65534, gid 65534 and groups, and returns the outcomes.
func runPermChild(t *testing.T, exe, base string, seqs []permSeq, groups []int) [][]string {
	spec := filepath.Join(base, "spec.json")
	data, err := json.Marshal(seqs)
	if err == nil {
		err = os.WriteFile(spec, data, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	gs := make([]uint32, len(groups))
	for i, g := range groups {
		gs[i] = uint32(g)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), permChildEnv+"="+spec)
	cmd.Dir = base
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: permUID, Gid: permGID, Groups: gs}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	var res [][]string
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("child output: %v\n%s", err, out)
	}
	if len(res) != len(seqs) {
		t.Fatalf("child ran %d sequences of %d", len(res), len(seqs))
	}
	return res
}

// copyExe copies the running test binary to dst, executable by all.
func copyExe(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// permTree describes the tree under root as root sees it through fsys:
// per entry its type and mode bits, owner, and content and link count or
// target (times are not compared: each side has its own clock).
func permTree(t *testing.T, fsys permFs, root string) string {
	t.Helper()
	var b strings.Builder
	err := afero.Walk(fsys, root, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(&b, "%s %v %d:%d", rel, fi.Mode(), st.Uid, st.Gid)
		switch {
		case fi.Mode().IsRegular():
			data, err := afero.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q nlink=%d", data, st.Nlink)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := fsys.(afero.LinkReader).ReadlinkIfPossible(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " -> %s", target)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// lineDiff lists the lines of want missing in got ("-") and the reverse ("+").
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}
