package gitdiff

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// streamMin is the size from which a File with Open is read in chunks
// rather than loaded: a binary one is then hashed, compared and encoded
// without ever being held in memory whole.
const streamMin = 1 << 20

// streamChunk is how much of a streamed file is held at once.
const streamChunk = 256 << 10

// probe reports whether the file f opens has a NUL byte, reading it in
// chunks up to the first one.
func probe(f *File) (bool, error) {
	r, err := f.Open()
	if err != nil {
		return false, err
	}
	defer r.Close()
	buf := make([]byte, streamChunk)
	for {
		n, err := io.ReadFull(r, buf)
		if bytes.IndexByte(buf[:n], 0) >= 0 {
			return true, nil
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// reader returns s's content as a stream.
func (s *side) reader() (io.ReadCloser, error) {
	if s.big == nil {
		return io.NopCloser(bytes.NewReader(s.data)), nil
	}
	r, err := s.big.Open()
	if err != nil {
		return nil, err
	}
	return &exactReader{r: r, left: s.size}, nil
}

// exactReader is a stream that must hold exactly left bytes: a file that
// changed size while the patch was written is an error, not a wrong patch.
type exactReader struct {
	r    io.ReadCloser
	left int64
}

var errSizeChanged = errors.New("content changed size while the patch was written")

func (e *exactReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if e.left < 0 || err == io.EOF && e.left > 0 {
		return n, errSizeChanged
	}
	return n, err
}

func (e *exactReader) Close() error { return e.r.Close() }

// length is s's content size.
func (s *side) length() int64 {
	if s.big != nil {
		return s.size
	}
	return int64(len(s.data))
}

// binary reports whether s must go into a binary patch (a streamed side
// is streamed only because it is binary).
func (s *side) binary() bool { return s.big != nil || isBinary(s.data) }

// blobID is s's git blob id, hashed in chunks for a streamed side, once.
func (s *side) blobID() (string, error) {
	if s.id != "" {
		return s.id, nil
	}
	if s.big == nil {
		s.id = blobID(s.data)
		return s.id, nil
	}
	r, err := s.reader()
	if err != nil {
		return "", err
	}
	defer r.Close()
	h := sha1.New()
	h.Write(strconv.AppendInt([]byte("blob "), s.size, 10))
	h.Write([]byte{0})
	if _, err := io.CopyBuffer(h, r, make([]byte, streamChunk)); err != nil {
		return "", err
	}
	var sum [sha1.Size]byte
	s.id = hex.EncodeToString(h.Sum(sum[:0]))
	return s.id, nil
}

// sameContent reports whether two sides hold the same bytes, comparing
// streamed sides by size and blob id.
func sameContent(a, b *side) (bool, error) {
	if a.big == nil && b.big == nil {
		return bytes.Equal(a.data, b.data), nil
	}
	if a.length() != b.length() {
		return false, nil
	}
	ida, err := a.blobID()
	if err != nil {
		return false, err
	}
	idb, err := b.blobID()
	return err == nil && ida == idb, err
}

// literalSide writes s as one "literal" hunk, deflating and encoding a
// streamed side chunk by chunk.
func (e *encoder) literalSide(s *side) error {
	if s == nil {
		return e.literal(nil)
	}
	if s.big == nil {
		return e.literal(s.data)
	}
	r, err := s.reader()
	if err != nil {
		return err
	}
	defer r.Close()
	w := e.w
	w.WriteString("literal ")
	w.WriteString(strconv.FormatInt(s.size, 10))
	w.WriteByte('\n')
	lw := &base85Lines{w: w}
	zw, _ := zlib.NewWriterLevel(lw, zlib.BestSpeed)
	if _, err := io.CopyBuffer(zw, r, make([]byte, streamChunk)); err != nil {
		return fmt.Errorf("gitdiff: reading content: %w", err)
	}
	if err := zw.Close(); err != nil {
		return err
	}
	lw.flush()
	w.WriteByte('\n')
	return nil
}

// base85Lines cuts the deflated stream into git's base85 lines of 52
// bytes each, as literal does for content in memory.
type base85Lines struct {
	w    interface{ Write([]byte) (int, error) }
	pend []byte
	line []byte
}

func (l *base85Lines) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(52-len(l.pend), len(p))
		l.pend = append(l.pend, p[:k]...)
		p = p[k:]
		if len(l.pend) == 52 {
			l.emit()
		}
	}
	return n, nil
}

func (l *base85Lines) emit() {
	l.line = append(l.line[:0], lengthChar(len(l.pend)))
	l.line = appendBase85(l.line, l.pend)
	l.line = append(l.line, '\n')
	l.w.Write(l.line)
	l.pend = l.pend[:0]
}

func (l *base85Lines) flush() {
	if len(l.pend) > 0 {
		l.emit()
	}
}
