package tape

import (
	"fmt"
	"math/bits"
	"os"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"
)

// appendRecord appends rec as one JSON object, byte for byte what
// encoding/json's Marshal gives for a Record whose strings went through
// wireString (field order, omitempty, HTML escaping), without reflection: the recorder
// encodes every record on the hot path. TestAppendRecordMatchesJSON holds it
// to json.Marshal on random records, so a field added to Record must be
// added here.
func appendRecord(b []byte, r *Record) []byte {
	b = append(b, `{"seq":`...)
	b = appendDecimal(b, r.Seq)
	if out, ok := appendReadHandle(b, r); ok {
		return out
	}
	b = append(b, `,"op":`...)
	b = appendJSONString(b, r.Op)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, r.Path)
	b = appendField(b, `,"to":`, r.To)
	b = appendField(b, `,"err":`, r.Err)
	b = appendField(b, `,"flag":`, r.Flag)
	b = appendField(b, `,"mode":`, r.Mode)
	b = appendInt(b, `,"size":`, r.Size)
	b = appendField(b, `,"hash":`, r.Hash)
	b = appendField(b, `,"rhash":`, r.RHash)
	b = appendInt(b, `,"rsize":`, r.RSize)
	if len(r.Spans) > 0 {
		b = append(b, `,"spans":[`...)
		for i, s := range r.Spans {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = appendDecimal(b, s.Off)
			b = append(b, ',')
			b = appendDecimal(b, s.Len)
			b = append(b, ']')
		}
		b = append(b, ']')
	}
	b = appendField(b, `,"list":`, r.List)
	b = appendInt(b, `,"n":`, int64(r.N))
	b = appendStrings(b, `,"names":`, r.Names)
	b = appendField(b, `,"target":`, r.Target)
	if r.UID != nil {
		b = append(b, `,"uid":`...)
		b = strconv.AppendInt(b, int64(*r.UID), 10)
	}
	if r.GID != nil {
		b = append(b, `,"gid":`...)
		b = strconv.AppendInt(b, int64(*r.GID), 10)
	}
	b = appendField(b, `,"atime":`, r.Atime)
	b = appendField(b, `,"mtime":`, r.Mtime)
	b = appendStrings(b, `,"fails":`, r.Fails)
	b = appendField(b, `,"end":`, r.End)
	b = appendField(b, `,"unhashed":`, r.Unhashed)
	b = appendStrings(b, `,"cmd":`, r.Cmd)
	return append(b, '}')
}

// appendReadHandle appends, after the seq number, the record of the most
// common handle: one that read a content version and did nothing else
// (members op, path, flag, rhash, rsize, spans; no error, write, listing
// or failure), with path, flag and rhash needing no escape. Its constant
// parts are joined into as few appends as possible. ok is false, and b
// unchanged, for any other record (TestAppendReadHandle).
func appendReadHandle(b []byte, r *Record) (out []byte, ok bool) {
	if r.Op != OpOpen || r.RHash == "" || r.RSize <= 0 ||
		r.To != "" || r.Err != "" || r.Mode != "" || r.Size != 0 || r.Hash != "" ||
		r.List != "" || r.N != 0 || len(r.Names) != 0 || r.Target != "" || r.UID != nil || r.GID != nil ||
		r.Atime != "" || r.Mtime != "" || len(r.Fails) != 0 || r.End != "" || r.Unhashed != "" || len(r.Cmd) != 0 ||
		r.Flag == "" || !jsonPlain(r.Path) || !jsonPlain(r.Flag) || !jsonPlain(r.RHash) {
		return b, false
	}
	b = append(b, `,"op":"open","path":"`...)
	b = append(b, r.Path...)
	b = append(b, `","flag":"`...)
	b = append(b, r.Flag...)
	b = append(b, `","rhash":"`...)
	b = append(b, r.RHash...)
	b = append(b, `","rsize":`...)
	b = appendDecimal(b, r.RSize)
	if len(r.Spans) > 0 {
		b = append(b, `,"spans":[[`...)
		for i, s := range r.Spans {
			if i > 0 {
				b = append(b, `],[`...)
			}
			b = appendDecimal(b, s.Off)
			b = append(b, ',')
			b = appendDecimal(b, s.Len)
		}
		b = append(b, `]]`...)
	}
	return append(b, '}'), true
}

// appendStat appends the record of a stat, lstat or fstat, which has no
// fields but these: byte for byte appendRecord of Record{Seq: seq, Op: op,
// Path: path, Err: err} for a failure (err not empty; mode and size are
// ignored), or of Record{Seq: seq, Op: op, Path: path, Mode: mode.String(),
// Size: size} (TestAppendStatMatchesRecord). op is OpStat, OpLstat or
// OpFstat.
func appendStat(b []byte, seq int64, op, path, err string, mode os.FileMode, size int64) []byte {
	b = append(b, `{"seq":`...)
	return appendStatRest(appendDecimal(b, seq), op, path, err, mode, size)
}

// appendStatRest is appendStat after the seq number. Stat is the most
// frequent call: in the common record (no error, a path with nothing to
// escape, a common mode) the constant parts are joined into as few
// appends as possible, each small append costing about as much as its
// bytes.
func appendStatRest(b []byte, op, path, err string, mode os.FileMode, size int64) []byte {
	key := statPathKey(op)
	if err != "" || key == "" || !jsonPlain(path) {
		return appendStatAny(b, op, path, err, mode, size)
	}
	b = append(b, key...)
	b = append(b, path...)
	if mk := modeKey(mode); mk != "" {
		b = append(b, mk...)
	} else {
		b = append(b, `","mode":`...)
		b = appendJSONString(b, mode.String())
	}
	if size != 0 {
		b = append(b, `,"size":`...)
		b = appendDecimal(b, size)
	}
	return append(b, '}')
}

// statPathKey is what follows the seq number of a record of op up to the
// path's first byte.
func statPathKey(op string) string {
	switch op {
	case OpStat:
		return `,"op":"stat","path":"`
	case OpLstat:
		return `,"op":"lstat","path":"`
	case OpFstat:
		return `,"op":"fstat","path":"`
	}
	return ""
}

// modeKey is what follows a path up to the mode's closing quote, for the
// modes most files and directories have; "" for others. Each is
// `","mode":"` + mode.String() + `"` (TestModeKey).
func modeKey(m os.FileMode) string {
	switch m {
	case 0o644:
		return `","mode":"-rw-r--r--"`
	case 0o755:
		return `","mode":"-rwxr-xr-x"`
	case 0o600:
		return `","mode":"-rw-------"`
	case 0o666:
		return `","mode":"-rw-rw-rw-"`
	case os.ModeDir | 0o755:
		return `","mode":"drwxr-xr-x"`
	case os.ModeDir | 0o700:
		return `","mode":"drwx------"`
	case os.ModeDir | 0o777:
		return `","mode":"drwxrwxrwx"`
	}
	return ""
}

// appendStatAny is appendStatRest for any strings.
func appendStatAny(b []byte, op, path, err string, mode os.FileMode, size int64) []byte {
	b = append(b, `,"op":`...)
	b = appendJSONString(b, op)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, path)
	if err != "" {
		b = append(b, `,"err":`...)
		return append(appendJSONString(b, err), '}')
	}
	b = append(b, `,"mode":`...)
	b = appendJSONString(b, mode.String())
	b = appendInt(b, `,"size":`, size)
	return append(b, '}')
}

// appendDecimal appends v in decimal, as strconv.AppendInt(b, v, 10)
// does, but writes the digits of a non-negative v in place instead of
// through a scratch buffer and a copy: seq, size and span numbers are a
// third of a record's encoding otherwise (TestAppendDecimal).
func appendDecimal(b []byte, v int64) []byte {
	if v < 0 {
		return strconv.AppendInt(b, v, 10)
	}
	if v < 10 {
		return append(b, byte('0'+v))
	}
	u := uint64(v)
	// Digits: log10 from the bit length (1233/4096 ≈ log10 2), one
	// compare to correct it.
	t := bits.Len64(u) * 1233 >> 12
	n := t + 1
	if u < pow10[t] {
		n--
	}
	i := len(b) + n
	b = slices.Grow(b, n)[:i]
	for u >= 100 {
		d := u % 100 * 2
		u /= 100
		i -= 2
		b[i], b[i+1] = decimalPairs[d], decimalPairs[d+1]
	}
	if u >= 10 {
		b[i-2], b[i-1] = decimalPairs[u*2], decimalPairs[u*2+1]
	} else {
		b[i-1] = byte('0' + u)
	}
	return b
}

// pow10[i] is 10 to the i.
var pow10 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// decimalPairs holds "00" to "99".
const decimalPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// appendField appends key and the string v unless v is empty (omitempty).
func appendField(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendJSONString(append(b, key...), v)
}

// appendInt appends key and v unless v is zero (omitempty).
func appendInt(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	return appendDecimal(append(b, key...), v)
}

// appendStrings appends key and a JSON array of vs unless vs is empty.
func appendStrings(b []byte, key string, vs []string) []byte {
	if len(vs) == 0 {
		return b
	}
	b = append(append(b, key...), '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, v)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// jsonSafe[c] is true for the ASCII bytes encoding/json copies as they
// are: printable, not '"', '\\', '<', '>' or '&'. Bytes from 0x80 up are
// false: they start a rune that appendJSONString decodes.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		switch c {
		case '"', '\\', '<', '>', '&':
		default:
			t[c] = true
		}
	}
	return t
}()

// appendJSONString appends s quoted as encoding/json quotes a string:
// <, > and & escaped, control bytes as \n-style or \u00XX escapes, U+2028
// and U+2029 escaped. A string that is not valid UTF-8, or that starts
// with '"', is first put in its Go-quoted form (see [wireString]), so any
// byte string survives the trip.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	// Most strings (paths, hex hashes, modes) need no escape: copy them
	// in one append.
	i := plainPrefix(s)
	if i == len(s) {
		b = append(b, s...)
		return append(b, '"')
	}
	if w := wireString(s); len(w) != len(s) {
		s, i = w, 0
	}
	return appendJSONStringFrom(b, s, i)
}

// wireString is how a record's string member goes on the wire (minor 3):
// s itself when it is valid UTF-8 and does not start with '"', otherwise
// strconv.Quote(s), which starts with '"' and spells each byte that is not
// UTF-8 as \xHH. Readers of minor 3 and later undo it ([unwireString]).
func wireString(s string) string {
	if len(s) > 0 && s[0] == '"' || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	return s
}

// unwireString undoes wireString.
func unwireString(s string) (string, error) {
	if len(s) == 0 || s[0] != '"' {
		return s, nil
	}
	u, err := strconv.Unquote(s)
	if err != nil {
		return "", fmt.Errorf("member %s: a value starting with '\"' must be a Go-quoted string: %v", s, err)
	}
	return u, nil
}

// unwireRecord undoes wireString in every string member of r (string and
// []string fields alike, found by reflection so that no new member is
// missed).
func unwireRecord(r *Record) error {
	v := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.String:
			u, err := unwireString(f.String())
			if err != nil {
				return err
			}
			f.SetString(u)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			for j := range f.Len() {
				u, err := unwireString(f.Index(j).String())
				if err != nil {
					return err
				}
				f.Index(j).SetString(u)
			}
		}
	}
	return nil
}

// jsonPlain reports whether encoding/json writes s as it is between quotes.
func jsonPlain(s string) bool { return plainPrefix(s) == len(s) }

// plainPrefix returns the length of the longest prefix of s with no byte
// to escape, looking at eight bytes at a time.
func plainPrefix(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if needsEscape(load64(s[i:])) {
			break
		}
	}
	for i < len(s) && jsonSafe[s[i]] {
		i++
	}
	return i
}

// load64 reads s[0:8] little-endian (s has at least 8 bytes); the
// compiler makes it one load.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

const (
	lsb = 0x0101010101010101 // 0x01 in every byte
	msb = 0x8080808080808080 // 0x80 in every byte
)

// needsEscape reports whether any of the eight bytes in x is not
// jsonSafe: below 0x20, from 0x80 up, or one of " & < > \\. It uses the
// word tricks "has a zero byte" ((v-0x01..)&^v&0x80..) and "has a byte
// below n" ((v-n*0x01..)&^v&0x80..), which are exact as yes/no answers:
// a borrow only spreads upwards from a byte that itself satisfies the
// test. '"' (0x22) and '&' (0x26) differ in bit 2 only, '<' (0x3c) and
// '>' (0x3e) in bit 1 only, so setting that bit tests both with one
// compare.
func needsEscape(x uint64) bool {
	qa := (x | lsb*0x04) ^ (lsb * 0x26) // zero where x is '"' or '&'
	lg := (x | lsb*0x02) ^ (lsb * 0x3e) // zero where x is '<' or '>'
	bs := x ^ (lsb * '\\')              // zero where x is '\\'
	hit := x |
		(x-lsb*0x20)&^x |
		(qa-lsb)&^qa |
		(lg-lsb)&^lg |
		(bs-lsb)&^bs
	return hit&msb != 0
}

// appendJSONStringFrom is appendJSONString's general loop; s[:i] is known
// to need no escape.
func appendJSONStringFrom(b []byte, s string, i int) []byte {
	start := 0
	for i < len(s) {
		c := s[i]
		if jsonSafe[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
