package overlayfs_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/overlayfs"
)

const (
	rdonly = os.O_RDONLY
	wronly = os.O_WRONLY
	rdwr   = os.O_RDWR
	creat  = os.O_CREATE
	excl   = os.O_EXCL
	trunc  = os.O_TRUNC
	appnd  = os.O_APPEND
)

type scenario struct {
	name    string
	fixture string // default "project"
	ops     []op
	known   string // a divergence from os still open in overlayfs: the scenario is skipped with this reason
}

// runScenarios runs every scenario as a parallel subtest, each on a fresh os
// copy of its fixture and on cowfs over the shared, never-modified original.
func runScenarios(t *testing.T, scenarios []scenario) {
	t.Helper()
	// Each fixture is materialized and walked once; origTree checks at the
	// end that no scenario modified it.
	origs := map[string]string{}
	views := map[string]map[string]entry{}
	for _, sc := range scenarios {
		fx := sc.fixture
		if fx == "" {
			fx = "project"
		}
		if origs[fx] == "" {
			origs[fx] = origTree(t, fx)
			views[fx] = mustWalk(t, osTarget{}, origs[fx])
		}
	}
	for _, sc := range scenarios {
		fx := sc.fixture
		if fx == "" {
			fx = "project"
		}
		orig, view := origs[fx], views[fx]
		t.Run(sc.name, func(t *testing.T) {
			if sc.known != "" {
				t.Skip("known divergence: " + sc.known)
			}
			t.Parallel()
			errs := differentialView(t, orig, view, sc.ops)
			if err := errors.Join(errs...); err != nil {
				t.Errorf("ops:\n\t%s\nmismatches:\n%v", opList(sc.ops), err)
			}
		})
	}
}

func opList(ops []op) string {
	var s []string
	for i, o := range ops {
		s = append(s, fmt.Sprintf("%d %s", i, o.desc))
	}
	return strings.Join(s, "\n\t")
}

// openTargets are the kinds of name an OpenFile can meet in the "small"
// fixture, each with the setup that makes it.
var openTargets = []struct {
	name  string
	rel   string
	setup []op
}{
	{"missing", "new.txt", nil},
	{"lower", "a", nil},
	{"lower-0600", "p", nil},
	{"lower-0755", "x", nil},
	{"layer", "layer.txt", []op{writeFile("layer.txt", "made in the layer\n", 0o640)}},
	{"copied-up", "d/b", []op{writeFile("d/b", "new bytes\n", 0o644)}},
	{"deleted", "d/c", []op{remove("d/c")}},
	{"dir", "d", nil},
	{"empty-dir", "d/e", nil},
	{"layer-dir", "newdir", []op{mkdir("newdir", 0o755)}},
	{"symlink", "l", nil},
	{"symlink-to-dir", "ld", nil},
	{"dangling", "m", nil},
	{"layer-symlink", "mylink", []op{symlink("d/b", "mylink")}},
	{"layer-dangling", "mylink", []op{symlink("gone/file", "mylink")}},
	{"missing-parent", "nodir/x", nil},
	{"under-file", "a/x", nil},
	{"trailing-slash-file", "a/", nil},
	{"trailing-slash-missing", "new/", nil},
	{"trailing-slash-dir", "d/e/", nil},
	{"dotdot", "d/../a", nil},
	{"through-dir-link", "ld/b", nil},
}

// TestDifferentialOpenFlags opens every kind of target with every flag
// combination, then writes, seeks, reads, stats and closes the handle.
func TestDifferentialOpenFlags(t *testing.T) {
	var scs []scenario
	for _, tg := range openTargets {
		for _, acc := range []int{rdonly, wronly, rdwr} {
			for extra := 0; extra < 16; extra++ {
				flag := acc
				for i, bit := range []int{creat, excl, trunc, appnd} {
					if extra&(1<<i) != 0 {
						flag |= bit
					}
				}
				if flag&excl != 0 && flag&creat == 0 && tg.name != "missing" && tg.name != "lower" && tg.name != "dir" {
					continue // O_EXCL without O_CREATE is ignored; three targets prove it
				}
				ops := append([]op(nil), tg.setup...)
				ops = append(ops,
					openFile(0, tg.rel, flag, 0o640),
					fstat(0),
					write(0, "XY"),
					seek(0, 1, io.SeekStart),
					write(0, "z"),
					seek(0, 0, io.SeekCurrent),
					seek(0, 0, io.SeekStart),
					read(0, 100),
					read(0, 100),
					fstat(0),
					closeH(0),
					closeH(0),
					lstat(tg.rel),
					readFile(tg.rel),
				)
				scs = append(scs, scenario{name: tg.name + "/" + strings.ReplaceAll(flagString(flag), "|", "+"), fixture: "small", ops: ops})
			}
		}
	}
	runScenarios(t, scs)
}

var (
	t1 = time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC)
	t2 = time.Date(2011, 12, 13, 14, 15, 16, 0, time.UTC)
)

func TestDifferentialHandles(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "read-eof", ops: []op{open(0, "go.mod"), read(0, 5), read(0, 1000), read(0, 10), read(0, 0), closeH(0)}},
		{name: "read-zero-empty", ops: []op{create(0, "e"), read(0, 0), read(0, 4), closeH(0)}},
		{name: "readat", ops: []op{open(0, "README.md"), readAt(0, 4, 0), readAt(0, 4, 10), readAt(0, 100, 2), readAt(0, 4, 1000), readAt(0, 0, 1000), readAt(0, 4, -1), read(0, 3), closeH(0)}},
		{name: "readat-does-not-move-offset", ops: []op{open(0, "README.md"), read(0, 2), readAt(0, 5, 5), read(0, 2)}},
		{name: "write-on-rdonly", ops: []op{open(0, "README.md"), write(0, "x"), writeAt(0, "x", 0), writeString(0, "x"), truncH(0, 0), read(0, 6), readFile("README.md")}},
		{name: "read-on-wronly", ops: []op{openFile(0, "README.md", wronly, 0), read(0, 4), readAt(0, 4, 0), write(0, "##"), readFile("README.md")}},
		{name: "write-past-end-makes-hole", ops: []op{openFile(0, "go.mod", rdwr, 0), seek(0, 100, io.SeekEnd), write(0, "tail"), fstat(0), seek(0, 0, io.SeekStart), read(0, 300), closeH(0), readFile("go.mod")}},
		{name: "writeat-past-end", ops: []op{openFile(0, "new", rdwr|creat, 0o644), writeAt(0, "abc", 10), fstat(0), read(0, 100), readAt(0, 20, 0), writeAt(0, "x", -3)}},
		{name: "writeat-append-mode", ops: []op{openFile(0, "go.mod", wronly|appnd, 0), writeAt(0, "x", 0), write(0, "y"), readFile("go.mod")}},
		{name: "append-ignores-seek", ops: []op{openFile(0, "go.mod", rdwr|appnd, 0), seek(0, 0, io.SeekStart), write(0, "END"), seek(0, 0, io.SeekCurrent), seek(0, 0, io.SeekStart), read(0, 200)}},
		{name: "seek", ops: []op{open(0, "README.md"), seek(0, 3, io.SeekStart), read(0, 2), seek(0, 2, io.SeekCurrent), read(0, 2), seek(0, -4, io.SeekEnd), read(0, 10), seek(0, -100, io.SeekCurrent), seek(0, 0, 7), seek(0, 1<<40, io.SeekStart), read(0, 1)}},
		{name: "truncate", ops: []op{openFile(0, "README.md", rdwr, 0), truncH(0, 5), fstat(0), read(0, 100), truncH(0, 12), seek(0, 0, io.SeekStart), read(0, 100), truncH(0, -1), closeH(0), readFile("README.md")}},
		{name: "truncate-then-write-at-offset", ops: []op{openFile(0, "main.go", rdwr, 0), read(0, 10), truncH(0, 0), write(0, "Z"), closeH(0), readFile("main.go")}},
		{name: "sync", ops: []op{openFile(0, "README.md", rdwr, 0), syncH(0), write(0, "x"), syncH(0), closeH(0), syncH(0)}},
		{name: "stat-is-snapshot", ops: []op{openFile(0, "a.txt", rdwr|creat, 0o600), fstat(0), write(0, "12345"), fstat(0), chmod("a.txt", 0o644), fstat(0)}},
		{name: "use-after-close", ops: []op{openFile(0, "README.md", rdwr, 0), closeH(0), read(0, 1), readAt(0, 1, 0), write(0, "x"), writeAt(0, "x", 0), seek(0, 0, io.SeekStart), truncH(0, 0), fstat(0), readdirnames(0, -1), closeH(0)}},
		{name: "use-after-close-lower-unread", ops: []op{openFile(0, "link-to-internal/util/util.go", rdonly, 0), closeH(0), readdirnames(0, -1), readdir(0, 1), readDirH(0, -1), open(1, "main.go"), closeH(1), readdirnames(1, 2), fstat(1), read(1, 1)}},
		{name: "dir-handle", ops: []op{open(0, "internal"), read(0, 10), readAt(0, 1, 0), write(0, "x"), fstat(0), seek(0, 0, io.SeekStart), truncH(0, 0), closeH(0)}},
		{name: "dir-open-for-write", ops: []op{openFile(0, "internal", wronly, 0), openFile(1, "internal", rdwr, 0), openFile(2, "empty", rdonly|creat, 0o755), openFile(3, "internal/", rdonly, 0)}},
		{name: "readdir-on-file", ops: []op{open(0, "README.md"), readdir(0, -1), readdirnames(0, 2), readDirH(0, -1)}},
		{name: "two-handles-see-writes", ops: []op{
			openFile(0, "README.md", rdonly, 0), // opened before the copy-up
			openFile(1, "README.md", rdwr, 0),
			write(1, "CHANGED"),
			read(0, 100),
			openFile(2, "README.md", rdonly, 0),
			read(2, 100),
			writeAt(1, "!!", 2),
			readAt(0, 100, 0),
			truncH(1, 3),
			readAt(2, 100, 0),
			fstat(0),
		}},
		{name: "two-writers-one-lower", ops: []op{
			openFile(0, "go.mod", wronly, 0), openFile(1, "go.mod", wronly|appnd, 0),
			write(0, "AA"), write(1, "<end>"), write(0, "BB"), write(1, "<end2>"),
			closeH(0), closeH(1), readFile("go.mod"),
		}},
		{name: "handle-survives-remove", ops: []op{open(0, "README.md"), remove("README.md"), read(0, 100), fstat(0), lstat("README.md")}},
		{name: "handle-survives-rename", ops: []op{openFile(0, "README.md", rdwr, 0), rename("README.md", "R2.md"), write(0, "moved"), closeH(0), readFile("R2.md"), readFile("README.md")}},
		{name: "early-handle-after-copy-up-and-remove", ops: []op{open(0, "go.mod"), writeFile("go.mod", "0123456789abcdefghij", 0o644), remove("go.mod"), seek(0, 0, io.SeekEnd), seek(0, 0, io.SeekStart), read(0, 100), fstat(0)}},
		{name: "early-handle-after-copy-up-and-rename", ops: []op{open(0, "go.mod"), writeFile("go.mod", "0123456789abcdefghij", 0o644), rename("go.mod", "g"), read(0, 100), writeFile("g", "again", 0o644), readAt(0, 100, 0)}},
		{name: "handle-to-new-file-after-remove", ops: []op{create(0, "n"), write(0, "x"), remove("n"), write(0, "y"), closeH(0), lstat("n")}},
		// Found by FuzzOps; each a short reproduction.
		{name: "zero-length-read-on-wronly", ops: []op{openFile(0, "go.mod", wronly, 0), read(0, 0), readAt(0, 0, 0), openFile(1, "go.mod", rdonly, 0), write(1, ""), writeAt(1, "", 0), writeString(1, ""), closeH(1), read(1, 0), write(1, "")}},
		{name: "zero-length-io-on-dir", ops: []op{open(0, "internal"), read(0, 0), readAt(0, 0, 0), write(0, ""), writeAt(0, "", 0), writeAt(0, "", 5)}},
		{name: "negative-offset-on-dir", ops: []op{open(0, "internal"), readAt(0, 1, -4), readAt(0, 1, 0), writeAt(0, "x", -1)}},
		{name: "negative-offset-on-rdonly", ops: []op{open(0, "link-to-internal"), writeAt(0, "x", -4), writeAt(0, "", -4), open(1, "README.md"), writeAt(1, "x", -1), writeAt(1, "", -1)}},
		{name: "writeat-on-closed-append", ops: []op{openFile(0, "go.mod", wronly|appnd, 0), closeH(0), writeAt(0, "", 0), writeAt(0, "x", 0)}},
		{name: "create-truncates", ops: []op{create(0, "README.md"), fstat(0), closeH(0), readFile("README.md"), create(1, "link-to-readme"), write(1, "via link"), closeH(1), readFile("README.md")}},
	})
}

func TestDifferentialReaddir(t *testing.T) {
	merged := []op{
		writeFile("internal/util/added.go", "package util\n", 0o644),
		mkdir("internal/util/zz", 0o755),
		remove("internal/util/util_test.go"),
		writeFile("internal/util/util.go", "package util\n", 0o644),
		symlink("util.go", "internal/util/aa-link"),
	}
	var scs []scenario
	for _, n := range []int{-1, 0, 1, 3} {
		for _, kind := range []string{"Readdir", "Readdirnames", "ReadDir"} {
			list := listCall(kind, 0, n)
			pre := func(ops ...op) []op { return append(append([]op(nil), merged...), ops...) }
			scs = append(scs,
				scenario{name: fmt.Sprintf("%s/%d/lower", kind, n), ops: []op{open(0, "internal/util"), list}},
				scenario{name: fmt.Sprintf("%s/%d/root", kind, n), ops: []op{open(0, ""), list}},
				scenario{name: fmt.Sprintf("%s/%d/merged", kind, n), ops: pre(open(0, "internal/util"), list)},
				scenario{name: fmt.Sprintf("%s/%d/empty", kind, n), ops: []op{open(0, "empty"), list}},
				scenario{name: fmt.Sprintf("%s/%d/layer-dir", kind, n), ops: []op{mkdir("nd", 0o700), writeFile("nd/b", "", 0o644), writeFile("nd/a", "", 0o644), open(0, "nd"), list}},
				scenario{name: fmt.Sprintf("%s/%d/via-symlink", kind, n), ops: pre(open(0, "link-to-internal/util"), list)},
				scenario{name: fmt.Sprintf("%s/%d/opaque", kind, n), ops: []op{removeAll("internal"), mkdir("internal", 0o755), writeFile("internal/new", "n", 0o644), open(0, "internal"), list}},
				scenario{name: fmt.Sprintf("%s/%d/renamed-dir", kind, n), ops: []op{rename("internal", "moved"), open(0, "moved/util"), list}},
			)
		}
	}
	scs = append(scs,
		scenario{name: "paging-mixed", ops: append(merged, open(0, "internal/util"), readdirnames(0, -1), open(1, "internal/util"), read(1, 1))},
		scenario{name: "listing-after-changes-while-open", ops: []op{open(0, "docs"), writeFile("docs/zzz", "z", 0o644), readdirnames(0, -1)}},
	)
	runScenarios(t, scs)
}

func TestDifferentialMkdirRemove(t *testing.T) { runScenarios(t, mkdirRemoveScenarios()) }

func mkdirRemoveScenarios() []scenario {
	return []scenario{
		{name: "mkdir", ops: []op{mkdir("new", 0o750), lstat("new"), mkdir("new", 0o750), mkdir("README.md", 0o755), mkdir("internal", 0o755), mkdir("nodir/x", 0o755), mkdir("README.md/x", 0o755), mkdir("dangling", 0o755), mkdir("link-to-internal", 0o755), mkdir("new2/", 0o700), lstat("new2"), mkdir("", 0o755), mkdir("internal/../new3", 0o755), lstat("new3")}},
		{name: "mkdir-perm-bits", ops: []op{mkdir("p1", 0o777), mkdir("p2", 0), mkdir("p3", 0o1777), lstat("p1"), lstat("p2"), lstat("p3")}},
		{name: "mkdirall", ops: []op{mkdirAll("x/y/z", 0o755), lstat("x"), lstat("x/y/z"), mkdirAll("x/y/z", 0o755), mkdirAll("internal/util", 0o700), lstat("internal/util"), mkdirAll("README.md/q", 0o755), mkdirAll("README.md", 0o755), mkdirAll("link-to-internal/new/deep", 0o755), lstat("internal/new/deep"), mkdirAll("dangling/x", 0o755), mkdirAll("a/b/c/d/e/", 0o755)}},
		{name: "remove-lower-file", ops: []op{remove("README.md"), lstat("README.md"), readFile("README.md"), remove("README.md"), readFile("link-to-readme"), stat("link-to-readme")}},
		{name: "remove-lower-dirs", ops: []op{remove("empty"), lstat("empty"), remove("internal"), remove("a/b/c/d"), remove("a/b/c"), remove("a/b/c/file.txt"), remove("a/b/c"), lstat("a/b/c"), readdirnamesOf("a/b")}},
		{name: "remove-symlinks", ops: []op{remove("link-to-internal"), lstat("internal/util/util.go"), remove("dangling"), lstat("dangling"), remove("link-to-readme"), readFile("README.md")}},
		{name: "remove-trailing-slash", ops: []op{remove("README.md/"), remove("empty/"), lstat("empty"), remove("link-to-internal/"), lstat("link-to-internal")}},
		{name: "remove-layer", ops: []op{writeFile("n.txt", "n", 0o644), remove("n.txt"), lstat("n.txt"), mkdir("nd", 0o755), writeFile("nd/f", "f", 0o644), remove("nd"), remove("nd/f"), remove("nd"), lstat("nd")}},
		{name: "remove-missing", ops: []op{remove("nope"), remove("nodir/x"), remove("README.md/x"), remove(""), remove("internal/util/..")}},
		{name: "removeall-lower-dir", ops: []op{removeAll("internal"), lstat("internal"), lstat("internal/util/util.go"), readFile("link-to-internal/util/util.go"), removeAll("internal"), removeAll("missing"), removeAll("README.md/x"), removeAll("docs/my notes.txt")}},
		{name: "removeall-then-recreate-is-opaque", ops: []op{removeAll("internal"), mkdir("internal", 0o755), readdirnamesOf("internal"), lstat("internal/util"), mkdirAll("internal/util", 0o755), readdirnamesOf("internal/util"), readFile("internal/util/util.go")}},
		{name: "remove-children-then-dir-then-recreate", ops: []op{remove("a/b/c/d"), remove("a/b/c/file.txt"), remove("a/b/c"), mkdir("a/b/c", 0o700), readdirnamesOf("a/b/c"), lstat("a/b/c")}},
		{name: "removeall-via-symlink", ops: []op{removeAll("link-to-internal"), lstat("link-to-internal"), lstat("internal/util"), removeAll("link-to-internal/util")}},
		{name: "removeall-merged", ops: []op{writeFile("docs/new.md", "x", 0o644), mkdirAll("docs/sub/deeper", 0o755), removeAll("docs"), lstat("docs"), mkdir("docs", 0o755), readdirnamesOf("docs")}},
		{name: "replace-file-with-dir", ops: []op{remove("go.mod"), mkdir("go.mod", 0o755), writeFile("go.mod/inner", "i", 0o644), lstat("go.mod")}},
		{name: "replace-dir-with-file", ops: []op{removeAll("cmd"), writeFile("cmd", "now a file", 0o644), lstat("cmd"), lstat("cmd/tool")}},
		{name: "replace-symlink-target", ops: []op{remove("link-to-readme"), symlink("go.mod", "link-to-readme"), readFile("link-to-readme")}},
	}
}

// TestDifferentialRelativeNames reruns scenarios with names relative to the
// working directory, as os takes them: the os side names its copy "orig",
// the cowfs side reaches its root through "../..". Not parallel: t.Chdir.
func TestDifferentialRelativeNames(t *testing.T) {
	orig := origTree(t, "project")
	view := mustWalk(t, osTarget{}, orig)
	scs := slices.Concat(mkdirRemoveScenarios(), renameScenarios(), symlinkScenarios(), pathScenarios(), metadataScenarios())
	for _, sc := range scs {
		if sc.fixture != "" && sc.fixture != "project" {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			if sc.known != "" {
				t.Skip("known divergence: " + sc.known)
			}
			copyDir := osCopy(t, orig)
			cwd := filepath.Dir(copyDir)
			t.Chdir(cwd)
			c := newCow(t, orig)
			cowRel, err := filepath.Rel(cwd, c.Root())
			if err != nil {
				t.Fatal(err)
			}
			want := newEnv(osTarget{}, filepath.Base(copyDir), false)
			got := newEnv(c, cowRel, true)
			if err := errors.Join(compareRun(t, sc.ops, view, copyDir, c, want, got)...); err != nil {
				t.Errorf("ops (relative to %s):\n\t%s\nmismatches:\n%v", cwd, opList(sc.ops), err)
			}
		})
	}
}

// linuxOnly returns why where the os oracle is not Linux, "" on Linux.
func linuxOnly(why string) string {
	if runtime.GOOS == "linux" {
		return ""
	}
	return why
}

// readdirnamesOf opens rel and lists all its names.
func readdirnamesOf(rel string) op {
	return op{fmt.Sprintf("Readdirnames(%q)", rel), func(e *env) string {
		f, err := e.fs.Open(e.p(rel))
		if err != nil {
			return e.res(err, "")
		}
		defer f.Close()
		names, err := f.Readdirnames(-1)
		if e.cow && !isSorted(names) {
			return e.res(err, "names=%q%s", sortStrings(names), sortedNote)
		}
		return e.res(err, "names=%q", sortStrings(names))
	}}
}

func TestDifferentialRename(t *testing.T) { runScenarios(t, renameScenarios()) }

func renameScenarios() []scenario {
	return []scenario{
		{name: "lower-file", ops: []op{rename("README.md", "README2.md"), readFile("README2.md"), lstat("README.md"), lstat("README2.md"), readFile("link-to-readme")}},
		{name: "lower-file-over-lower-file", ops: []op{rename("go.mod", "main.go"), readFile("main.go"), lstat("go.mod")}},
		{name: "lower-file-into-dir", ops: []op{rename("go.mod", "internal/util/go.mod"), readFile("internal/util/go.mod"), rename("main.go", "empty/main.go"), readdirnamesOf("empty")}},
		{name: "layer-file", ops: []op{writeFile("n", "new", 0o600), rename("n", "m"), readFile("m"), lstat("n"), lstat("m")}},
		{name: "copied-up-file", ops: []op{writeFile("go.mod", "changed", 0o644), rename("go.mod", "go.sum"), readFile("go.sum"), lstat("go.mod")}},
		{name: "lower-dir", ops: []op{rename("internal", "lib"), readdirnamesOf("lib"), readdirnamesOf("lib/util"), readFile("lib/util/util.go"), lstat("internal"), lstat("lib/util/up"), readFile("lib/util/up/go.mod"), writeFile("lib/util/util.go", "x", 0o644), readFile("lib/util/util.go")}},
		{name: "lower-dir-then-recreate-old-name", ops: []op{rename("internal", "lib"), mkdir("internal", 0o755), readdirnamesOf("internal"), lstat("internal/util"), readdirnamesOf("lib/util")}},
		{name: "merged-dir", ops: []op{writeFile("docs/new.md", "n", 0o644), remove("docs/guide.md"), rename("docs", "documentation"), readdirnamesOf("documentation"), readFile("documentation/new.md"), lstat("documentation/guide.md")}},
		{name: "dir-into-own-subtree", ops: []op{rename("a", "a/b/c/x"), rename("a/b", "a/b/c/d/e"), rename("a", "a/b"), lstat("a")}},
		{name: "dir-onto-nonempty-dir", ops: []op{rename("cmd", "docs"), rename("cmd", "internal"), lstat("cmd/tool")}},
		{name: "dir-onto-empty-dir", ops: []op{rename("cmd", "empty"), readdirnamesOf("empty"), lstat("cmd")}},
		{name: "dir-onto-emptied-lower-dir", ops: []op{remove("a/b/c/d"), remove("a/b/c/file.txt"), rename("cmd", "a/b/c"), readdirnamesOf("a/b/c")}},
		{name: "file-onto-dir", ops: []op{rename("README.md", "empty"), rename("README.md", "internal"), lstat("README.md")}},
		{name: "dir-onto-file", ops: []op{rename("empty", "README.md"), rename("internal", "go.mod"), lstat("empty")}},
		{name: "missing", ops: []op{rename("nope", "x"), rename("README.md", "nodir/x"), rename("README.md", "go.mod/x"), rename("nodir/x", "y")}},
		{name: "onto-itself", ops: []op{rename("README.md", "README.md"), rename("internal", "internal"), rename("link-to-readme", "README.md"), readFile("README.md"), lstat("link-to-readme")}},
		{name: "symlink", ops: []op{rename("link-to-readme", "docs/link"), readlink("docs/link"), readFile("docs/link"), rename("dangling", "internal/dangling"), readlink("internal/dangling")}},
		{name: "over-dangling-symlink", ops: []op{rename("go.mod", "dangling"), lstat("dangling"), lstat("does-not-exist")}},
		{name: "through-symlinked-dir", ops: []op{rename("link-to-internal/util/util.go", "link-to-internal/u.go"), readFile("internal/u.go"), rename("link-to-internal", "li2"), readFile("li2/u.go")}},
		{name: "trailing-slash", ops: []op{rename("README.md/", "x"), rename("empty/", "empty2/"), lstat("empty2"), rename("go.mod", "g/")}},
		{name: "dotdot", ops: []op{rename("internal/../go.mod", "docs/../go2.mod"), readFile("go2.mod")}},
		{name: "chain", ops: []op{rename("internal", "x"), rename("x/util", "util"), rename("util/deep", "x/deep"), readdirnamesOf("x"), readdirnamesOf("util"), readFile("x/deep/nested/leaf.txt"), rename("x", "internal"), readdirnamesOf("internal")}},
		{name: "swap-via-temp", ops: []op{rename("go.mod", "tmp"), rename("main.go", "go.mod"), rename("tmp", "main.go"), readFile("go.mod"), readFile("main.go")}},
		{name: "file-written-after-dir-rename", ops: []op{openFile(0, "internal/util/util.go", rdwr, 0), rename("internal", "lib"), write(0, "X"), closeH(0), readFile("lib/util/util.go")}},
	}
}

func TestDifferentialMetadata(t *testing.T) { runScenarios(t, metadataScenarios()) }

func metadataScenarios() []scenario {
	return []scenario{
		{name: "chmod-lower-file", ops: []op{chmod("README.md", 0o600), lstat("README.md"), readFile("README.md"), chmod("scripts/build.sh", 0o644), lstat("scripts/build.sh")}},
		{name: "chmod-lower-dir", ops: []op{chmod("internal", 0o700), lstat("internal"), readdirnamesOf("internal"), lstat("internal/util/util.go"), chmod("private", 0o755), lstat("private")}},
		{name: "chmod-back-is-no-change", ops: []op{chmod("README.md", 0o600), chmod("README.md", 0o644)}},
		{name: "chmod-through-symlink", ops: []op{chmod("link-to-readme", 0o640), lstat("README.md"), lstat("link-to-readme"), chmod("dangling", 0o640)}},
		{name: "chmod-special-bits", ops: []op{chmod("README.md", 0o4755), lstat("README.md"), chmod("empty", 0o1777), lstat("empty")}},
		{name: "chmod-missing", ops: []op{chmod("nope", 0o644), chmod("README.md/", 0o644), chmod("nodir/x", 0o644)}},
		{name: "chown", ops: []op{chown("README.md", 1000, 1000), owner("README.md"), chown("internal", 1234, 1234), owner("internal"), owner("internal/util"), chown("nope", 0, 0), chown("dangling", 0, 0), chown("link-to-readme", -1, -1), owner("README.md"), chown("link-to-readme", 7, -1), owner("README.md"), owner("link-to-readme"), lstat("README.md")}},
		{name: "chown-survives-copy-up-and-rename", ops: []op{chown("go.mod", 1000, 1001), writeFile("go.mod", "module y\n", 0o644), owner("go.mod"), rename("go.mod", "go2.mod"), owner("go2.mod"), chown("cmd", 5, 5), rename("cmd", "commands"), owner("commands"), owner("commands/tool/main.go")}},
		{name: "new-files-owned-by-caller", ops: []op{writeFile("n", "n", 0o644), owner("n"), mkdir("nd", 0o755), owner("nd"), symlink("n", "nl"), owner("nl")}},
		{name: "rename-keeps-mtime", ops: []op{chtimes("main.go", t1), rename("main.go", "m.go"), mtime("m.go"), rename("a", "z"), mtime("z/b/file.txt"), chtimes("docs", t2), rename("docs", "d2"), mtime("d2")}},
		{name: "chtimes-lower", ops: []op{chtimes("README.md", t1), mtime("README.md"), chtimes("internal", t2), mtime("internal"), chtimes("link-to-readme", t2), mtime("README.md"), chtimes("nope", t1), lstat("README.md")}},
		{name: "chtimes-keeps-content", ops: []op{chtimes("go.mod", t1), readFile("go.mod"), mtime("go.mod")}},
		{name: "mtime-preserved-by-copy-up-metadata", ops: []op{chmod("main.go", 0o600), mtime("main.go"), chmod("cmd", 0o700), mtime("cmd")}},
		{name: "write-back-original-bytes", ops: []op{writeFile("README.md", "scratch", 0o644), writeFile("README.md", "# demo\n\nA tiny project used as a fixture.\n", 0o644), readFile("README.md")}},
		{name: "truncate-and-restore-0600", ops: []op{openFile(0, "secrets/key.pem", rdwr|trunc, 0), write(0, "not really a key\n"), closeH(0), lstat("secrets/key.pem")}},
	}
}

func TestDifferentialSymlinks(t *testing.T) { runScenarios(t, symlinkScenarios()) }

func symlinkScenarios() []scenario {
	return []scenario{
		{name: "lower-links", fixture: "links", ops: []op{stat("chain1"), readFile("chain1"), lstat("chain1"), readlink("chain1"), stat("loop1"), readFile("loop1"), stat("self"), readFile("dirlink/inner.txt"), readFile("dir/parent/target.txt"), readFile("dir/sub/deep-up/x.txt"), stat("dangling"), lstat("dangling"), stat("abs-missing"), readlink("abs-missing")}},
		{name: "loop-depth", fixture: "links", known: linuxOnly("os follows 32 symlinks elsewhere, the contract says Linux's 40"), ops: []op{stat("loopdir/into"), stat("loopdir/into/into/into/into/into/into/into/into/into/into"), stat("loopdir/" + strings.Repeat("into/", 39) + "into"), stat("loopdir/" + strings.Repeat("into/", 40) + "into"), stat("loopdir/" + strings.Repeat("into/", 41))}},
		{name: "create-through-dangling", fixture: "links", ops: []op{openFile(0, "dangling", wronly|creat, 0o644), openFile(1, "loop1", wronly|creat, 0o644), openFile(2, "self", rdonly, 0), mkdir("loop1/x", 0o755), symlink("x", "loop1/y")}},
		{name: "create-through-dangling-project", ops: []op{openFile(0, "dangling", wronly|creat|excl, 0o644), openFile(1, "dangling", wronly|creat, 0o600), write(1, "now"), closeH(1), readFile("does-not-exist"), lstat("does-not-exist"), lstat("dangling")}},
		{name: "make-and-follow", ops: []op{symlink("README.md", "l1"), readFile("l1"), lstat("l1"), stat("l1"), readlink("l1"), symlink("internal/util", "l2"), readFile("l2/util.go"), writeFile("l2/new.go", "package util\n", 0o644), readFile("internal/util/new.go"), symlink("l2/..", "l3"), readdirnamesOf("l3")}},
		{name: "link-to-layer-file", ops: []op{writeFile("n.txt", "n", 0o644), symlink("n.txt", "ln"), readFile("ln"), writeFile("ln", "via", 0o644), readFile("n.txt")}},
		{name: "link-exists", ops: []op{symlink("x", "README.md"), symlink("x", "internal"), symlink("x", "dangling"), symlink("x", "nodir/l"), symlink("x", "README.md/l"), symlink("", "emptytarget")}},
		{name: "layer-loop", ops: []op{symlink("b", "a1"), symlink("a1", "b"), stat("a1"), readFile("a1"), openFile(0, "a1", wronly|creat, 0o644), mkdirAll("a1/x", 0o755), stat("a1/x"), lstat("a1"), remove("a1"), lstat("a1")}},
		{name: "relative-and-absolute-targets", ops: []op{symlink("../README.md", "docs/up"), readFile("docs/up"), symlink("./guide.md", "docs/dot"), readFile("docs/dot"), symlink("/nonexistent-cowfs/x", "abs"), stat("abs"), readlink("abs")}},
		{name: "readlink-errors", ops: []op{readlink("README.md"), readlink("internal"), readlink("nope"), readlink("link-to-internal/util"), readlink("internal/util/up"), readlink("link-to-readme/")}},
		{name: "lstat-trailing-slash-on-link", ops: []op{lstat("link-to-internal/"), lstat("link-to-readme/"), lstat("dangling/"), stat("link-to-internal/")}},
		{name: "symlink-in-copied-dir-after-rename", ops: []op{rename("internal", "lib"), readlink("lib/util/up"), readFile("lib/util/up/go.mod"), readFile("link-to-internal/util/util.go")}},
		{name: "removeall-through-loop", fixture: "links", ops: []op{removeAll("loop1/x"), removeAll("self/x/y"), remove("loop1/x"), removeAll("loopdir/into/into/inner")}},
		{name: "link-to-dir-remove-target", ops: []op{removeAll("internal"), stat("link-to-internal"), readFile("link-to-internal/util/util.go"), mkdir("internal", 0o755), writeFile("internal/z", "z", 0o644), readFile("link-to-internal/z")}},
	}
}

func TestDifferentialPaths(t *testing.T) { runScenarios(t, pathScenarios()) }

func pathScenarios() []scenario {
	return []scenario{
		{name: "trailing-slashes", ops: []op{stat("README.md/"), lstat("README.md/"), stat("internal/"), stat("internal//util//"), open(0, "README.md/"), openFile(1, "new/", wronly|creat, 0o644), openFile(2, "new2/", rdonly|creat, 0o644), readFile("internal/util/util.go/"), stat("empty/.")}},
		{name: "dotdot", ops: []op{readFile("internal/../README.md"), readFile("internal/util/../../main.go"), readFile("missing/../README.md"), readFile("README.md/../main.go"), readFile("link-to-internal/../README.md"), readFile("internal/util/up/README.md"), stat("internal/.."), writeFile("internal/../new.txt", "n", 0o644), readFile("new.txt"), stat("./README.md"), stat("internal/./util"), stat("."), stat("")}},
		{name: "dotdot-after-removed-dir", ops: []op{removeAll("a"), readFile("a/../README.md"), mkdir("a", 0o755), readFile("a/../README.md"), readFile("a/b/../../README.md")}},
		{name: "space-names", ops: []op{readFile("docs/my notes.txt"), readFile("docs/see also"), writeFile("docs/another note.txt", "x", 0o644), rename("docs/my notes.txt", "docs/my  notes.txt"), readdirnamesOf("docs")}},
		{name: "long-name", ops: []op{writeFile(strings.Repeat("n", 255), "ok", 0o644), writeFile(strings.Repeat("n", 256), "too long", 0o644), stat(strings.Repeat("m", 256))}},
		// Found by FuzzOps/FuzzResolve; each a one-line reproduction.
		{name: "removeall-file-trailing-slash", ops: []op{removeAll("README.md/"), lstat("README.md")}},
		{name: "symlink-to-file-slash", ops: []op{symlink("README.md/", "ls"), openFile(0, "ls", rdonly|trunc, 0), stat("ls"), readFile("README.md")}},
		{name: "rename-file-slash-onto-dir-slash", ops: []op{rename("README.md/", "empty/"), rename("README.md/", "nope/")}},
		{name: "symlink-at-missing-slash", ops: []op{symlink("x", "nope/"), rename("empty/", "gone"), symlink("x", "empty/"), mkdir("empty/", 0o755), symlink("x", "README.md/")}},
		{name: "mkdir-dangling-link-slash", ops: []op{mkdir("dangling/", 0o755), lstat("does-not-exist"), mkdirAll("dangling/", 0o755), lstat("does-not-exist"), symlink("made-by-link", "lk"), mkdir("lk/", 0o700), lstat("made-by-link")}},
		{name: "dangling-link-slash", ops: []op{remove("dangling/"), removeAll("dangling/"), rename("dangling/", "x"), chmod("dangling/", 0o600), lstat("dangling/"), readlink("dangling/"), lstat("dangling")}},
		{name: "nul-in-name", ops: []op{lstat("nodir/x\x00y"), stat("README.md\x00"), readlink("nodir/\x00"), writeFile("a\x00b", "x", 0o644), mkdir("nodir/\x00", 0o755)}},
		{name: "private-dir", ops: []op{readFile("private/diary.txt"), writeFile("private/new", "n", 0o644), lstat("private/new"), readFile("secrets/key.pem")}},
	}
}

// TestUmask runs creating ops under a process umask and the same WithUmask.
// Not parallel: the process umask is global.
func TestUmask(t *testing.T) {
	ops := []op{
		writeFile("f666", "x", 0o666),
		writeFile("f777", "x", 0o777),
		openFile(0, "f700", wronly|creat|excl, 0o700),
		mkdir("d777", 0o777),
		mkdirAll("p/q/r", 0o777),
		symlink("f666", "l"),
		create(1, "created"),
		lstat("f666"), lstat("f777"), lstat("f700"), lstat("d777"), lstat("p/q"), lstat("l"), lstat("created"),
	}
	orig := origTree(t, "small")
	t.Run("default", func(t *testing.T) {
		if err := errors.Join(differential(t, orig, ops)...); err != nil {
			t.Errorf("ops:\n\t%s\nmismatches:\n%v", opList(ops), err)
		}
	})
	for _, mask := range []int{0o027, 0o077, 0} {
		t.Run(fmt.Sprintf("%#o", mask), func(t *testing.T) {
			old := setUmask(mask)
			defer setUmask(old)
			if err := errors.Join(differential(t, orig, ops, overlayfs.WithUmask(fs.FileMode(mask)))...); err != nil {
				t.Errorf("ops:\n\t%s\nmismatches:\n%v", opList(ops), err)
			}
		})
	}
}

// outsideTree lays out parent/{root,outside} with symlinks in root that lead
// out of it, and returns the three directories.
func outsideTree(t *testing.T) (parent, root, outside string) {
	t.Helper()
	parent = t.TempDir()
	root = filepath.Join(parent, "root")
	writeTree(t, "small", root)
	outside = filepath.Join(parent, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "file.txt"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"escape":      "../outside",
		"escape-file": "../outside/file.txt",
		"abs-escape":  outside,
		"escape-new":  "../outside/new-via-link",
		"d/up":        "../../outside",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return parent, root, outside
}

type namedCall struct {
	name string
	call func() error
}

// writesOutside are calls that would write outside root, each reached a
// different way.
func writesOutside(c *overlayfs.Fs, root, outside string) []namedCall {
	o := func(rel string) string { return filepath.Join(outside, rel) }
	r := func(rel string) string { return root + "/" + rel }
	openW := func(name string, flag int) func() error {
		return func() error {
			f, err := c.OpenFile(name, flag, 0o644)
			if err == nil {
				f.Close()
			}
			return err
		}
	}
	return []namedCall{
		{"create outside", openW(o("new"), os.O_WRONLY|os.O_CREATE)},
		{"open outside file rdwr", openW(o("file.txt"), os.O_RDWR)},
		{"open outside file wronly", openW(o("file.txt"), os.O_WRONLY)},
		{"open outside file trunc", openW(o("file.txt"), os.O_RDONLY|os.O_TRUNC)},
		{"open outside file append", openW(o("file.txt"), os.O_WRONLY|os.O_APPEND)},
		{"Create root/../outside", func() error { _, err := c.Create(root + "/../outside/x"); return err }},
		{"Create root/d/../../outside", func() error { _, err := c.Create(root + "/d/../../outside/y"); return err }},
		{"create via dir symlink", openW(r("escape/new"), os.O_WRONLY|os.O_CREATE)},
		{"create via nested dir symlink", openW(r("d/up/new"), os.O_WRONLY|os.O_CREATE)},
		{"create via absolute dir symlink", openW(r("abs-escape/new"), os.O_WRONLY|os.O_CREATE)},
		{"write via file symlink", openW(r("escape-file"), os.O_WRONLY)},
		{"create via dangling symlink", openW(r("escape-new"), os.O_WRONLY|os.O_CREATE)},
		{"mkdir outside", func() error { return c.Mkdir(o("d"), 0o755) }},
		{"mkdir via symlink", func() error { return c.Mkdir(r("escape/d"), 0o755) }},
		{"mkdirall outside", func() error { return c.MkdirAll(o("d/e"), 0o755) }},
		{"remove outside", func() error { return c.Remove(o("file.txt")) }},
		{"remove via symlink", func() error { return c.Remove(r("escape/file.txt")) }},
		{"removeall outside", func() error { return c.RemoveAll(outside) }},
		{"rename into outside", func() error { return c.Rename(r("a"), o("a")) }},
		{"rename from outside", func() error { return c.Rename(o("file.txt"), r("stolen")) }},
		{"rename via symlink", func() error { return c.Rename(r("a"), r("escape/a")) }},
		{"chmod outside", func() error { return c.Chmod(o("file.txt"), 0o600) }},
		{"chmod via file symlink", func() error { return c.Chmod(r("escape-file"), 0o600) }},
		{"chown outside", func() error { return c.Chown(o("file.txt"), 1, 1) }},
		{"chtimes outside", func() error { return c.Chtimes(o("file.txt"), t1, t1) }},
		{"chtimes via symlink", func() error { return c.Chtimes(r("escape-file"), t1, t1) }},
		{"symlink outside", func() error { return c.SymlinkIfPossible("x", o("l")) }},
		{"symlink via dir symlink", func() error { return c.SymlinkIfPossible("x", r("escape/l")) }},
	}
}

func TestOutsideRootWritesRefused(t *testing.T) {
	parent, root, outside := outsideTree(t)
	sum := hashTree(t, parent)
	c := newCow(t, root)
	for _, w := range writesOutside(c, root, outside) {
		err := w.call()
		var pe *fs.PathError
		var le *os.LinkError
		switch {
		case err == nil:
			t.Errorf("%s: err = nil, want ErrOutsideRoot", w.name)
		case !errors.Is(err, overlayfs.ErrOutsideRoot) || !errors.Is(err, fs.ErrPermission):
			t.Errorf("%s: err = %v, want errors.Is ErrOutsideRoot and fs.ErrPermission", w.name, err)
		case !errors.As(err, &pe) && !errors.As(err, &le):
			t.Errorf("%s: err = %T, want *fs.PathError or *os.LinkError", w.name, err)
		}
	}
	checkUnchanged(t, parent, sum)
	if cs := c.Changes(); len(cs) != 0 {
		t.Errorf("refused writes left changes: %s", fmtChanges(cs))
	}
	// What stays inside is allowed: removing or renaming the escaping link itself.
	if err := c.Remove(root + "/escape-file"); err != nil {
		t.Errorf("Remove(in-root link to outside) = %v, want nil", err)
	}
	if err := c.Rename(root+"/escape", root+"/esc2"); err != nil {
		t.Errorf("Rename(in-root link to outside) = %v, want nil", err)
	}
	if err := afero.WriteFile(c, root+"/d/../inside.txt", []byte("in"), 0o644); err != nil {
		t.Errorf("write to root/d/../inside.txt = %v, want nil", err)
	}
	// Leaving the root and coming back in is inside: the name cleans to it.
	back := root + "/../" + filepath.Base(root) + "/back-inside.txt"
	if err := afero.WriteFile(c, back, []byte("in"), 0o644); err != nil {
		t.Errorf("write to %s = %v, want nil", back, err)
	}
	if data, err := afero.ReadFile(c, filepath.Join(root, "back-inside.txt")); err != nil || string(data) != "in" {
		t.Errorf("read back-inside.txt = %q, %v", data, err)
	}
	checkUnchanged(t, parent, sum)
}

func TestOutsideRootReadsPassThrough(t *testing.T) {
	parent, root, outside := outsideTree(t)
	sum := hashTree(t, parent)
	c := newCow(t, root)
	for _, name := range []string{
		filepath.Join(outside, "file.txt"),
		root + "/../outside/file.txt",
		root + "/escape/file.txt",
		root + "/escape-file",
		root + "/abs-escape/file.txt",
		root + "/d/up/file.txt",
	} {
		data, err := afero.ReadFile(c, name)
		if err != nil || string(data) != "outside\n" {
			t.Errorf("ReadFile(%s) = %q, %v; want %q, nil", name, data, err, "outside\n")
		}
		if fi, err := c.Stat(name); err != nil || fi.Size() != 8 {
			t.Errorf("Stat(%s) = %v, %v", name, fi, err)
		}
	}
	names, err := afero.ReadDir(c, outside)
	if err != nil || len(names) != 1 || names[0].Name() != "file.txt" {
		t.Errorf("ReadDir(outside) = %v, %v", names, err)
	}
	if _, err := c.Stat(filepath.Join(outside, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat(outside/missing) = %v, want ErrNotExist", err)
	}
	checkUnchanged(t, parent, sum)
}

func TestDenyOutsideReads(t *testing.T) {
	parent, root, outside := outsideTree(t)
	sum := hashTree(t, parent)
	c := newCow(t, root, overlayfs.DenyOutsideReads())
	for _, name := range []string{
		filepath.Join(outside, "file.txt"),
		root + "/../outside/file.txt",
		root + "/escape/file.txt",
		root + "/escape-file",
		root + "/abs-escape/file.txt",
	} {
		_, err := afero.ReadFile(c, name)
		if !errors.Is(err, overlayfs.ErrOutsideRoot) || !errors.Is(err, fs.ErrPermission) {
			t.Errorf("ReadFile(%s) err = %v, want ErrOutsideRoot", name, err)
		}
		_, err = c.Stat(name)
		if !errors.Is(err, overlayfs.ErrOutsideRoot) || !errors.Is(err, fs.ErrPermission) {
			t.Errorf("Stat(%s) err = %v, want ErrOutsideRoot", name, err)
		}
		// A refused read says so: not "write outside".
		_, _, lerr := c.LstatIfPossible(name + "/")
		_, rerr := c.ReadlinkIfPossible(name)
		for _, err := range []error{err, lerr, rerr} {
			if err != nil && strings.Contains(err.Error(), "write") {
				t.Errorf("a refused read of %s says %q", name, err)
			}
		}
		if _, err := afero.ReadFile(c, name); err != nil && strings.Contains(err.Error(), "write") {
			t.Errorf("a refused read of %s says %q", name, err)
		}
	}
	// The escaping link itself lives in the root: Lstat and Readlink work.
	if fi, _, err := c.LstatIfPossible(root + "/escape"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(root/escape) = %v, %v; want a symlink", fi, err)
	}
	if target, err := c.ReadlinkIfPossible(root + "/escape"); err != nil || target != "../outside" {
		t.Errorf("Readlink(root/escape) = %q, %v", target, err)
	}
	if data, err := afero.ReadFile(c, root+"/a"); err != nil || string(data) != "alpha\n" {
		t.Errorf("ReadFile(root/a) = %q, %v; inside reads must work", data, err)
	}
	checkUnchanged(t, parent, sum)
}

func TestAllowOutsideWrites(t *testing.T) {
	parent, root, outside := outsideTree(t)
	rootSum := hashTree(t, root)
	c := newCow(t, root, overlayfs.AllowOutsideWrites())
	if err := afero.WriteFile(c, filepath.Join(outside, "new"), []byte("real"), 0o600); err != nil {
		t.Fatalf("WriteFile outside: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(outside, "new")); err != nil || string(data) != "real" {
		t.Errorf("the outside write did not reach the disk: %q, %v", data, err)
	}
	if err := afero.WriteFile(c, root+"/escape/via-link", []byte("v"), 0o644); err != nil {
		t.Errorf("write via escaping link: %v", err)
	} else if _, err := os.Lstat(filepath.Join(outside, "via-link")); err != nil {
		t.Errorf("write via escaping link did not reach the disk: %v", err)
	}
	if err := c.Mkdir(filepath.Join(parent, "sibling"), 0o755); err != nil {
		t.Errorf("Mkdir outside: %v", err)
	} else if fi, err := os.Stat(filepath.Join(parent, "sibling")); err != nil || !fi.IsDir() {
		t.Errorf("Mkdir outside did not reach the disk: %v", err)
	}
	if err := c.Remove(filepath.Join(outside, "file.txt")); err != nil {
		t.Errorf("Remove outside: %v", err)
	} else if _, err := os.Lstat(filepath.Join(outside, "file.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove outside did not reach the disk: %v", err)
	}
	// Inside the root, writes still stay in the layer.
	if err := afero.WriteFile(c, root+"/a", []byte("changed"), 0o644); err != nil {
		t.Errorf("WriteFile inside: %v", err)
	}
	checkUnchanged(t, root, rootSum)
	if got := fmtChanges(c.Changes()); got != "[modified:a(-rw-r--r--<--rw-r--r--)]" {
		t.Errorf("Changes() = %s, want only a modified", got)
	}
}

// TestRelativeNames: names relative to the working directory, as os takes them.
// Not parallel: t.Chdir changes the process's directory.
func TestRelativeNames(t *testing.T) {
	parent, root, _ := outsideTree(t)
	sum := hashTree(t, parent)
	c := newCow(t, root)
	t.Chdir(filepath.Join(root, "d"))
	if data, err := afero.ReadFile(c, "b"); err != nil || string(data) != "bravo\n" {
		t.Errorf("ReadFile(b) = %q, %v", data, err)
	}
	if err := afero.WriteFile(c, "rel.txt", []byte("r"), 0o644); err != nil {
		t.Errorf("WriteFile(rel.txt) = %v", err)
	}
	if err := afero.WriteFile(c, "../top.txt", []byte("t"), 0o644); err != nil {
		t.Errorf("WriteFile(../top.txt) = %v", err)
	}
	if err := c.Rename("c", "../c-moved"); err != nil {
		t.Errorf("Rename(c, ../c-moved) = %v", err)
	}
	for _, name := range []string{"../../outside/x", "up/x", "../escape/x", "../../root2"} {
		err := afero.WriteFile(c, name, []byte("x"), 0o644)
		if !errors.Is(err, overlayfs.ErrOutsideRoot) || !errors.Is(err, fs.ErrPermission) {
			t.Errorf("WriteFile(%s) = %v, want ErrOutsideRoot", name, err)
		}
	}
	if data, err := afero.ReadFile(c, filepath.Join(root, "d", "rel.txt")); err != nil || string(data) != "r" {
		t.Errorf("ReadFile(abs rel.txt) = %q, %v", data, err)
	}
	want := fmtChanges([]overlayfs.Change{
		{Path: "c-moved", Kind: overlayfs.Added, Mode: 0o644},
		{Path: "d/c", Kind: overlayfs.Deleted, OldMode: 0o644},
		{Path: "d/rel.txt", Kind: overlayfs.Added, Mode: 0o644},
		{Path: "top.txt", Kind: overlayfs.Added, Mode: 0o644},
	})
	if got := fmtChanges(c.Changes()); got != want {
		t.Errorf("Changes() =\n\t%s\nwant\n\t%s", got, want)
	}
	checkUnchanged(t, parent, sum)
}

// TestRootAlias: the root named through a symlink is canonicalized, and names
// through the alias are inside the root.
func TestRootAlias(t *testing.T) {
	parent, root, _ := outsideTree(t)
	sum := hashTree(t, parent)
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(root, alias); err != nil {
		t.Fatal(err)
	}
	c := newCow(t, alias)
	canon, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	if c.Root() != canon {
		t.Errorf("Root() = %q, want %q", c.Root(), canon)
	}
	if err := afero.WriteFile(c, alias+"/via-alias", []byte("v"), 0o644); err != nil {
		t.Errorf("write through the alias: %v", err)
	}
	if data, err := afero.ReadFile(c, canon+"/via-alias"); err != nil || string(data) != "v" {
		t.Errorf("read through the canonical root = %q, %v", data, err)
	}
	if _, err := afero.ReadFile(c, alias+"/a"); err != nil {
		t.Errorf("read through the alias: %v", err)
	}
	checkUnchanged(t, parent, sum)
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := overlayfs.New(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("New(missing) = %v, want ErrNotExist", err)
	}
	if _, err := overlayfs.New(file); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("New(file) = %v, want ENOTDIR", err)
	}
}

func TestResetAndChangeKinds(t *testing.T) {
	orig := origTree(t, "small")
	c := newCow(t, orig)
	for k, want := range map[overlayfs.ChangeKind]string{overlayfs.Added: "added", overlayfs.Modified: "modified", overlayfs.Deleted: "deleted"} {
		if k.String() != want {
			t.Errorf("%d.String() = %q, want %q", k, k.String(), want)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(afero.WriteFile(c, orig+"/a", []byte("A"), 0o644))
	must(c.RemoveAll(orig + "/d"))
	must(afero.WriteFile(c, orig+"/n", []byte("n"), 0o644))
	if len(c.Changes()) == 0 {
		t.Fatal("no changes after writes")
	}
	c.Reset()
	if cs := c.Changes(); len(cs) != 0 {
		t.Errorf("Changes() after Reset = %s, want none", fmtChanges(cs))
	}
	if err := errors.Join(diffTrees(mustWalk(t, osTarget{}, orig), mustWalk(t, c, c.Root()))...); err != nil {
		t.Errorf("view after Reset differs from the root:\n%v", err)
	}
	// The Fs is usable again after Reset.
	must(afero.WriteFile(c, orig+"/d/b", []byte("B"), 0o644))
	if got := fmtChanges(c.Changes()); got != "[modified:d/b(-rw-r--r--<--rw-r--r--)]" {
		t.Errorf("Changes() = %s", got)
	}
}

func mustWalk(t testing.TB, fsys target, root string) map[string]entry {
	t.Helper()
	m, err := walkTarget(fsys, root)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
