package tape

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/afero"
)

// oddNames are names a Linux file system takes that JSON strings cannot
// carry as they are, or that look like the wire form of one.
var oddNames = []string{"bad\xff", "bad\xfe", "\"q\"", "\"bad\\xff\"", "x\xc3", "ok-é"}

// TestTapeOddNames records writes, stats and a listing of files whose
// names are not UTF-8 (and names starting with '"') on the real file
// system: Read accepts the tape (its trailer matches), every record names
// the file the program named, byte for byte (bad\xff and bad\xfe stay
// apart), the directory listing's names are the real ones, and the raw
// line spells the odd byte readably, as \xff.
func TestTapeOddNames(t *testing.T) {
	root := t.TempDir()
	var buf bytes.Buffer
	rec := NewRecorder(&buf)
	w := rec.Wrap(afero.NewOsFs(), root)
	for _, n := range oddNames {
		if err := afero.WriteFile(w, filepath.Join(root, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Stat(filepath.Join(root, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Rename(filepath.Join(root, "bad\xff"), filepath.Join(root, "moved\xff")); err != nil {
		t.Fatal(err)
	}
	if err := w.(afero.Linker).SymlinkIfPossible("bad\xfe", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := afero.ReadDir(w, root); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	raw := bytes.Clone(buf.Bytes())
	tp, err := Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("Read: %v\n%s", err, raw)
	}
	if tp.Trailer == nil {
		t.Fatal("no trailer")
	}
	var paths []string
	for _, r := range tp.Records {
		if r.Op == OpStat {
			paths = append(paths, r.Path)
		}
	}
	if !slices.Equal(paths, oddNames) {
		t.Errorf("stat records name %q, want %q", paths, oddNames)
	}
	renames := only(tp, OpRename, "")
	if len(renames) != 1 || renames[0].Path != "bad\xff" || renames[0].To != "moved\xff" {
		t.Errorf("rename records: %+v", renames)
	}
	if ls := only(tp, OpSymlink, ""); len(ls) != 1 || ls[0].Target != "bad\xfe" {
		t.Errorf("symlink records: %+v", ls)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range ents {
		want = append(want, e.Name())
	}
	var listed []string
	for _, r := range tp.Records {
		if r.Op == OpOpen && r.N > 0 {
			listed = r.Names
		}
	}
	if !slices.Equal(listed, want) {
		t.Errorf("listing recorded as %q, os lists %q", listed, want)
	}
	if !strings.Contains(string(raw), `"path":"\"bad\\xff\""`) {
		t.Errorf("bad\\xff is not spelled readably:\n%s", raw)
	}
	// Distinct names give distinct canonical lines and final entries.
	final := strings.Join(tp.Final(), "\n")
	for _, n := range []string{"bad\\xfe", "moved\\xff"} {
		if !strings.Contains(final, n) {
			t.Errorf("final state lacks %s:\n%s", n, final)
		}
	}
}

// TestWireStringRoundTrip: every string goes on the wire as valid UTF-8
// JSON text and comes back byte for byte, and a string that was valid
// UTF-8 and does not start with '"' goes as it is.
func TestWireStringRoundTrip(t *testing.T) {
	for _, s := range append(slices.Clone(oddNames), trickyStrings...) {
		b := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q: %s: %v", s, b, err)
		}
		got, err := unwireString(back)
		if err != nil || got != s {
			t.Errorf("%q goes as %s and comes back as %q, %v", s, b, got, err)
		}
	}
}

// TestCanonCoversEveryField: each field of Record but Seq, set alone to a
// non-zero value, changes the canonical line, so no field drops out of
// replay diff and check unnoticed. Fields are found by reflection: a new
// field fails here until Canon renders it.
func TestCanonCoversEveryField(t *testing.T) {
	base := Record{Seq: 1, Op: OpOpen, Path: "p"}
	typ := reflect.TypeFor[Record]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "Seq" {
			continue
		}
		r := base
		v := reflect.ValueOf(&r).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Int, reflect.Int64:
			v.SetInt(7)
		case reflect.Pointer:
			v.Set(reflect.New(f.Type.Elem()))
		case reflect.Slice:
			v.Set(reflect.MakeSlice(f.Type, 1, 1))
			if e := v.Index(0); e.Kind() == reflect.String {
				e.SetString("x")
			} else if e.Kind() == reflect.Struct {
				e.Field(0).SetInt(1)
			}
		case reflect.Map:
			v.Set(reflect.ValueOf(map[string]json.RawMessage{"k": json.RawMessage(`1`)}))
		default:
			t.Fatalf("field %s: kind %v not covered by this test", f.Name, v.Kind())
		}
		if r.Canon() == base.Canon() {
			t.Errorf("field %s set to %v leaves the canonical line as it was: %s", f.Name, v, r.Canon())
		}
	}
	// Seq alone is left out.
	r := base
	r.Seq = 2
	if r.Canon() != base.Canon() {
		t.Errorf("Seq changes the canonical line")
	}
}

// TestKnownFieldsCoverRecord: every JSON member of Record is a known
// field, so a record of an op from a newer minor version keeps only its
// truly unknown members in Extra (cmd was missing: it showed twice in the
// canonical line of such a record).
func TestKnownFieldsCoverRecord(t *testing.T) {
	typ := reflect.TypeFor[Record]()
	for i := range typ.NumField() {
		tag := typ.Field(i).Tag.Get("json")
		if tag == "-" {
			continue
		}
		key, _, _ := strings.Cut(tag, ",")
		if !strings.Contains(knownFields, ","+key+",") {
			t.Errorf("member %q of Record is not in knownFields", key)
		}
	}
}
