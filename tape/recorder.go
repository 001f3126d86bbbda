package tape

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/afero"
)

// ErrClosed is returned by Recorder.Close when called twice.
var ErrClosed = errors.New("tape: recorder already closed")

// ErrNilWriter is returned by Recorder.Close when NewRecorder got a nil
// writer: the recorder then records nothing.
var ErrNilWriter = errors.New("tape: nil writer")

// Option configures a Recorder.
type Option func(*config)

type config struct {
	pkg, test  string
	info       map[string]string
	contentDir string
	contentMax int64
	ref        *Tape
	refMode    Mode
	onDiverge  func(*Divergence)
	bufSize    int           // 0: one Write per line
	bufEvery   time.Duration // with bufSize
}

// The defaults of [WithBuffer]: package helpers records with them.
const (
	// DefaultBufferSize is the buffered bytes past which the lines are
	// written.
	DefaultBufferSize = 64 << 10
	// DefaultFlushInterval bounds how long a buffered line waits.
	DefaultFlushInterval = 100 * time.Millisecond
)

// WithBuffer makes the recorder collect lines in memory and write them
// in whole lines, in one Write, when more than size bytes are waiting,
// when interval has passed since the oldest line waiting was made (a timer
// armed then writes them from its own goroutine), at [Recorder.Flush] and
// at Close. A size or interval of 0 or less takes [DefaultBufferSize] or
// [DefaultFlushInterval].
//
// Without it a recorder makes one Write per line, so a process that dies
// loses no record; with it a record costs no system call, and a process
// that dies without Close (os.Exit, SIGKILL, go test's -timeout) loses the
// records made in the last interval before, at most size bytes and a
// line of them: what w received is still a tape of whole lines (see
// FORMAT.md, "Truncated tapes"). The recorder writes to w only under its
// lock, but from the timer's goroutine too: leave w alone until Close
// returns.
func WithBuffer(size int, interval time.Duration) Option {
	if size <= 0 {
		size = DefaultBufferSize
	}
	if interval <= 0 {
		interval = DefaultFlushInterval
	}
	return func(c *config) { c.bufSize, c.bufEvery = size, interval }
}

// WithTest names the Go package and test in the header. Both take part in
// nothing but display: Compare ignores them.
func WithTest(pkg, test string) Option {
	return func(c *config) { c.pkg, c.test = pkg, test }
}

// WithInfo adds a volatile key/value to the header's info object (Compare
// ignores info). The recorder itself fills "pid", "start" and "go".
func WithInfo(key, value string) Option {
	return func(c *config) {
		if c.info == nil {
			c.info = map[string]string{}
		}
		c.info[key] = value
	}
}

// WithContent stores every content version of at most max bytes that the
// recorder hashes in dir, content-addressed: the bytes whose BLAKE3 is H go to
// [ContentPath](dir, H). Bytes are captured from the same stream that is
// hashed, never read again for capture. Errors writing the sidecar are
// reported by Close.
func WithContent(dir string, max int64) Option {
	return func(c *config) { c.contentDir, c.contentMax = dir, max }
}

// WithReference checks every record against ref while recording, in
// ModePath unless [WithReferenceMode] says otherwise, and calls fn once,
// for the first divergence, from the goroutine that made the offending
// call. The Divergence carries both records and that call's Go stack, so
// fn can t.Error right at the divergent call. Records the reference lacks
// at the end are reported by Close. ModeSet and ModeFinal are checked at
// Close only. Online divergences are classed Data: whether a mismatch in
// ModeGlobal is only interleaving shows when the finished tapes are
// classified.
func WithReference(ref *Tape, fn func(*Divergence)) Option {
	return func(c *config) { c.ref, c.onDiverge = ref, fn }
}

// WithReferenceMode sets the mode of the online check of WithReference.
func WithReferenceMode(m Mode) Option {
	return func(c *config) { c.refMode = m }
}

// Recorder writes a tape. It is safe for use by many goroutines; each
// record gets its Seq when it is written, under one lock, so the order of
// lines is the order of Seq.
type Recorder struct {
	// What every record touches comes first, in the first two cache
	// lines: a Stat's record runs right after a system call that may have
	// evicted them, and each line is a miss.
	mu      sync.Mutex
	closing bool // Close has begun
	closed  bool // trailer written: later records are dropped
	seq     int64
	check   *onlineCheck
	w       io.Writer
	err     error  // first write error
	buf     []byte // lines not written yet: the last one, or WithBuffer's
	bufSize int    // write when buf holds more; 0 after every line
	armed   bool   // timer set to write buf
	chain   chainHash
	chained int // buf[chained:] are record lines not chained yet (see settle)

	open    openHandles
	opened  int64 // handles tracked so far: the next one's id
	final   *finalState
	content *contentStore
	pools   *pools
	// writes counts the calls through the recorder that may change a
	// file's bytes, twice each (as they begin and as they end), so a
	// read-only handle can tell that the version it looked up may have
	// changed under it (wroteSince).
	writes   atomic.Int64
	versions versionCache // hashes of content versions already read
	timer    *time.Timer  // WithBuffer's, made when first armed
	cfg      config
}

// NewRecorder starts a tape on w and writes its header at once. Records
// are written to w as they are made, one Write per line, so a process
// that dies leaves a readable prefix holding every record it made; with
// [WithBuffer], in whole lines at most an interval late. Write errors
// are sticky and returned by Close.
func NewRecorder(w io.Writer, opts ...Option) *Recorder {
	r := &Recorder{w: w, final: newFinalState(Minor), pools: newPools()}
	r.cfg.refMode = ModePath
	for _, o := range opts {
		o(&r.cfg)
	}
	r.bufSize = r.cfg.bufSize
	if r.cfg.contentDir != "" {
		r.content = &contentStore{dir: r.cfg.contentDir, max: r.cfg.contentMax}
	}
	if r.cfg.ref != nil && r.cfg.onDiverge != nil {
		r.check = newOnlineCheck(r.cfg.ref, r.cfg.refMode)
	}
	h := Header{
		Kind: "header", Format: FormatName, Version: Version, Minor: Minor, Hash: HashAlgo,
		Package: r.cfg.pkg, Test: r.cfg.test,
		Info: map[string]string{
			"pid":   strconv.Itoa(os.Getpid()),
			"start": time.Now().UTC().Format(time.RFC3339Nano),
			"go":    runtime.Version(),
		},
	}
	for k, v := range r.cfg.info {
		h.Info[k] = v
	}
	if w == nil {
		r.err = ErrNilWriter
		return r
	}
	line, err := json.Marshal(h)
	if err != nil { // cannot happen: only strings and ints
		r.err = err
		return r
	}
	r.chain.start(Minor, line)
	if r.bufSize > 0 {
		// Grown by append, the buffer cost a dozen copies and
		// allocations in the first records.
		r.buf = make([]byte, 0, min(r.bufSize, 1<<20)+4<<10)
	}
	// The header goes out at once even when buffering, arming no timer:
	// the file is a tape from the start.
	r.buf = append(append(r.buf, line...), '\n')
	r.chained = len(r.buf) // start chained it
	r.flushLocked()
	return r
}

// Wrap returns an afero.Fs that forwards every call to fsys and records it.
// root is the directory paths are made relative to: it is made absolute
// (filepath.Abs, relative names resolve against the working directory at
// each call) and, where possible, canonicalized with EvalSymlinks; a name
// matching either spelling of the root counts as inside. Names outside root
// are recorded as OutsidePath. Wrap may be called several times; all
// wrapped file systems write to the same tape and path namespace.
//
// The result always implements afero.Lstater, afero.Linker and
// afero.LinkReader; when fsys lacks one, the call behaves as afero's own
// wrappers do (Stat with false, ErrNoSymlink, ErrNoReadlink), and is
// recorded. The result's dynamic type is *[Fs], for a caller that needs
// [Fs.Inner]; the static type is afero.Fs, as for every wrapper in this
// module.
func (r *Recorder) Wrap(fsys afero.Fs, root string) afero.Fs {
	return newFs(r, fsys, root)
}

// Close flushes handles still open as records with End "unclosed", writes
// the trailer and reports the first error met while writing (the tape or
// the content sidecar). Close does not close w. A second Close returns
// ErrClosed.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		return ErrClosed
	}
	r.closing = true
	open := make([]*file, 0, r.open.n)
	for r.open.head != nil {
		f := r.open.head
		open = append(open, f)
		r.open.remove(f)
	}
	r.mu.Unlock()
	// Flush in open order (the list is newest first, and handles are
	// taken off it as they close).
	sortFiles(open)
	for _, f := range open {
		f.flush(true)
	}

	r.mu.Lock()
	var d *Divergence
	if r.check != nil {
		d = r.check.finish(r.final)
	}
	r.closed = true
	r.settle()
	t := Trailer{Kind: "trailer", Records: r.seq, Final: r.final.digest(), Chain: r.chain.String()}
	line, _ := json.Marshal(t) // only strings and ints: cannot fail
	r.writeLine(line)
	r.flushLocked()
	if r.timer != nil {
		r.timer.Stop()
	}
	err := r.err
	r.mu.Unlock()
	if d != nil {
		d.Stack = string(debug.Stack())
		r.cfg.onDiverge(d)
	}
	if r.content != nil {
		err = errors.Join(err, r.content.error())
	}
	return err
}

// Flush writes the lines [WithBuffer] holds back and returns the first
// error met writing the tape so far. Without WithBuffer, or after Close,
// there are none.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked()
	return r.err
}

// Err returns the first error met writing the tape so far.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// emit assigns rec its Seq and writes it. Records made after Close are
// dropped.
func (r *Recorder) emit(rec *Record) {
	r.mu.Lock()
	d := r.emitLocked(rec)
	r.mu.Unlock()
	r.diverged(d)
}

// emitStat records a stat, lstat or fstat of fi (err nil) or its failure
// without building a Record: zeroing the Record was a tenth of the cost of
// recording a Stat, the most frequent call. A stat changes no final state
// (finalState.apply only learns from a failure, without a Record), so only
// the online check, when there is one, needs the Record. When k is not nil, emitStat also returns the
// hash the version cache holds for k, read under the same lock.
func (r *Recorder) emitStat(op, path string, fi os.FileInfo, err error, k *versionKey) (cached string) {
	outcome := ErrorOutcome(err)
	var mode os.FileMode
	var size int64
	if err == nil {
		mode, size = statFields(fi)
	}
	r.mu.Lock()
	if k != nil {
		cached, _ = r.versions.get(*k)
	}
	if r.check != nil {
		rec := Record{Op: op, Path: path, Err: outcome, Size: size}
		if err == nil {
			rec.Mode = modeString(mode)
		}
		d := r.emitLocked(&rec)
		r.mu.Unlock()
		r.diverged(d)
		return cached
	}
	if !r.closed {
		r.seq++
		from := len(r.buf)
		b := append(r.buf, `{"seq":`...)
		b = strconv.AppendInt(b, r.seq, 10)
		r.buf = append(appendStatRest(b, op, path, outcome, mode, size), '\n')
		r.written(from)
		if err != nil {
			r.final.learnFailure(op, path, outcome) // a failed lstat may prove path absent
		}
	}
	r.mu.Unlock()
	return cached
}

// emitRead takes f off the open list and records it when its record
// holds only what a handle that read one content version and did nothing
// else has: path, flag, rhash, rsize, spans and the failures of its Close
// (appendReadRest; file.plainRead checks the shape). Like emitStat it builds
// no Record unless something needs one: a failure or the online check.
func (r *Recorder) emitRead(f *file, path, flag, rhash string, rsize int64, spans []Span, fails []string) {
	r.mu.Lock()
	r.open.remove(f)
	if r.check != nil || len(fails) > 0 {
		rec := Record{Op: OpOpen, Path: path, Flag: flag, RHash: rhash, RSize: rsize, Spans: spans, Fails: fails}
		d := r.emitLocked(&rec)
		r.mu.Unlock()
		r.diverged(d)
		return
	}
	if !r.closed {
		r.seq++
		from := len(r.buf)
		b := append(r.buf, `{"seq":`...)
		b = strconv.AppendInt(b, r.seq, 10)
		r.buf = append(appendReadRest(b, path, flag, rhash, rsize, spans), '\n')
		r.written(from)
	}
	r.mu.Unlock()
}

// lookupVersion returns the hash the version cache holds for k.
func (r *Recorder) lookupVersion(k versionKey) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, _ := r.versions.get(k)
	return h
}

// emitAll writes recs under one lock, so their Seq numbers are
// consecutive; the first divergence among them is reported.
func (r *Recorder) emitAll(recs []*Record) {
	r.mu.Lock()
	var d *Divergence
	for _, rec := range recs {
		if dd := r.emitLocked(rec); d == nil {
			d = dd
		}
	}
	r.mu.Unlock()
	r.diverged(d)
}

// emitLocked writes one record; called with mu held. It returns the online
// check's divergence at rec, to be reported once mu is released.
func (r *Recorder) emitLocked(rec *Record) *Divergence {
	if r.closed {
		return nil
	}
	r.seq++
	rec.Seq = r.seq
	from := len(r.buf)
	r.buf = append(appendRecord(r.buf, rec), '\n')
	r.written(from)
	r.final.apply(rec)
	if r.check != nil {
		return r.check.add(rec)
	}
	return nil
}

// diverged reports d, when not nil, to the WithReference callback.
func (r *Recorder) diverged(d *Divergence) {
	if d != nil {
		d.Stack = string(debug.Stack())
		r.cfg.onDiverge(d)
	}
}

// writeLine writes line, which is not a record (the trailer), and a
// newline. Called with mu held.
func (r *Recorder) writeLine(line []byte) {
	r.settle()
	from := len(r.buf)
	r.buf = append(append(r.buf, line...), '\n')
	r.chained = len(r.buf)
	r.written(from)
}

// settle chains the record lines of buf not chained yet. Records are
// chained when they leave buf, or before a line that is not a record
// joins it, not one by one as they are made: the running chain of format
// 1.2 is one BLAKE3 over the lines in order, so one Write of many lines
// gives what a Write per line gives, at a fraction of the cost (a hash
// of a few dozen bytes was a third of recording a Stat). Called with mu
// held.
func (r *Recorder) settle() {
	if r.chained < len(r.buf) {
		r.chain.addLines(r.buf[r.chained:])
	}
	r.chained = len(r.buf)
}

// written hands on the line just appended at r.buf[from:]: to w at once,
// or, with WithBuffer, once the buffer is full, arming the timer when the
// line is the oldest one waiting. Called with mu held.
func (r *Recorder) written(from int) {
	switch {
	case len(r.buf) > r.bufSize:
		r.flushLocked()
	case from == 0 && !r.armed && r.err == nil:
		// A timer still armed from an earlier line fires sooner than
		// this line needs: no need to move it.
		r.armed = true
		if r.timer == nil {
			r.timer = time.AfterFunc(r.cfg.bufEvery, r.timedFlush)
		} else {
			r.timer.Reset(r.cfg.bufEvery)
		}
	}
}

// timedFlush is the timer's: it writes what waits, the oldest line being
// an interval old (or younger, when a full buffer was written since).
func (r *Recorder) timedFlush() {
	r.mu.Lock()
	r.armed = false
	r.flushLocked()
	r.mu.Unlock()
}

// flushLocked writes r.buf, whole lines, in one Write. Called with mu
// held.
func (r *Recorder) flushLocked() {
	r.settle()
	if len(r.buf) > 0 && r.err == nil {
		if _, err := r.w.Write(r.buf); err != nil {
			r.err = fmt.Errorf("tape: writing: %w", err)
		}
	}
	// A line or a buffer far beyond the usual is not kept.
	if cap(r.buf) > 64<<10+2*r.bufSize {
		r.buf = nil
	} else {
		r.buf = r.buf[:0]
	}
	r.chained = 0
}

// track puts f on the list of open handles and gives it its id, the
// open order.
func (r *Recorder) track(f *file) {
	r.mu.Lock()
	r.opened++
	f.id = r.opened
	r.open.add(f)
	r.mu.Unlock()
}

// emitClosed takes f off the open list and writes its record, under one
// lock.
func (r *Recorder) emitClosed(f *file, rec *Record) {
	r.mu.Lock()
	r.open.remove(f)
	d := r.emitLocked(rec)
	r.mu.Unlock()
	r.diverged(d)
}

// removed marks the open handles of fsys at or under name, which a
// Remove or RemoveAll took away, as having no name in the root: their
// records say to OutsidePath, and the final state does not take their
// writes for the name's (FORMAT.md, "Handle records").
func (r *Recorder) removed(fsys *Fs, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for f := r.open.head; f != nil; f = f.openNext {
		if f.fs == fsys && f.removedName(name) {
			f.orphan.Store(true)
		}
	}
}

// renamed points the open handles of the inner name old (or below it) at
// new, so a read-back after a rename of an open file finds the bytes, and
// marks those of new (or below it) as having lost their name.
func (r *Recorder) renamed(fsys *Fs, old, new string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for f := r.open.head; f != nil; f = f.openNext {
		if f.fs != fsys {
			continue
		}
		f.renamed(old, new)
	}
}

// openHandles are the handles not yet recorded, linked through the
// handles themselves (file.openPrev, openNext, inOpen; guarded by the
// Recorder's mu): adding and removing one is a few pointer writes where a
// map hashed and probed on every open and close.
type openHandles struct {
	head *file
	n    int
}

func (l *openHandles) add(f *file) {
	f.openPrev, f.openNext, f.inOpen = nil, l.head, true
	if l.head != nil {
		l.head.openPrev = f
	}
	l.head = f
	l.n++
}

// remove unlinks f and reports whether it was in the list.
func (l *openHandles) remove(f *file) bool {
	if !f.inOpen {
		return false
	}
	if f.openPrev != nil {
		f.openPrev.openNext = f.openNext
	} else {
		l.head = f.openNext
	}
	if f.openNext != nil {
		f.openNext.openPrev = f.openPrev
	}
	f.openPrev, f.openNext, f.inOpen = nil, nil, false
	l.n--
	return true
}

// writing marks the start of a call that may change a file's bytes; the
// func it returns marks its end.
func (r *Recorder) writing() func() {
	r.writes.Add(1)
	return r.wrote
}

func (r *Recorder) wrote() { r.writes.Add(1) }

// wroteSince reports whether a call that may change a file's bytes began
// or ended after epoch was read from writes.
func (r *Recorder) wroteSince(epoch int64) bool { return r.writes.Load() != epoch }
