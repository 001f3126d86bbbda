package tape

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
)

// sampleTape records a small scenario and returns its raw bytes.
func sampleTape(t testing.TB) []byte {
	mem := afero.NewMemMapFs()
	afero.WriteFile(mem, "/r/a.txt", []byte("alpha"), 0o644)
	_, raw := tapeOf(t, mem, "/r", sampleOps, WithTest("example.com/p", "TestX"))
	return raw
}

// sampleOps is the scenario of sampleTape and of testdata/sample*.tape,
// on a file system holding /r/a.txt ("alpha"), recorded with root /r.
func sampleOps(w afero.Fs) {
	afero.ReadFile(w, "/r/a.txt")
	afero.WriteFile(w, "/r/b.txt", []byte("beta"), 0o644)
	w.Rename("/r/b.txt", "/r/c.txt")
	w.Stat("/r/missing")
	w.Mkdir("/r/d", 0o755)
	afero.ReadDir(w, "/r")
}

func lines(raw []byte) []string {
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
}

// TestReadRoundTrip: every record line is exactly the JSON of the record
// Read returns, and the header carries what the options said.
func TestReadRoundTrip(t *testing.T) {
	raw := sampleTape(t)
	tp, err := Read(bytes.NewReader(raw))
	must(t, err)
	ls := lines(raw)
	if len(ls) != len(tp.Records)+2 {
		t.Fatalf("%d lines for %d records", len(ls), len(tp.Records))
	}
	for i := range tp.Records {
		b, err := json.Marshal(&tp.Records[i])
		must(t, err)
		if string(b) != ls[i+1] {
			t.Errorf("record %d:\n got %s\nline %s", i+1, b, ls[i+1])
		}
	}
	h := tp.Header
	if h.Format != FormatName || h.Version != Version || h.Minor != Minor || h.Hash != "blake3" ||
		h.Package != "example.com/p" || h.Test != "TestX" || h.Info["pid"] == "" {
		t.Errorf("header %+v", h)
	}
	if tp.Trailer == nil || tp.Trailer.Records != int64(len(tp.Records)) || tp.Truncated {
		t.Errorf("trailer %+v truncated=%v", tp.Trailer, tp.Truncated)
	}
}

// rebuild makes a complete tape from a header line and record lines,
// computing the trailer as FORMAT.md says (independently of Recorder).
func rebuild(t testing.TB, header string, recs []string) string {
	chain := specChain(t, append([]string{header}, recs...))
	noTrailer := header + "\n" + strings.Join(recs, "\n")
	if len(recs) > 0 {
		noTrailer += "\n"
	}
	tp, err := Read(strings.NewReader(noTrailer))
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	tr, _ := json.Marshal(Trailer{Kind: "trailer", Records: int64(len(tp.Records)),
		Final: sum([]byte(strings.Join(tp.final(tp.Header.Minor), "\n"))), Chain: chain})
	return noTrailer + string(tr) + "\n"
}

func TestReadRejects(t *testing.T) {
	raw := sampleTape(t)
	ls := lines(raw)
	hdr, recs, trailer := ls[0], ls[1:len(ls)-1], ls[len(ls)-1]
	join := func(parts ...string) string { return strings.Join(parts, "\n") + "\n" }
	newer := strings.Replace(hdr, `"version":1`, `"version":2`, 1)
	for _, c := range []struct {
		name string
		in   string
		line int
		want error
	}{
		{"empty", "", 0, ErrFormat},
		{"not a header first", join(recs[0]), 1, ErrFormat},
		{"newer major version", join(newer, recs[0]), 1, ErrVersion},
		{"other hash", join(strings.Replace(hdr, `"blake3"`, `"sha256"`, 1)), 1, ErrVersion},
		{"other format", join(strings.Replace(hdr, FormatName, "other", 1)), 1, ErrFormat},
		{"second header", join(hdr, recs[0], hdr, recs[1]), 3, ErrFormat},
		{"malformed JSON", join(hdr, recs[0], `{"seq":2,"op":`, recs[2]), 3, ErrFormat},
		{"trailing garbage after the object", join(hdr, recs[0]+" x"), 2, ErrFormat},
		{"seq out of order", join(hdr, recs[1]), 2, ErrFormat},
		{"bad hash text", join(hdr, recs[0], strings.Replace(recs[1], `"rhash":"`, `"rhash":"XYZ`, 1)), 3, ErrFormat},
		{"unknown op, same minor", join(hdr, `{"seq":1,"op":"teleport","path":"a"}`), 2, ErrFormat},
		{"unknown line kind, same minor", join(hdr, `{"kind":"note"}`), 2, ErrFormat},
		{"altered record, stale trailer", join(append(append([]string{hdr, recs[0]}, strings.Replace(recs[1], `"rsize":5`, `"rsize":6`, 1)), append(recs[2:], trailer)...)...), len(ls), ErrTrailer},
		{"dropped record", join(append(append([]string{hdr}, recs[:len(recs)-1]...), trailer)...), len(ls) - 1, ErrTrailer},
		{"absolute path", join(hdr, `{"seq":1,"op":"stat","path":"/etc/passwd"}`), 2, ErrFormat},
		{"path climbing out", join(hdr, `{"seq":1,"op":"stat","path":"../x"}`), 2, ErrFormat},
		{"path not clean", join(hdr, `{"seq":1,"op":"stat","path":"a/./b"}`), 2, ErrFormat},
		{"path with a trailing slash", join(hdr, `{"seq":1,"op":"stat","path":"a/"}`), 2, ErrFormat},
		{"absolute to", join(hdr, `{"seq":1,"op":"rename","path":"a","to":"/tmp/b"}`), 2, ErrFormat},
		{"negative span", join(hdr, `{"seq":1,"op":"open","path":"a","flag":"r","spans":[[-1,5]]}`), 2, ErrFormat},
		{"empty span", join(hdr, `{"seq":1,"op":"open","path":"a","flag":"r","spans":[[0,0]]}`), 2, ErrFormat},
		{"spans out of order", join(hdr, `{"seq":1,"op":"open","path":"a","flag":"r","spans":[[10,5],[0,5]]}`), 2, ErrFormat},
		{"adjacent spans", join(hdr, `{"seq":1,"op":"open","path":"a","flag":"r","spans":[[0,5],[5,5]]}`), 2, ErrFormat},
		{"span past the largest offset", join(hdr, `{"seq":1,"op":"open","path":"a","flag":"r","spans":[[9223372036854775807,1]]}`), 2, ErrFormat},
		{"line after the trailer", join(append(append([]string{hdr}, recs...), trailer, recs[0])...), len(ls) + 1, ErrFormat},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.in))
			var re *ReadError
			if !errors.As(err, &re) || !errors.Is(err, c.want) {
				t.Fatalf("got %v, want a *ReadError wrapping %v", err, c.want)
			}
			if re.Line != c.line {
				t.Errorf("line %d, want %d (%v)", re.Line, c.line, err)
			}
			if c.line == 0 {
				// Empty input has no line to name: "line 0" would be noise.
				assert.NotContains(t, err.Error(), "line", "an empty input's message names a line")
			} else {
				assert.Contains(t, err.Error(), fmt.Sprintf("line %d", c.line), "the message names the line")
			}
		})
	}
}

// TestReadNewerMinor: ops and line kinds of a newer minor version are kept
// and reported, and take part in comparison.
func TestReadNewerMinor(t *testing.T) {
	raw := sampleTape(t)
	ls := lines(raw)
	hdr := strings.Replace(ls[0], fmt.Sprintf(`"minor":%d`, Minor), fmt.Sprintf(`"minor":%d`, Minor+2), 1)
	recs := append([]string{}, ls[1:len(ls)-1]...)
	recs = append(recs, fmt.Sprintf(`{"seq":%d,"op":"xattr","path":"a.txt","name":"user.k","value":"v"}`, len(recs)+1))
	recs = append(recs, `{"kind":"note","text":"from a newer writer"}`)
	tp, err := Read(strings.NewReader(rebuild(t, hdr, recs)))
	must(t, err)
	if len(tp.Unknown) != 1 || tp.Records[tp.Unknown[0]].Op != "xattr" {
		t.Fatalf("Unknown = %v", tp.Unknown)
	}
	if want := len(recs) + 1; len(tp.Skipped) != 1 || tp.Skipped[0] != want {
		t.Errorf("Skipped = %v, want [%d]", tp.Skipped, want)
	}
	u := tp.Records[tp.Unknown[0]]
	if string(u.Extra["name"]) != `"user.k"` || u.Extra["seq"] != nil {
		t.Errorf("extra fields %v", u.Extra)
	}
	if !strings.Contains(u.Canon(), `name="\"user.k\""`) {
		t.Errorf("canon %s", u.Canon())
	}
	other := &Tape{Records: append([]Record{}, tp.Records...)}
	other.Records[len(other.Records)-1].Extra = map[string]json.RawMessage{"name": []byte(`"user.other"`)}
	if d := Compare(tp, other, ModeGlobal); d == nil || d.A[0].Op != "xattr" {
		t.Errorf("unknown records not compared: %v", d)
	}
}

// TestReadEveryPrefix: any prefix of a tape longer than its header reads
// as a truncated tape whose records are a prefix of the whole; only the
// whole tape (with or without its last newline) has a trailer.
func TestReadEveryPrefix(t *testing.T) {
	raw := sampleTape(t)
	full, err := Read(bytes.NewReader(raw))
	must(t, err)
	start := bytes.IndexByte(raw, '\n') + 1
	for n := start; n <= len(raw); n++ {
		tp, err := Read(bytes.NewReader(raw[:n]))
		if err != nil {
			t.Fatalf("prefix of %d bytes: %v", n, err)
		}
		if want := n < len(raw)-1; tp.Truncated != want {
			t.Fatalf("prefix of %d/%d bytes: Truncated=%v", n, len(raw), tp.Truncated)
		}
		for i := range tp.Records {
			if tp.Records[i].Canon() != full.Records[i].Canon() {
				t.Fatalf("prefix of %d bytes: record %d differs", n, i)
			}
		}
	}
}

// failingWriter accepts limit bytes, then fails: a crash mid-run.
type failingWriter struct {
	buf   bytes.Buffer
	limit int
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.limit {
		k := w.limit - w.buf.Len()
		w.buf.Write(p[:k])
		return k, errors.New("disk full")
	}
	return w.buf.Write(p)
}

// TestCrashLeavesReadablePrefix: when the tape's writer dies, Close
// reports it and what was written reads as a truncated tape.
func TestCrashLeavesReadablePrefix(t *testing.T) {
	w := &failingWriter{limit: 700}
	rec := NewRecorder(w)
	dir := t.TempDir()
	fsys := rec.Wrap(afero.NewOsFs(), dir)
	for i := range 20 {
		afero.WriteFile(fsys, filepath.Join(dir, fmt.Sprint(i)), []byte("x"), 0o644)
	}
	if err := rec.Close(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Close: %v", err)
	}
	tp, err := Read(&w.buf)
	if err != nil {
		t.Fatal(err)
	}
	if !tp.Truncated || len(tp.Records) == 0 || len(tp.Records) >= 20 {
		t.Errorf("truncated=%v records=%d", tp.Truncated, len(tp.Records))
	}
	if err := rec.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func TestFileName(t *testing.T) {
	for _, c := range [][3]string{
		{"github.com/cowfs/cowfs/tape", "TestX/sub case", "github.com_cowfs_cowfs_tape__TestX_sub_case.tape"},
		{"", "TestY", "TestY.tape"},
	} {
		if got := FileName(c[0], c[1]); got != c[2] {
			t.Errorf("FileName(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}

// TestTrailerPerSpec recomputes the trailer of a recorded tape from its
// lines as FORMAT.md defines it, without the reader.
func TestTrailerPerSpec(t *testing.T) {
	raw := sampleTape(t)
	ls := lines(raw)
	var tr Trailer
	must(t, json.Unmarshal([]byte(ls[len(ls)-1]), &tr))
	// Format 1.2: BLAKE3 of the bytes before the trailer line.
	body := raw[:bytes.LastIndexByte(raw[:len(raw)-1], '\n')+1]
	if want := sum(body); tr.Chain != want {
		t.Errorf("chain %s, by the spec %s", tr.Chain, want)
	}
	if tr.Records != int64(len(ls)-2) {
		t.Errorf("records %d, lines %d", tr.Records, len(ls)-2)
	}
	// Final state of the sample: b.txt written then renamed to c.txt, d
	// made. Nothing proved b.txt absent: the write may have gone through a
	// symlink, and made a file with the permission asked for (perm) or
	// not.
	wantFinal := strings.Join([]string{
		"b.txt deleted",
		"c.txt moved from=b.txt size=4 hash=" + sum([]byte("beta")) + " perm=-rw-r--r--",
		"d dir mode=-rwxr-xr-x",
	}, "\n")
	if tr.Final != sum([]byte(wantFinal)) {
		t.Errorf("final digest %s, want BLAKE3 of\n%s", tr.Final, wantFinal)
	}
}

func TestNilWriter(t *testing.T) {
	rec := NewRecorder(nil)
	fsys := rec.Wrap(afero.NewMemMapFs(), "/")
	afero.WriteFile(fsys, "/a", []byte("x"), 0o644)
	if err := rec.Close(); !errors.Is(err, ErrNilWriter) {
		t.Errorf("Close: %v, want ErrNilWriter", err)
	}
}

// TestGoldenSample: a tape written by format 1.0 (testdata/sample.tape)
// stays readable and compares identical to a fresh recording of the same
// scenario: the format and the canonical form are stable.
func TestGoldenSample(t *testing.T) {
	f, err := os.Open("testdata/sample.tape")
	must(t, err)
	defer f.Close()
	golden, err := Read(f)
	must(t, err)
	fresh, err := Read(bytes.NewReader(sampleTape(t)))
	must(t, err)
	if c, d := Classify(golden, fresh); c != Identical {
		t.Errorf("golden vs fresh: %v\n%v", c, d)
	}
	// Hashes per FORMAT.md, from the bytes the scenario used.
	r := golden.Records
	if r[1].RHash != sum([]byte("alpha")) || r[2].Hash != sum([]byte("beta")) || r[6].List != sum([]byte("a.txt\nc.txt\nd")) {
		t.Errorf("golden hashes do not follow FORMAT.md: %v", golden.Canon(ModeGlobal))
	}
	// The final digest by 1.4's rules is the one the 1.0 writer wrote (the
	// rules of 1.0 to 1.4 agree on this scenario), and by 1.5's the fresh
	// one.
	if got := sum([]byte(strings.Join(golden.final(4), "\n"))); got != golden.Trailer.Final {
		t.Errorf("final digest changed: %s by 1.4's rules vs %s", got, golden.Trailer.Final)
	}
	if got := sum([]byte(strings.Join(golden.Final(), "\n"))); got != fresh.Trailer.Final {
		t.Errorf("final digest changed: %s vs %s", got, fresh.Trailer.Final)
	}
}

// TestReadErrorSaysTapeOnce: the sentinels carry the "tape:" prefix, and a
// ReadError, which wraps them, says it once, before the line number.
func TestReadErrorSaysTapeOnce(t *testing.T) {
	for _, err := range []error{ErrFormat, ErrVersion, ErrTrailer} {
		if !strings.HasPrefix(err.Error(), "tape: ") {
			t.Errorf("%q lacks the tape: prefix", err)
		}
	}
	for _, in := range []string{"", "not json\n", `{"kind":"record"}` + "\n"} {
		_, err := Read(strings.NewReader(in))
		if err == nil || strings.Contains(err.Error(), ": tape: ") || !strings.HasPrefix(err.Error(), "tape: ") {
			t.Errorf("Read(%q) = %v", in, err)
		}
	}
}

// TestReadTakesEveryRecordedPath: whatever name a program passes, the
// record the recorder makes of it is one Read accepts (Read refuses
// absolute and unclean paths).
func TestReadTakesEveryRecordedPath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	names := []string{"", ".", "..", "/", "a/", "a//b", "./a", "a/../b", "a/./b/", "nul\x00x", "bad\xff", dir, dir + "/", dir + "/../x", dir + "/a\x00", "../" + filepath.Base(dir) + "/a"}
	tp, raw := tapeOf(t, afero.NewOsFs(), dir, func(fsys afero.Fs) {
		for _, n := range names {
			fsys.Stat(n)
			fsys.Rename(n, n+"2")
		}
	})
	if len(tp.Records) != 2*len(names) {
		t.Errorf("%d records read back, %d made:\n%s", len(tp.Records), 2*len(names), raw)
	}
}
