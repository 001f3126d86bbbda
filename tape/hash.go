package tape

import (
	"encoding/hex"
	"sync"

	"github.com/zeebo/blake3"
)

// pools holds what a recorder reuses across handles. A blake3.Hasher
// carries an 8 KiB block buffer and a chaining-value stack; pooling them
// keeps a read-heavy run from allocating ~10 KiB per handle.
type pools struct {
	hashers sync.Pool // *blake3.Hasher
	bufs    sync.Pool // *[]byte of copyBufSize, for read-backs
}

func newPools() *pools {
	p := &pools{}
	p.hashers.New = func() any { return blake3.New() }
	p.bufs.New = func() any { b := make([]byte, copyBufSize); return &b }
	return p
}

const copyBufSize = 64 << 10

// emptyHash is BLAKE3 of no bytes.
const emptyHash = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"

// HashBytes returns the lowercase hex BLAKE3-256 of b, the form every hash
// in a tape takes.
func HashBytes(b []byte) string {
	s := blake3.Sum256(b)
	return hex.EncodeToString(s[:])
}

// stream hashes a prefix [0, n) of one content version as its bytes flow
// past, and optionally keeps a copy of them (content capture) while they
// fit in max bytes.
type stream struct {
	p   *pools
	h   *blake3.Hasher // nil until the first byte, and for an empty stream
	n   int64
	max int64 // capture bound; 0: no capture
	buf []byte
	cut bool // capture abandoned: more than max bytes
}

func (s *stream) feed(p []byte) {
	if len(p) == 0 {
		return
	}
	if s.h == nil {
		s.h = s.p.hashers.Get().(*blake3.Hasher)
		s.h.Reset()
	}
	s.h.Write(p)
	s.n += int64(len(p))
	if s.max > 0 && !s.cut {
		if s.n > s.max {
			s.cut, s.buf = true, nil
		} else {
			s.buf = append(s.buf, p...)
		}
	}
}

// zeros is never written: the bytes of a hole.
var zeros [copyBufSize]byte

// feedZeros hashes n zero bytes: the hole a write past the end leaves.
func (s *stream) feedZeros(n int64) {
	for n > 0 {
		k := min(n, int64(len(zeros)))
		s.feed(zeros[:k])
		n -= k
	}
}

// sum returns the hex hash of the bytes fed so far without disturbing the
// stream, and the captured bytes when they are all there.
func (s *stream) sum() (string, []byte) {
	if s.h == nil {
		return emptyHash, s.captured()
	}
	var out [32]byte
	s.h.Sum(out[:0])
	return hex.EncodeToString(out[:]), s.captured()
}

func (s *stream) captured() []byte {
	if s.max > 0 && !s.cut {
		if s.buf == nil {
			return []byte{}
		}
		return s.buf
	}
	return nil
}

// reset empties the stream (content truncated to zero).
func (s *stream) reset() {
	if s.h != nil {
		s.h.Reset()
	}
	s.n = 0
	s.buf, s.cut = s.buf[:0], false
}

// release returns the hasher to the pool.
func (s *stream) release() {
	if s.h != nil {
		s.p.hashers.Put(s.h)
		s.h = nil
	}
	s.buf = nil
}
