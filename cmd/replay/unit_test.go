package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/tape"
)

func TestWithJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"go test ./...", "go test -json ./..."},
		{"go test -json ./...", "go test -json ./..."},
		{"go test -v -run X ./p -args -json", "go test -json -v -run X ./p -args -json"},
		{"/usr/local/go/bin/go test .", "/usr/local/go/bin/go test -json ."},
		{"go vet ./...", "go vet ./..."},
		{"make test", "make test"},
		{"go", "go"},
	} {
		got := strings.Join(withJSON(strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("withJSON(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// On a terminal, progress redraws one line in place and erases it at the
// end; elsewhere it prints one plain line per finished run.
func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	e := &env{stderr: &buf, tty: true}
	stop := e.progress(2, 3, time.Now().Add(-1500*time.Millisecond))
	time.Sleep(250 * time.Millisecond)
	stop(&runResult{})
	out := buf.String()
	if !strings.HasPrefix(out, "\r\x1b[Kreplay check: run 2/3, 1.5s elapsed") {
		t.Errorf("terminal progress starts %q", out[:min(len(out), 60)])
	}
	if !strings.HasSuffix(out, "\r\x1b[K") || strings.Contains(out, "\n") {
		t.Errorf("terminal progress must end erased, on one line: %q", out)
	}

	buf.Reset()
	e.tty = false
	stop = e.progress(1, 1, time.Now())
	stop(&runResult{elapsed: 1200 * time.Millisecond})
	if got, want := buf.String(), "replay check: run 1/1 done in 1.2s, 0 tapes, exit status 0\n"; got != want {
		t.Errorf("plain progress = %q, want %q", got, want)
	}
}

func TestMatchUnder(t *testing.T) {
	for _, tc := range []struct {
		glob, path string
		want       bool
	}{
		{"out", "out", true},
		{"out", "out/a/b.txt", true},
		{"out", "outer/a", false},
		{"*.txt", "a.txt", true},
		{"*.txt", "dir/a.txt", false},
		{"*/a.txt", "dir/a.txt", true},
		{"dir/*", "dir/sub/x", true},
	} {
		if got := matchUnder(tc.glob, tc.path); got != tc.want {
			t.Errorf("matchUnder(%q, %q) = %v, want %v", tc.glob, tc.path, got, tc.want)
		}
	}
}

// finalLinePath must agree with the paths tape.Tape.Final writes, odd
// names included.
func TestFinalLinePath(t *testing.T) {
	names := []string{"plain.txt", "dir/with space", "quote\"d", "tab\tname", "ünï"}
	var buf bytes.Buffer
	rec := tape.NewRecorder(&buf)
	mem := afero.NewMemMapFs()
	fsys := rec.Wrap(mem, "/r")
	for _, n := range names {
		mem.MkdirAll(filepath.Dir("/r/"+n), 0o755)
		if err := afero.WriteFile(fsys, "/r/"+n, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	tp, err := tape.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range tp.Final() {
		got = append(got, finalLinePath(l))
	}
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		t.Errorf("paths of Final lines = %q, want %q", got, want)
	}
}

// FuzzTapeCommands feeds arbitrary bytes, as a tape, to every command
// that reads tapes: none may panic, and each exits 0, 1 or 2.
func FuzzTapeCommands(f *testing.F) {
	var buf bytes.Buffer
	rec := tape.NewRecorder(&buf, tape.WithTest("p", "T"))
	mem := afero.NewMemMapFs()
	fsys := rec.Wrap(mem, "/r")
	afero.WriteFile(fsys, "/r/a", []byte("1\n"), 0o644)
	fsys.Rename("/r/a", "/r/b")
	fsys.Stat("/elsewhere")
	fsys.Open("/r/b")
	rec.Close()
	f.Add(buf.Bytes())
	f.Add([]byte(`{"kind":"header","format":"cowfs-tape","version":1,"minor":3,"hash":"blake3"}` + "\n" +
		`{"seq":1,"op":"warp","path":"","to":"<outside>"}` + "\n"))
	f.Add([]byte("garbage"))
	dir := f.TempDir()
	ref := filepath.Join(dir, "ref.tape")
	if err := os.WriteFile(ref, buf.Bytes(), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(t.TempDir(), "f.tape")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		e := &env{ctx: context.Background(), stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		for _, args := range [][]string{
			{"verify", file},
			{"show", file},
			{"show", "-canon", "-order", "final", "-path", "*", file},
			{"show", "-canon", "-order", "set", file},
			{"stat", file},
			{"diff", "-all", file, ref},
			{"diff", "-order", "global", "-all", ref, file},
			{"diff", "-order", "set", "-json", file, ref},
			{"diff", "-order", "final", "-all", file, ref},
		} {
			if code := e.main(args); code < 0 || code > 2 {
				t.Errorf("replay %s: exit %d", strings.Join(args, " "), code)
			}
		}
	})
}
