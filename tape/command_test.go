package tape

import (
	"bytes"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// commandTape records one command's changes over root and reads the tape
// back.
func commandTape(t *testing.T, root string, argv []string, changes []CommandChange) *Tape {
	t.Helper()
	var buf bytes.Buffer
	rec := NewRecorder(&buf)
	if err := rec.RecordCommand(root, argv, changes); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	tp, err := Read(&buf)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return tp
}

func TestRecordCommand(t *testing.T) {
	rootA, rootB := "/tmp/runA/root", "/srv/other/root"
	content := []byte("1700000000\n")
	h, n, err := HashReader(bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	if want := sum(content); h != want || n != int64(len(content)) {
		t.Fatalf("HashReader: %s %d, want %s %d", h, n, want, len(content))
	}
	changes := func(root, hash string) []CommandChange {
		return []CommandChange{
			{Op: OpCmdWrite, Path: "out/nanos.txt", Mode: 0o644, Size: n, Hash: hash},
			{Op: OpCmdRemove, Path: "old"},
			{Op: OpCmdMkdir, Path: "out", Mode: fs.ModeDir | 0o755},
			{Op: OpCmdSymlink, Path: "link", Target: filepath.Join(root, "out")},
			{Op: OpCmdChmod, Path: "run.sh", Mode: 0o755},
			{Op: OpCmdChmod, Path: ".", Mode: fs.ModeDir | 0o700},
			{Op: OpCmdMknod, Path: "ctl.sock", Mode: fs.ModeSocket | 0o755},
		}
	}
	argv := func(root string) []string {
		return []string{"sh", "-c", "date +%N > " + root + "/out/nanos.txt; cd " + root + "; ls /tmp/runA/rootx"}
	}
	a := commandTape(t, rootA, argv(rootA), changes(rootA, h))
	b := commandTape(t, rootB, argv(rootB), changes(rootB, h))
	// In path order, each tagged with the command, the root a placeholder.
	var paths []string
	for _, r := range a.Records {
		paths = append(paths, r.Path)
		want := []string{"sh", "-c", "date +%N > <root>/out/nanos.txt; cd <root>; ls " + rootA + "x"}
		if !slices.Equal(r.Cmd, want) {
			t.Errorf("cmd %q, want %q", r.Cmd, want)
		}
	}
	if want := []string{".", "ctl.sock", "link", "old", "out", "out/nanos.txt", "run.sh"}; !slices.Equal(paths, want) {
		t.Errorf("record paths %q, want %q", paths, want)
	}
	if r := only(a, OpCmdSymlink, "link"); len(r) != 1 || r[0].Target != "<root>/out" {
		t.Errorf("symlink record %v", r)
	}
	// Over two roots the same changes compare equal, in every mode.
	for _, m := range []Mode{ModePath, ModeGlobal, ModeSet, ModeFinal} {
		if d := Compare(a, b, m); d != nil {
			t.Errorf("%s: same command over two roots diverges:\n%s", m, d)
		}
	}
	wantFinal := []string{
		". lower mode=drwx------",
		"ctl.sock special mode=Srwxr-xr-x",
		"link symlink target=<root>/out",
		"old deleted",
		"out dir mode=drwxr-xr-x",
		"out/nanos.txt file size=11 hash=" + h + " mode=-rw-r--r--",
		"run.sh lower mode=-rwxr-xr-x",
	}
	if got := a.Final(); !slices.Equal(got, wantFinal) {
		t.Errorf("final:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantFinal, "\n"))
	}
	// Other bytes in one file: diverged at that path, in every mode.
	other := sum([]byte("1700000001\n"))
	c := commandTape(t, rootB, argv(rootB), changes(rootB, other))
	for _, m := range []Mode{ModePath, ModeGlobal, ModeSet, ModeFinal} {
		d := Compare(a, c, m)
		if d == nil {
			t.Errorf("%s: different content compares equal", m)
			continue
		}
		if m != ModeSet && m != ModeGlobal && d.Path != "out/nanos.txt" || !strings.Contains(d.String(), "out/nanos.txt") {
			t.Errorf("%s: divergence does not name out/nanos.txt:\n%s", m, d)
		}
	}
	if class, _ := Classify(a, c); class != Data {
		t.Errorf("class %v, want data", class)
	}
}

func TestRecordCommandRefuses(t *testing.T) {
	var buf bytes.Buffer
	rec := NewRecorder(&buf)
	for _, bad := range [][]CommandChange{
		{{Op: OpOpen, Path: "a"}},
		{{Op: OpCmdRemove, Path: "../a"}},
		{{Op: OpCmdRemove, Path: "/abs"}},
		{{Op: OpCmdRemove, Path: "a/"}},
		{{Op: OpCmdRemove, Path: "ok"}, {Op: OpCmdRemove, Path: ""}},
	} {
		if err := rec.RecordCommand("/r", []string{"x"}, bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	rec.Close()
	tp, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(tp.Records) != 0 {
		t.Errorf("refused changes were recorded: %v", tp.Records)
	}
}

func TestReplaceRoot(t *testing.T) {
	roots := []string{"/tmp/r", "/private/tmp/r"}
	for in, want := range map[string]string{
		"/tmp/r":                 "<root>",
		"/tmp/r/a":               "<root>/a",
		"/tmp/rx":                "/tmp/rx",
		"/tmp/r.b":               "/tmp/r.b",
		"x=/tmp/r;y=/tmp/r/z":    "x=<root>;y=<root>/z",
		"/private/tmp/r/q":       "<root>/q",
		"cat '/tmp/r/a b'":       "cat '<root>/a b'",
		"/tmp/r/tmp/r":           "<root>/tmp/r",
		"nothing to see":         "nothing to see",
		"/tmp/r /tmp/r-2 /tmp/r": "<root> /tmp/r-2 <root>",
	} {
		if got := replaceRoot(in, roots); got != want {
			t.Errorf("replaceRoot(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRecordCommandOddNames: a command may leave names that are not
// UTF-8 (the kernel takes any bytes but NUL and '/'), as package tape's
// records may hold (format 1.3); RecordCommand takes them, and the tape
// reads back the same bytes. Only a NUL, which no file name holds, is
// refused.
func TestRecordCommandOddNames(t *testing.T) {
	odd := []string{"bad\xff", "dir\xfe/x\x80y", "latin1-\xe9t\xe9"}
	var changes []CommandChange
	for _, p := range odd {
		changes = append(changes, CommandChange{Op: OpCmdRemove, Path: p})
	}
	var buf bytes.Buffer
	rec := NewRecorder(&buf)
	if err := rec.RecordCommand("/r", []string{"sh"}, changes); err != nil {
		t.Fatalf("RecordCommand: %v", err)
	}
	if err := rec.RecordCommand("/r", []string{"sh"}, []CommandChange{{Op: OpCmdRemove, Path: "nul\x00"}}); err == nil {
		t.Error("a path with a NUL was accepted")
	}
	must(t, rec.Close())
	tp, err := Read(&buf)
	must(t, err)
	var got []string
	for _, r := range tp.Records {
		got = append(got, r.Path)
	}
	slices.Sort(odd)
	if !slices.Equal(got, odd) {
		t.Errorf("paths read back %q, want %q", got, odd)
	}
}
