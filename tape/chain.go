package tape

import (
	"encoding/hex"

	"github.com/zeebo/blake3"
)

// chainHash is a tape's chain hash (FORMAT.md, "Trailer"): BLAKE3-256 of
// the header line, then, for each later line but the trailer, of the
// previous value followed by the line. The Recorder computes it as it
// writes and Read as it reads; this is the one implementation.
type chainHash struct {
	sum [32]byte
	h   *blake3.Hasher // reused from line to line
}

// start begins the chain with the header line.
func (c *chainHash) start(header []byte) {
	c.sum = blake3.Sum256(header)
}

// add chains one line.
func (c *chainHash) add(line []byte) {
	if c.h == nil {
		c.h = blake3.New()
	}
	c.h.Reset()
	c.h.Write(c.sum[:])
	c.h.Write(line)
	c.h.Sum(c.sum[:0])
}

// String returns the chain value in hex, as the trailer holds it.
func (c *chainHash) String() string { return hex.EncodeToString(c.sum[:]) }
