package tape

import (
	"bytes"
	"encoding/hex"

	"github.com/zeebo/blake3"
)

// runningChainMinor is the first minor version whose chain hash is one
// running BLAKE3 over the lines (FORMAT.md, "Chain hash"); older tapes
// chain a finalized hash per line.
const runningChainMinor = 2

// chainHash is a tape's chain hash (FORMAT.md, "Chain hash"), for the
// header's minor version:
//
//   - minor 2 and later: BLAKE3-256 of the bytes of every line before the
//     trailer, each followed by its newline, hashed as they come and
//     finished once, when String is called;
//   - minor 0 and 1: BLAKE3-256 of the header line, then, for each later
//     line but the trailer, of the previous value followed by the line.
//
// The Recorder computes it as it writes and Read as it reads; this is the
// one implementation.
type chainHash struct {
	running bool
	h       *blake3.Hasher
	sum     [32]byte // per-line chain (minor < 2): the value so far
	nl      [1]byte  // the line end, for the running form
}

// start begins the chain of a tape of the given minor version with its
// header line (without the newline).
func (c *chainHash) start(minor int, header []byte) {
	c.running = minor >= runningChainMinor
	c.nl[0] = '\n'
	if c.running {
		if c.h == nil {
			c.h = blake3.New()
		}
		c.h.Reset()
		c.add(header)
		return
	}
	c.sum = blake3.Sum256(header)
}

// add chains one line (without its newline).
func (c *chainHash) add(line []byte) {
	if c.h == nil {
		c.h = blake3.New()
	}
	if c.running {
		c.h.Write(line)
		c.h.Write(c.nl[:])
		return
	}
	c.h.Reset()
	c.h.Write(c.sum[:])
	c.h.Write(line)
	c.h.Sum(c.sum[:0])
}

// addLine chains one line given with its newline, as it is written: in the
// running form the bytes hashed are exactly the line and its newline, in
// one Write instead of two.
func (c *chainHash) addLine(lineNL []byte) {
	if c.running && c.h != nil {
		c.h.Write(lineNL)
		return
	}
	c.add(lineNL[:len(lineNL)-1])
}

// addLines chains whole lines given with their newlines, in order: in
// the running form in one Write (the hash of the lines in one go is the
// hash of them one by one), else line by line.
func (c *chainHash) addLines(lines []byte) {
	if c.running && c.h != nil {
		c.h.Write(lines)
		return
	}
	for len(lines) > 0 {
		i := bytes.IndexByte(lines, '\n') + 1
		c.addLine(lines[:i])
		lines = lines[i:]
	}
}

// String returns the chain value in hex, as the trailer holds it. In the
// running form it finishes the hash of the lines so far; more lines may
// still be added.
func (c *chainHash) String() string {
	if c.running && c.h != nil {
		var sum [32]byte
		c.h.Sum(sum[:0])
		return hex.EncodeToString(sum[:])
	}
	return hex.EncodeToString(c.sum[:])
}
