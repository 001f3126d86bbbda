package tape

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/cowfs/cowfs/internal/relpath"
)

// Errors of Read, wrapped in a *ReadError naming the line.
var (
	// ErrFormat: the input is not a tape (bad JSON, missing or second
	// header, fields of the wrong shape, lines after the trailer).
	ErrFormat = errors.New("tape: malformed tape")
	// ErrVersion: the tape's major version is newer than this reader's,
	// or its hash algorithm is not blake3.
	ErrVersion = errors.New("tape: unsupported tape version")
	// ErrTrailer: the trailer does not match the records (count, final
	// state digest or chain hash): the tape was altered or spliced.
	ErrTrailer = errors.New("tape: trailer does not match the records")
)

// ReadError is the error of Read: what is wrong, and on which line (1 is
// the header; 0 when the input is empty, and the message names no line).
type ReadError struct {
	Line int
	Err  error
}

// Error says "tape:" once: the sentinel Err wraps carries the prefix,
// which moves in front of the line number.
func (e *ReadError) Error() string {
	msg := strings.TrimPrefix(e.Err.Error(), "tape: ")
	if e.Line == 0 { // not about a line: the input is empty
		return "tape: " + msg
	}
	return fmt.Sprintf("tape: line %d: %s", e.Line, msg)
}
func (e *ReadError) Unwrap() error { return e.Err }

// MaxLine bounds the length of one line Read accepts.
const MaxLine = 16 << 20

// Read parses a tape. A tape without trailer (cut short by a crash, or
// still being written) is returned with Truncated set and a nil error; a
// last line without its newline that does not parse is taken as a partial
// write and dropped. Read rejects, with a *ReadError wrapping ErrFormat,
// ErrVersion or ErrTrailer: a newer major version, a second header,
// malformed JSON, sequence numbers out of order, and a trailer whose count,
// final digest or chain hash disagrees with the records (the chain as
// FORMAT.md defines it for the tape's minor version: per line before 1.2,
// one running hash from 1.2 on). Records with ops
// unknown to this reader are kept (Tape.Unknown) when the tape's minor
// version is newer than Minor, and rejected otherwise; lines of unknown
// kind from a newer minor version are skipped and their line numbers
// listed in Tape.Skipped.
func Read(r io.Reader) (*Tape, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	t := &Tape{}
	var chain chainHash
	lineNo := 0
	fail := func(err error, format string, args ...any) (*Tape, error) {
		return nil, &ReadError{Line: lineNo, Err: fmt.Errorf("%w: %s", err, fmt.Sprintf(format, args...))}
	}
	for {
		line, rerr := readLine(br)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			lineNo++
			return fail(ErrFormat, "%v", rerr)
		}
		if len(line) == 0 && errors.Is(rerr, io.EOF) {
			break
		}
		lineNo++
		complete := len(line) > 0 && line[len(line)-1] == '\n'
		line = bytes.TrimSuffix(line, []byte("\n"))
		last := errors.Is(rerr, io.EOF)

		var kind struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(line, &kind); err != nil {
			if last && !complete && lineNo > 1 {
				t.Truncated = true // a write cut in the middle
				return t, nil
			}
			return fail(ErrFormat, "invalid JSON: %v", err)
		}
		if lineNo == 1 {
			if kind.Kind != "header" {
				return fail(ErrFormat, "first line is not a header (kind %q)", kind.Kind)
			}
			if err := parseHeader(line, &t.Header); err != nil {
				return nil, &ReadError{Line: 1, Err: err}
			}
			chain.start(t.Header.Minor, line)
			if last {
				break
			}
			continue
		}
		if t.Trailer != nil {
			return fail(ErrFormat, "line after the trailer")
		}
		switch kind.Kind {
		case "header":
			return fail(ErrFormat, "second header")
		case "trailer":
			var tr Trailer
			if err := strictUnmarshal(line, &tr); err != nil {
				return fail(ErrFormat, "trailer: %v", err)
			}
			if err := checkTrailer(t, &tr, &chain); err != nil {
				return fail(ErrTrailer, "%v", err)
			}
			t.Trailer = &tr
		case "", "record":
			rec, err := parseRecord(line, t)
			if err != nil {
				return fail(ErrFormat, "%v", err)
			}
			t.Records = append(t.Records, rec)
		default:
			if t.Header.Minor <= Minor {
				return fail(ErrFormat, "unknown line kind %q in a %d.%d tape", kind.Kind, t.Header.Version, t.Header.Minor)
			}
			t.Skipped = append(t.Skipped, lineNo)
		}
		if kind.Kind != "trailer" {
			chain.add(line)
		}
		if last {
			break
		}
	}
	if lineNo == 0 {
		return nil, &ReadError{Line: 0, Err: fmt.Errorf("%w: empty input, no header", ErrFormat)}
	}
	t.Truncated = t.Trailer == nil
	return t, nil
}

// readLine returns the next line with its newline, bounded by MaxLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		frag, err := br.ReadSlice('\n')
		out = append(out, frag...)
		if len(out) > MaxLine {
			return nil, fmt.Errorf("line longer than %d bytes", MaxLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return out, err
	}
}

func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("text after the JSON object")
	}
	return nil
}

func parseHeader(line []byte, h *Header) error {
	if err := strictUnmarshal(line, h); err != nil {
		return fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	if h.Format != FormatName {
		return fmt.Errorf("%w: header format %q, want %q", ErrFormat, h.Format, FormatName)
	}
	if h.Version > Version || h.Version < 1 {
		return fmt.Errorf("%w: tape version %d.%d, this reader reads version %d", ErrVersion, h.Version, h.Minor, Version)
	}
	if h.Minor < 0 {
		return fmt.Errorf("%w: negative minor version %d", ErrFormat, h.Minor)
	}
	if h.Hash != HashAlgo {
		return fmt.Errorf("%w: hash algorithm %q, want %q", ErrVersion, h.Hash, HashAlgo)
	}
	return nil
}

func parseRecord(line []byte, t *Tape) (Record, error) {
	var rec Record
	if err := strictUnmarshal(line, &rec); err != nil {
		return rec, err
	}
	if t.Header.Minor >= wireMinor {
		if err := unwireRecord(&rec); err != nil {
			return rec, fmt.Errorf("record %d: %w", rec.Seq, err)
		}
	}
	if want := int64(len(t.Records)) + 1; rec.Seq != want {
		return rec, fmt.Errorf("record seq %d, want %d", rec.Seq, want)
	}
	if rec.Op == "" {
		return rec, errors.New("record without op")
	}
	if rec.Path == "" {
		return rec, fmt.Errorf("record %d (%s) without path", rec.Seq, rec.Op)
	}
	for _, p := range []string{rec.Path, rec.To} {
		if p != "" && !recordedPath(p) {
			return rec, fmt.Errorf("record %d (%s): path %q is not relative to the root and clean, nor %s", rec.Seq, rec.Op, p, OutsidePath)
		}
	}
	for _, h := range []string{rec.Hash, rec.RHash, rec.List} {
		if h != "" && !isHash(h) {
			return rec, fmt.Errorf("record %d: %q is not a lowercase hex BLAKE3-256", rec.Seq, h)
		}
	}
	if rec.Size < 0 || rec.RSize < 0 || rec.N < 0 {
		return rec, fmt.Errorf("record %d: negative size or count", rec.Seq)
	}
	for i, sp := range rec.Spans {
		// Sorted, merged and non-empty, as FORMAT.md defines them.
		if sp.Off < 0 || sp.Len <= 0 || sp.Off > math.MaxInt64-sp.Len ||
			i > 0 && sp.Off <= rec.Spans[i-1].Off+rec.Spans[i-1].Len {
			return rec, fmt.Errorf("record %d: spans %v are not sorted, merged, non-empty ranges", rec.Seq, rec.Spans)
		}
	}
	if !knownOps[rec.Op] {
		if t.Header.Minor <= Minor {
			return rec, fmt.Errorf("record %d: unknown op %q in a %d.%d tape", rec.Seq, rec.Op, t.Header.Version, t.Header.Minor)
		}
		var all map[string]json.RawMessage
		if err := json.Unmarshal(line, &all); err != nil {
			return rec, err
		}
		for k := range all {
			if strings.Contains(knownFields, ","+k+",") {
				delete(all, k)
			}
		}
		rec.Extra = all
		t.Unknown = append(t.Unknown, len(t.Records))
	}
	return rec, nil
}

// recordedPath reports whether p is a path a record may hold (FORMAT.md,
// "Paths"): the root ".", OutsidePath, or a clean slash path below the
// root. A NUL is let through: a recorder writes the name a call was given,
// and os refuses such a name only when it is used.
func recordedPath(p string) bool {
	return p == OutsidePath || relpath.Valid(strings.ReplaceAll(p, "\x00", "_"))
}

const knownFields = ",seq,op,path,to,err,flag,mode,size,hash,rhash,rsize,spans,list,n,names,target,uid,gid,atime,mtime,fails,end,unhashed,cmd,kind,"

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func checkTrailer(t *Tape, tr *Trailer, chain *chainHash) error {
	if tr.Records != int64(len(t.Records)) {
		return fmt.Errorf("trailer counts %d records, the tape has %d", tr.Records, len(t.Records))
	}
	if got := chain.String(); tr.Chain != got {
		return fmt.Errorf("chain hash %q, the lines give %q", tr.Chain, got)
	}
	if t.Header.Minor < finalMinor {
		return nil // digested by older rules, from records the chain covers
	}
	if got := HashBytes([]byte(strings.Join(t.final(t.Header.Minor), "\n"))); tr.Final != got {
		return fmt.Errorf("final-state digest %q, the records give %q", tr.Final, got)
	}
	return nil
}
