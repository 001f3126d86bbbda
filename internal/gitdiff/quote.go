package gitdiff

import "strings"

// cqLetter is the letter git's quote_c_style uses to escape c, or 0 when
// c gets an octal escape.
func cqLetter(c byte) byte {
	switch c {
	case '\a':
		return 'a'
	case '\b':
		return 'b'
	case '\t':
		return 't'
	case '\n':
		return 'n'
	case '\v':
		return 'v'
	case '\f':
		return 'f'
	case '\r':
		return 'r'
	case '"', '\\':
		return c
	}
	return 0
}

// mustQuote reports whether git quotes a name containing c, with
// core.quotePath at its default (true): control bytes, DEL, '"', '\\' and
// every byte of 0x80 and above. Spaces are not quoted.
func mustQuote(c byte) bool {
	return c < 0x20 || c == '"' || c == '\\' || c >= 0x7f
}

func needsQuote(s string) bool {
	for i := 0; i < len(s); i++ {
		if mustQuote(s[i]) {
			return true
		}
	}
	return false
}

// quoteName renders prefix+name the way git's quote_two does: unchanged when
// no byte needs quoting, otherwise one C-quoted string with the prefix
// inside the quotes.
func quoteName(prefix, name string) string {
	if !needsQuote(prefix) && !needsQuote(name) {
		return prefix + name
	}
	var b strings.Builder
	b.Grow(len(prefix) + len(name) + 8)
	b.WriteByte('"')
	quoteTo(&b, prefix)
	quoteTo(&b, name)
	b.WriteByte('"')
	return b.String()
}

func quoteTo(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !mustQuote(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('\\')
		if l := cqLetter(c); l != 0 {
			b.WriteByte(l)
			continue
		}
		b.WriteByte('0' + c>>6)
		b.WriteByte('0' + c>>3&7)
		b.WriteByte('0' + c&7)
	}
}
