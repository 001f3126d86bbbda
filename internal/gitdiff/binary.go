package gitdiff

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
)

// nullID is git's all-zero object id, the id of a missing side.
const nullID = "0000000000000000000000000000000000000000"

// isBinary reports whether data must go into a binary patch. git's rule is
// a NUL in the first 8000 bytes (FIRST_FEW_BYTES); here a NUL anywhere is
// enough, so that a text patch never carries one.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data, 0) >= 0
}

// blobID is the git blob object id of data: SHA-1 of "blob <len>\x00" and data.
func blobID(data []byte) string {
	h := sha1.New()
	var hdr [32]byte
	b := append(hdr[:0], "blob "...)
	b = strconv.AppendInt(b, int64(len(data)), 10)
	b = append(b, 0)
	h.Write(b)
	h.Write(data)
	var sum [sha1.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// literal writes one "literal" hunk of a GIT binary patch: the size, the
// zlib-deflated bytes in git's base85 lines, then a blank line.
func (e *encoder) literal(data []byte) error {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestSpeed) // git deflates patches at Z_BEST_SPEED too
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	w := e.w
	w.WriteString("literal ")
	w.WriteString(strconv.Itoa(len(data)))
	w.WriteByte('\n')
	line := e.scratch[:0]
	for b := z.Bytes(); len(b) > 0; {
		n := min(len(b), 52)
		line = line[:0]
		line = append(line, lengthChar(n))
		line = appendBase85(line, b[:n])
		line = append(line, '\n')
		w.Write(line)
		b = b[n:]
	}
	e.scratch = line
	w.WriteByte('\n')
	return nil
}

// lengthChar encodes a line's byte count (1..52) as git does: 'A'..'Z' for
// 1..26, 'a'..'z' for 27..52.
func lengthChar(n int) byte {
	if n <= 26 {
		return byte('A' + n - 1)
	}
	return byte('a' + n - 27)
}

// base85Alphabet is git's (base85.c), not Ascii85's.
const base85Alphabet = "0123456789" +
	"ABCDEFGHIJKLMNOPQRSTUVWXYZ" +
	"abcdefghijklmnopqrstuvwxyz" +
	"!#$%&()*+-;<=>?@^_`{|}~"

// appendBase85 appends git's base85 of data: each group of 4 bytes, the
// last one padded with zeros, becomes 5 characters, most significant first.
func appendBase85(dst, data []byte) []byte {
	for len(data) > 0 {
		var acc uint32
		for i := range 4 {
			acc <<= 8
			if i < len(data) {
				acc |= uint32(data[i])
			}
		}
		var out [5]byte
		for i := 4; i >= 0; i-- {
			out[i] = base85Alphabet[acc%85]
			acc /= 85
		}
		dst = append(dst, out[:]...)
		data = data[min(4, len(data)):]
	}
	return dst
}
