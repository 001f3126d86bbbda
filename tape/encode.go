package tape

import (
	"strconv"
	"unicode/utf8"
)

// appendRecord appends rec as one JSON object, byte for byte what
// encoding/json's Marshal gives for a Record (field order, omitempty, HTML
// escaping, \ufffd for invalid UTF-8), without reflection: the recorder
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

// appendStat appends the record of a stat or lstat, which has no fields
// but these: byte for byte appendRecord of Record{Seq: seq, Op: op, Path:
// path, Err: err, Mode: mode, Size: size} (TestAppendStatMatchesRecord).
// op is OpStat, OpLstat or OpFstat, which need no escaping.
func appendStat(b []byte, seq int64, op, path, err, mode string, size int64) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"op":"`...)
	b = append(b, op...)
	b = append(b, `","path":`...)
	b = appendJSONString(b, path)
	b = appendField(b, `,"err":`, err)
	b = appendField(b, `,"mode":`, mode)
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
// <, > and & escaped, control bytes as \n-style or \u00XX escapes, invalid
// UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
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
