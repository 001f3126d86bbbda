package tape

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// trickyStrings exercise every escaping rule of encoding/json.
var trickyStrings = []string{
	"", "a", "dir/file.txt", OutsidePath, RootPrefix + "/x", "a&b", "\"q\"", `back\slash`,
	"\x00\x01\x1f\x7f", "\b\f\n\r\t", "ünïcødé", "\u2028\u2029", "\xff\xfe", "a\xc3", "日本語/名前",
	"\U0001F600", "<script>", "\ufffd", "x\x1by",
}

// randomValue fills v (a settable value of a Record field) at random,
// failing on a kind it does not know: a field added to Record of a new kind
// must be taught here, and to appendRecord.
func randomValue(t *testing.T, rng *rand.Rand, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		if rng.IntN(3) == 0 {
			v.SetString("")
			return
		}
		s := trickyStrings[rng.IntN(len(trickyStrings))]
		if rng.IntN(2) == 0 {
			s += trickyStrings[rng.IntN(len(trickyStrings))]
		}
		v.SetString(s)
	case reflect.Int, reflect.Int64:
		switch rng.IntN(4) {
		case 0:
			v.SetInt(0)
		case 1:
			v.SetInt(math.MinInt64 >> (rng.IntN(2) * 33))
		default:
			v.SetInt(rng.Int64N(1<<40) - 1<<20)
		}
	case reflect.Pointer:
		if rng.IntN(2) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		randomValue(t, rng, p.Elem(), path)
		v.Set(p)
	case reflect.Slice:
		switch rng.IntN(3) {
		case 0:
			v.SetZero()
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			n := 1 + rng.IntN(4)
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := range n {
				randomValue(t, rng, s.Index(i), path)
			}
			v.Set(s)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[Span]() {
			v.Set(reflect.ValueOf(Span{Off: rng.Int64N(1 << 40), Len: rng.Int64N(1 << 30)}))
			return
		}
		t.Fatalf("%s: no random generator for struct %s", path, v.Type())
	default:
		t.Fatalf("%s: no random generator for kind %s", path, v.Kind())
	}
}

func randomRecord(t *testing.T, rng *rand.Rand) Record {
	var r Record
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Tag.Get("json") == "-" {
			continue
		}
		randomValue(t, rng, v.Field(i), f.Name)
	}
	return r
}

// TestAppendRecordMatchesJSON: the hand-written encoder gives the bytes
// encoding/json gives, on 20,000 random records with every escaping rule,
// omitted and present fields, and what it writes decodes back to the record.
func TestAppendRecordMatchesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 1))
	var buf []byte
	for i := range 20000 {
		r := randomRecord(t, rng)
		want, err := json.Marshal(wired(r))
		if err != nil {
			t.Fatal(err)
		}
		buf = appendRecord(buf[:0], &r)
		if !bytes.Equal(buf, want) {
			t.Fatalf("record %d %+v:\nappendRecord %s\njson.Marshal %s", i, r, buf, want)
		}
		var back Record
		if err := json.Unmarshal(buf, &back); err != nil {
			t.Fatalf("record %d: %s does not decode: %v", i, buf, err)
		}
		// Lossless: decoded and unwired, it encodes to the same bytes.
		if err := unwireRecord(&back); err != nil {
			t.Fatalf("record %d: %s: %v", i, buf, err)
		}
		if again := appendRecord(nil, &back); !bytes.Equal(again, buf) {
			t.Fatalf("record %d: %s reads back as %s", i, buf, again)
		}
	}
}

// TestAppendRecordCoversEveryField: a record with every field set encodes
// with every JSON key of Record's tags.
func TestAppendRecordCoversEveryField(t *testing.T) {
	one := 1
	r := Record{Seq: 1, Op: "o", Path: "p", To: "t", Err: "e", Flag: "f", Mode: "m", Size: 1, Hash: "h",
		RHash: "rh", RSize: 1, Spans: []Span{{1, 2}}, List: "l", N: 1, Names: []string{"n"}, Target: "tg",
		UID: &one, GID: &one, Atime: "a", Mtime: "mt", Fails: []string{"f"}, End: "end", Unhashed: "u", Cmd: []string{"c"}}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(appendRecord(nil, &r), &got); err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeFor[Record]()
	for i := range typ.NumField() {
		tag := typ.Field(i).Tag.Get("json")
		if tag == "-" {
			continue
		}
		key, _, _ := bytes.Cut([]byte(tag), []byte(","))
		if _, ok := got[string(key)]; !ok {
			t.Errorf("field %s (%q) missing from appendRecord's output; is it set above?", typ.Field(i).Name, key)
		}
	}
}

// wired returns r with every string member as it goes on the wire
// (wireString), for json.Marshal to encode as appendRecord does r.
func wired(r Record) Record {
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.String:
			f.SetString(wireString(f.String()))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String && !f.IsNil():
			ws := make([]string, f.Len())
			for j := range ws {
				ws[j] = wireString(f.Index(j).String())
			}
			f.Set(reflect.ValueOf(ws))
		}
	}
	return r
}

// FuzzAppendRecord: any strings in the string fields encode as
// encoding/json encodes them once through wireString.
func FuzzAppendRecord(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s, s, int64(len(s)))
	}
	f.Fuzz(func(t *testing.T, path, target string, size int64) {
		r := Record{Seq: size, Op: OpOpen, Path: path, Target: target, Size: size, Names: []string{path, target}}
		want, err := json.Marshal(wired(r))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendRecord(nil, &r); !bytes.Equal(got, want) {
			t.Fatalf("appendRecord %s\njson.Marshal %s", got, want)
		}
	})
}

// TestAppendStatMatchesRecord: the stat fast path encodes as appendRecord
// does the same record: failures with any outcome text, successes with
// any path, the common modes and random ones of every type bit.
func TestAppendStatMatchesRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 2))
	common := []os.FileMode{0o644, 0o755, 0o600, 0o666, os.ModeDir | 0o755, os.ModeDir | 0o700, os.ModeDir | 0o777}
	var got, want []byte
	for i := range 20000 {
		r := randomRecord(t, rng)
		ops := [...]string{OpStat, OpLstat, OpFstat}
		mode := common[rng.IntN(len(common))]
		if rng.IntN(2) == 0 {
			mode = os.FileMode(rng.Uint32()) & (os.ModeType | os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
		}
		s := Record{Seq: r.Seq, Op: ops[i%3], Path: r.Path, Err: r.Err}
		if s.Err == "" {
			s.Mode, s.Size = mode.String(), r.Size
		}
		got = appendStat(got[:0], s.Seq, s.Op, s.Path, s.Err, mode, r.Size)
		want = appendRecord(want[:0], &s)
		if !bytes.Equal(got, want) {
			t.Fatalf("record %d %+v:\nappendStat   %s\nappendRecord %s", i, s, got, want)
		}
	}
}

// TestModeKey: each common mode's constant is the mode as FileMode.String
// writes it, quoted, after its key.
func TestModeKey(t *testing.T) {
	n := 0
	for m := range os.FileMode(0o777) + 1 {
		for _, typ := range []os.FileMode{0, os.ModeDir, os.ModeSymlink} {
			if k := modeKey(typ | m); k != "" {
				n++
				if want := `","mode":"` + (typ | m).String() + `"`; k != want {
					t.Errorf("modeKey(%v) = %s, want %s", typ|m, k, want)
				}
			}
		}
	}
	if n != 7 {
		t.Errorf("%d modes have a constant, want 7", n)
	}
}

// TestAppendJSONStringWords: the eight-bytes-at-a-time scan stops at every
// byte value that needs an escape, at every position in a word and in the
// tail, as encoding/json escapes it.
func TestAppendJSONStringWords(t *testing.T) {
	for c := range 256 {
		for n := 1; n <= 20; n++ {
			for at := range n {
				s := []byte(strings.Repeat("a", n))
				s[at] = byte(c)
				want, err := json.Marshal(wireString(string(s)))
				if err != nil {
					t.Fatal(err)
				}
				if got := appendJSONString(nil, string(s)); !bytes.Equal(got, want) {
					t.Fatalf("byte %#x at %d of %d: appendJSONString %s, json.Marshal %s", c, at, n, got, want)
				}
			}
		}
	}
}

// TestAppendReadRest: records shaped like a read-only handle's (op,
// path, flag, rhash, rsize above zero, spans) whose strings need no
// escape encode as encoding/json encodes them; the strings come from
// plain ones and from trickyStrings, and records whose strings need an
// escape are left out as emitRead leaves them to the Record path.
func TestAppendReadRest(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 5))
	pick := func() string {
		if rng.IntN(4) == 0 {
			return trickyStrings[rng.IntN(len(trickyStrings))]
		}
		return []string{"file4k", "dir/sub/name.go", "r", "r|sync", emptyHash, "a b"}[rng.IntN(6)]
	}
	n := 0
	var buf []byte
	for range 20000 {
		r := Record{Seq: rng.Int64N(1 << 40), Op: OpOpen, Path: pick(), Flag: pick(), RHash: pick(), RSize: 1 + rng.Int64N(1<<40)}
		for range rng.IntN(4) {
			r.Spans = append(r.Spans, Span{Off: rng.Int64N(1 << 40), Len: rng.Int64N(1 << 30)})
		}
		if r.Path == "" || r.Flag == "" || r.RHash == "" || !jsonPlain(r.Path) || !jsonPlain(r.Flag) || !jsonPlain(r.RHash) {
			continue
		}
		n++
		want, err := json.Marshal(wired(r))
		if err != nil {
			t.Fatal(err)
		}
		buf = appendReadRest(strconv.AppendInt(append(buf[:0], `{"seq":`...), r.Seq, 10), r.Path, r.Flag, r.RHash, r.RSize, r.Spans)
		if !bytes.Equal(buf, want) {
			t.Fatalf("record %+v:\nappendReadRest %s\njson.Marshal   %s", r, buf, want)
		}
	}
	if n < 5000 {
		t.Errorf("%d of 20000 records had the shape, want at least 5000", n)
	}
}
