package tape

import (
	"fmt"
	"os"
	"reflect"
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
	b = strconv.AppendInt(b, r.Seq, 10)
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
			b = strconv.AppendInt(b, s.Off, 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, s.Len, 10)
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

// appendReadRest appends, after the seq number, the record of the most
// common handle: one that read a content version and did nothing else
// (members op, path, flag, rhash, rsize, spans), byte for byte what
// appendRecord gives for it when path, flag and rhash need no escape and
// rsize is above zero, which the caller makes sure of (emitRead; its
// constant parts are joined into as few appends as possible).
func appendReadRest(b []byte, path, flag, rhash string, rsize int64, spans []Span) []byte {
	b = append(b, `,"op":"open","path":"`...)
	b = append(b, path...)
	b = append(b, `","flag":"`...)
	b = append(b, flag...)
	b = append(b, `","rhash":"`...)
	b = append(b, rhash...)
	b = append(b, `","rsize":`...)
	b = strconv.AppendInt(b, rsize, 10)
	if len(spans) > 0 {
		b = append(b, `,"spans":[[`...)
		for i, s := range spans {
			if i > 0 {
				b = append(b, `],[`...)
			}
			b = strconv.AppendInt(b, s.Off, 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, s.Len, 10)
		}
		b = append(b, `]]`...)
	}
	return append(b, '}')
}

// appendStat appends the record of a stat, lstat or fstat, which has no
// fields but these: byte for byte appendRecord of Record{Seq: seq, Op: op,
// Path: path, Err: err} for a failure (err not empty; mode and size are
// ignored), or of Record{Seq: seq, Op: op, Path: path, Mode: mode.String(),
// Size: size} (TestAppendStatMatchesRecord). op is OpStat, OpLstat or
// OpFstat.
func appendStat(b []byte, seq int64, op, path, err string, mode os.FileMode, size int64) []byte {
	b = append(b, `{"seq":`...)
	return appendStatRest(strconv.AppendInt(b, seq, 10), op, path, err, mode, size)
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
		b = strconv.AppendInt(b, size, 10)
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
	return strconv.AppendInt(append(b, key...), v, 10)
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
// to escape.
func plainPrefix(s string) int {
	i := 0
	for i < len(s) && jsonSafe[s[i]] {
		i++
	}
	return i
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
