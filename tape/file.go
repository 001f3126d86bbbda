package tape

import (
	"cmp"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/spf13/afero"
)

// file wraps one handle. Its record is made at Close (or flushed as
// "unclosed" by Recorder.Close).
//
// Content tracking: cur hashes the prefix [0, cur.n) of the file's current
// content while it stays known. Bytes read or written at cur.n extend it as
// they flow; a read or write that starts past cur.n first reads the gap
// (bytes the caller skipped, read once); a write or truncate below cur.n
// changes hashed bytes and makes the prefix unknown (prefixLost), after
// which Close reads the whole content back once. Before the first change,
// the version read so far is completed and its hash kept as the read hash.
type file struct {
	fs    *Fs
	inner afero.File
	id    int64    // open order, given by Recorder.track
	args  openArgs // what the open record says of the call

	opened string                 // inner name at open, cleaned
	moved  atomic.Pointer[string] // inner name now, cleaned, once a rename moved it; nil before
	orphan atomic.Bool            // its name was removed or renamed over: it has none now

	// In the Recorder's list of open handles, under the Recorder's mu.
	openPrev, openNext *file
	inOpen             bool

	mu        sync.Mutex
	state     handleState
	ver       versionState // read-only handles: the content version's key
	pos       int64
	cur       stream
	rhash     string
	rsize     int64
	runhashed string
	spans     []Span
	span1     [1]Span // spans' first backing array: most handles read one span
	names     []string
	fails     []string
}

// openArgs are the members of a handle's record fixed at open: the
// recorded path, the flag and the permission asked for. A handle keeps
// these rather than a whole Record, which would double its size.
type openArgs struct {
	path, flag, mode string
}

// handleState is what a handle knows about itself: how it was opened, how
// much of the current content its stream covers, how far the version it
// read has got, and what it did. Each part is one small type whose values
// are the states that can occur, in place of a boolean per fact.
type handleState struct {
	access accessMode
	prefix prefixState
	read   readState
	did    marks
}

// accessMode is how the handle was opened; it never changes.
type accessMode uint8

const (
	accessRead   accessMode = 1 << iota // O_RDONLY or O_RDWR
	accessWrite                         // O_WRONLY or O_RDWR
	accessAppend                        // O_APPEND
)

func (a accessMode) reads() bool   { return a&accessRead != 0 }
func (a accessMode) writes() bool  { return a&accessWrite != 0 }
func (a accessMode) appends() bool { return a&accessAppend != 0 }

// prefixState says what cur covers of the current content.
type prefixState uint8

const (
	prefixPartial prefixState = iota // cur hashes [0, cur.n); bytes may follow
	prefixWhole                      // cur hashes the whole content
	prefixLost                       // hashed bytes changed: read back at Close
)

// known reports that cur hashes a prefix of the current content.
func (p prefixState) known() bool { return p != prefixLost }

// readState is the progress of the content version the handle read.
type readState uint8

const (
	readNone     readState = iota // nothing read
	readOngoing                   // bytes read; the version is not finished
	readFinished                  // rhash and rsize hold the version read
)

// marks are the things a handle did that its record reports.
type marks uint8

const (
	markModified marks = 1 << iota // wrote or truncated: record the result
	markListed                     // listed a directory
	markFlushed                    // record made
)

func (m marks) has(x marks) bool { return m&x != 0 }

// newFile wraps inner, opened by the name clean (cleaned) with flag.
func newFile(fsys *Fs, inner afero.File, clean string, flag int, args openArgs) *file {
	f := &file{fs: fsys, inner: inner, args: args, opened: clean}
	f.cur.p = fsys.rec.pools
	f.spans = f.span1[:0]
	st := &f.state
	switch flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		st.access = accessRead
	case os.O_WRONLY:
		st.access = accessWrite
	default:
		st.access = accessRead | accessWrite
	}
	if flag&os.O_APPEND != 0 {
		st.access |= accessAppend
	}
	if st.access.writes() && flag&os.O_TRUNC != 0 {
		st.prefix = prefixWhole // empty content, known
		st.did |= markModified
	}
	if c := fsys.rec.content; c != nil {
		f.cur.max = c.max
	}
	return f
}

func sortFiles(fs []*file) {
	slices.SortFunc(fs, func(a, b *file) int { return cmp.Compare(a.id, b.id) })
}

// name returns the inner name the file has now.
func (f *file) name() string {
	if n := f.moved.Load(); n != nil {
		return *n
	}
	return f.opened
}

// renamed follows a rename of old to new (cleaned inner names): the handle
// moves with old, or loses its name when new replaced it. Names are
// compared as spelled, and else as absolute names (a relative name
// against the working directory now), so that "a" and "/root/a" match.
func (f *file) renamed(old, new string) {
	if f.orphan.Load() {
		return
	}
	n := f.name()
	if !below(n, old) && !below(n, new) && anyRelative(n, old, new) {
		n, old, new = absName(n), absName(old), absName(new)
	}
	switch {
	case n == old:
		f.moved.Store(&new)
	case below(n, old):
		s := new + n[len(old):]
		f.moved.Store(&s)
	case below(n, new):
		f.orphan.Store(true) // renamed over
	}
}

// removedName reports whether a Remove or RemoveAll of name (a cleaned
// inner name) took the handle's name, compared as renamed compares.
func (f *file) removedName(name string) bool {
	n := f.name()
	return below(n, name) || anyRelative(n, name) && below(absName(n), absName(name))
}

// below reports whether the inner name n is dir or below it.
func below(n, dir string) bool {
	return n == dir || strings.HasPrefix(n, dir+string(filepath.Separator))
}

func anyRelative(names ...string) bool {
	for _, n := range names {
		if !filepath.IsAbs(n) {
			return true
		}
	}
	return false
}

// absName is n, an inner name, made absolute against the working
// directory; n itself when that fails.
func absName(n string) string {
	if a, err := filepath.Abs(n); err == nil {
		return a
	}
	return n
}

func (f *file) fail(call string, err error) {
	if err == nil || errors.Is(err, io.EOF) {
		return
	}
	s := call + ":" + ErrorOutcome(err)
	if !slices.Contains(f.fails, s) {
		f.fails = append(f.fails, s)
	}
}

// addSpan records [off, off+n) read. Sequential reads extend the last span.
func (f *file) addSpan(off, n int64) {
	if n <= 0 {
		return
	}
	if k := len(f.spans); k > 0 && f.spans[k-1].Off+f.spans[k-1].Len == off {
		f.spans[k-1].Len += n
		return
	}
	f.spans = append(f.spans, Span{off, n})
}

// mergeSpans sorts spans by offset and merges overlapping and adjacent
// ones: the set of bytes read, whatever the order of the calls.
func mergeSpans(s []Span) []Span {
	slices.SortFunc(s, func(a, b Span) int { return cmp.Compare(a.Off, b.Off) })
	out := s[:0]
	for _, sp := range s {
		if k := len(out); k > 0 && sp.Off <= out[k-1].Off+out[k-1].Len {
			out[k-1].Len = max(out[k-1].Len, sp.Off+sp.Len-out[k-1].Off)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// sawRead folds bytes p read at off into the stream. eof reports that the
// read met the end of the content at off+len(p).
func (f *file) sawRead(p []byte, off int64, eof bool) {
	if f.state.read == readNone {
		f.state.read = readOngoing
	}
	f.addSpan(off, int64(len(p)))
	if f.ver.cached != "" || !f.state.prefix.known() {
		return
	}
	end := off + int64(len(p))
	if off > f.cur.n {
		f.catchUp(off, false)
	}
	if f.state.prefix.known() && off <= f.cur.n && end > f.cur.n {
		f.cur.feed(p[f.cur.n-off:])
	}
	if f.state.prefix.known() && eof && end == f.cur.n {
		f.state.prefix = prefixWhole
	}
}

// catchUp reads the current content from cur.n up to limit (or to its end
// when limit < 0) into the stream. When the content ends before limit and
// hole is set, it feeds zeros up to limit: what a write at limit leaves
// behind. Failure makes the prefix unknown.
func (f *file) catchUp(limit int64, hole bool) {
	if f.state.prefix == prefixLost || f.state.prefix == prefixWhole && limit < 0 || limit >= 0 && limit <= f.cur.n {
		return
	}
	err := f.readBack(f.cur.n, limit, f.cur.feed)
	switch {
	case err == nil:
		if limit < 0 {
			f.state.prefix = prefixWhole
		} else {
			f.state.prefix = prefixPartial
		}
	case errors.Is(err, io.EOF):
		// The content ends before limit; a write at limit leaves zeros
		// in between and ends the content there or later.
		if hole {
			f.cur.feedZeros(limit - f.cur.n)
		}
		f.state.prefix = prefixWhole
	default:
		f.state.prefix = prefixLost
		f.runhashed = ErrorOutcome(err)
	}
}

// readBack reads [off, limit) (limit < 0: to the end) of the current
// content and passes it to fn. It reads through the handle when it was
// opened for reading, else through a fresh read-only open of the name the
// file has now. It returns io.EOF when the content ends before limit.
func (f *file) readBack(off, limit int64, fn func([]byte)) error {
	var r io.ReaderAt = f.inner
	if !f.state.access.reads() {
		if f.orphan.Load() {
			// The name now holds another file, or none.
			return &fs.PathError{Op: "open", Path: f.name(), Err: fs.ErrNotExist}
		}
		g, err := f.fs.inner.Open(f.name())
		if err != nil {
			return err
		}
		defer g.Close()
		r = g
	}
	bp := f.fs.rec.pools.bufs.Get().(*[]byte)
	defer f.fs.rec.pools.bufs.Put(bp)
	buf := *bp
	for limit < 0 || off < limit {
		want := int64(len(buf))
		if limit >= 0 {
			want = min(want, limit-off)
		}
		n, err := r.ReadAt(buf[:want], off)
		fn(buf[:n])
		off += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				if limit < 0 {
					return nil
				}
				if off < limit {
					return io.EOF
				}
				return nil
			}
			return err
		}
		if n == 0 {
			return io.ErrNoProgress
		}
	}
	return nil
}

// beforeChange finishes the read version (if anything was read) before the
// first write or truncate alters the content.
func (f *file) beforeChange() {
	f.state.did |= markModified
	if f.state.read != readOngoing {
		return
	}
	f.finishRead()
}

// finishRead completes the content version read so far (reading the rest
// of it once) and keeps its hash in rhash and rsize.
//
// A read-only handle whose version was hashed before (same device, inode,
// size, mtime and ctime) reuses that hash and reads nothing; one that
// hashed a new version keeps its hash for the next handles when a Stat
// after hashing shows the same version.
func (f *file) finishRead() {
	f.state.read = readFinished
	if f.ver.cached != "" {
		if !f.fs.rec.wroteSince(f.ver.epoch) {
			f.rhash, f.rsize = f.ver.cached, f.ver.key.size
			return
		}
		// A write through the recorder began after the key was taken:
		// the bytes read may not be that version's. Hash what the file
		// holds now, read back once (the stream was not fed), and keep
		// nothing.
		f.ver.cached, f.ver.ok = "", false
	}
	f.catchUp(-1, false)
	if !f.state.prefix.known() {
		f.rhash, f.rsize = "", 0
		return
	}
	var captured []byte
	f.rhash, captured = f.cur.sum()
	f.rsize = f.cur.n
	f.fs.rec.capture(f.rhash, captured)
	if f.ver.ok {
		if fi, err := f.inner.Stat(); err == nil {
			r := f.fs.rec
			r.mu.Lock()
			f.ver.keep(&r.versions, fi, f.rhash, f.rsize)
			r.mu.Unlock()
		}
	}
}

// wantsVersion reports whether the handle should look for its content
// version's key now: it is read-only and has read nothing yet.
func (f *file) wantsVersion() bool {
	return f.state.access == accessRead && f.state.read == readNone && !f.ver.tried
}

// versionBeforeRead takes the version key before the first byte is read,
// unless a Stat of the handle gave it already.
func (f *file) versionBeforeRead() {
	if !f.wantsVersion() {
		f.distrustVersion()
		return
	}
	epoch := f.fs.rec.writes.Load()
	fi, err := f.inner.Stat()
	if err != nil {
		f.ver.tried = true
		return
	}
	f.ver.take(fi, epoch, f.fs.rec.lookupVersion)
}

// distrustVersion drops a hash found for the handle's version before its
// first byte is read when a write through the recorder began since the
// key was taken (a Stat of the handle, then a write through another
// handle, then the reads): the handle then hashes the bytes it reads.
func (f *file) distrustVersion() {
	if f.ver.cached != "" && f.state.read == readNone && f.fs.rec.wroteSince(f.ver.epoch) {
		f.ver.cached, f.ver.ok = "", false
	}
}

// beforeWrite prepares the stream for a write of n bytes at off (off < 0:
// append at the end). It returns the offset the write will land at, or -1
// when unknown.
func (f *file) beforeWrite(off int64) int64 {
	f.beforeChange()
	if !f.state.prefix.known() {
		return -1
	}
	if off < 0 {
		f.catchUp(-1, false)
		if !f.state.prefix.known() {
			return -1
		}
		return f.cur.n
	}
	if off > f.cur.n {
		f.catchUp(off, true)
	}
	return off
}

// afterWrite folds p, written at off, into the stream. complete is false
// when the write stopped short: the file may then not hold the zeros
// catchUp fed for a hole, so the prefix is given up.
func (f *file) afterWrite(p []byte, off int64, complete bool) {
	switch {
	case !f.state.prefix.known():
	case off < 0 || !complete || off < f.cur.n:
		f.state.prefix = prefixLost
	case off == f.cur.n:
		// Whether bytes follow is unchanged: overwriting old bytes leaves
		// any beyond p in place, writing at the end keeps it the end.
		f.cur.feed(p)
	}
}

func (f *file) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.versionBeforeRead()
	off := f.pos
	n, err := f.inner.Read(p)
	f.pos += int64(n)
	f.fail("read", err)
	if eof := errors.Is(err, io.EOF); n > 0 || eof {
		f.sawRead(p[:n], off, eof)
	}
	return n, err
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	f.versionBeforeRead()
	f.mu.Unlock()
	n, err := f.inner.ReadAt(p, off)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail("readat", err)
	if eof := errors.Is(err, io.EOF); off >= 0 && (n > 0 || eof) {
		f.sawRead(p[:n], off, eof)
	}
	return n, err
}

func (f *file) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	off := f.pos
	if f.state.access.appends() {
		off = -1
	}
	track := f.state.access.writes() && len(p) > 0
	if track {
		off = f.beforeWrite(off)
	}
	done := f.fs.rec.writing()
	n, err := f.inner.Write(p)
	done()
	f.fail("write", err)
	if track {
		f.afterWrite(p[:n], off, n == len(p))
	}
	if f.state.access.appends() && off >= 0 {
		f.pos = off + int64(n)
	} else {
		f.pos += int64(n)
	}
	return n, err
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	track := f.state.access.writes() && off >= 0 && !f.state.access.appends() && len(p) > 0
	at := off
	if track {
		at = f.beforeWrite(off)
	}
	done := f.fs.rec.writing()
	n, err := f.inner.WriteAt(p, off)
	done()
	f.fail("writeat", err)
	if track {
		f.afterWrite(p[:n], at, n == len(p))
	} else if f.state.access.writes() && n > 0 {
		f.beforeChange()
		f.state.prefix = prefixLost
	}
	return n, err
}

func (f *file) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

func (f *file) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.inner.Seek(offset, whence)
	f.fail("seek", err)
	if err == nil {
		f.pos = n
	}
	return n, err
}

func (f *file) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state.access.writes() && size >= 0 {
		f.beforeChange()
	}
	done := f.fs.rec.writing()
	err := f.inner.Truncate(size)
	done()
	f.fail("truncate", err)
	if err != nil || !f.state.access.writes() {
		return err
	}
	switch {
	case size == 0:
		f.cur.reset()
		f.state.prefix = prefixWhole
	case size < f.cur.n:
		f.state.prefix = prefixLost
	case size == f.cur.n && f.state.prefix.known():
		f.state.prefix = prefixWhole
	case f.state.prefix == prefixWhole:
		f.state.prefix = prefixPartial // old bytes or zeros beyond cur.n, read at Close
	}
	return nil
}

func (f *file) Name() string { return f.inner.Name() }

func (f *file) Sync() error {
	err := f.inner.Sync()
	if err != nil {
		f.mu.Lock()
		f.fail("sync", err)
		f.mu.Unlock()
	}
	return err
}

func (f *file) Stat() (os.FileInfo, error) {
	r := f.fs.rec
	epoch := r.writes.Load()
	fi, err := f.inner.Stat()
	if err != nil {
		r.emitStat(OpFstat, f.args.path, nil, err, nil)
		return fi, err
	}
	f.mu.Lock()
	if f.wantsVersion() {
		// The version is looked up under the lock that writes the
		// record.
		f.ver.take(fi, epoch, func(k versionKey) string {
			return r.emitStat(OpFstat, f.args.path, fi, nil, &k)
		})
		if f.ver.ok {
			f.mu.Unlock()
			return fi, nil
		}
	}
	f.mu.Unlock()
	r.emitStat(OpFstat, f.args.path, fi, nil, nil)
	return fi, nil
}

func (f *file) listed(names []string) {
	f.state.did |= markListed
	f.names = append(f.names, names...)
}

func (f *file) Readdir(count int) ([]os.FileInfo, error) {
	fis, err := f.inner.Readdir(count)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail("readdir", err)
	f.state.did |= markListed
	for _, fi := range fis {
		f.names = append(f.names, fi.Name())
	}
	return fis, err
}

func (f *file) Readdirnames(n int) ([]string, error) {
	names, err := f.inner.Readdirnames(n)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail("readdir", err)
	f.listed(names)
	return names, err
}

// readDir is the ReadDir of a handle whose inner handle is an
// fs.ReadDirFile (see outer).
func (f *file) readDir(n int) ([]fs.DirEntry, error) {
	ents, err := f.inner.(fs.ReadDirFile).ReadDir(n)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail("readdir", err)
	f.state.did |= markListed
	for _, e := range ents {
		f.names = append(f.names, e.Name())
	}
	return ents, err
}

func (f *file) Close() error { return f.flush(false) }

// plainRead reports whether the handle's record, before its Close, has
// the read-handle shape of emitRead: a content version read and hashed,
// of at least one byte, nothing else done or failed, opened without a
// permission, not renamed, with a path that needs no escape. A member
// that flush adds to a handle's record must be ruled out here
// (TestEmitReadMatchesRecord).
func (f *file) plainRead() bool {
	return f.state.did == markFlushed && f.state.read == readFinished && f.rhash != "" && f.rsize > 0 &&
		f.args.mode == "" && len(f.fails) == 0 && f.moved.Load() == nil && !f.orphan.Load() && jsonPlain(f.args.path) && jsonPlain(f.args.flag)
}

// flush completes the record and writes it. unclosed is true when called
// by Recorder.Close for a handle the program never closed; the inner handle
// then stays open. A handle recorded already (a second Close, or a Close
// after Recorder.Close flushed it) only closes the inner handle.
func (f *file) flush(unclosed bool) error {
	f.mu.Lock()
	if f.state.did.has(markFlushed) {
		f.mu.Unlock()
		if unclosed {
			return nil
		}
		return f.inner.Close()
	}
	f.state.did |= markFlushed
	if f.state.read == readOngoing {
		f.finishRead()
	}
	if !unclosed && f.plainRead() {
		spans := mergeSpans(f.spans)
		f.cur.release()
		err := f.inner.Close()
		f.fail("close", err)
		path, flag, rhash, rsize, fails := f.args.path, f.args.flag, f.rhash, f.rsize, f.fails
		f.mu.Unlock()
		f.fs.rec.emitRead(f, path, flag, rhash, rsize, spans, fails)
		return err
	}
	rec := Record{Op: OpOpen, Path: f.args.path, Flag: f.args.flag, Mode: f.args.mode}
	if f.state.read != readNone {
		rec.RHash, rec.RSize = f.rhash, f.rsize
		rec.Spans = mergeSpans(f.spans)
		if f.rhash == "" {
			rec.Unhashed = cmp.Or(f.runhashed, OutcomeOther)
		}
	}
	if f.state.did.has(markModified) && !f.state.did.has(markListed) {
		f.catchUp(-1, false)
		if !f.state.prefix.known() {
			// A write or truncate landed inside bytes already hashed: read
			// the result back once. Unavoidable for WriteAt in the middle.
			f.cur.reset()
			f.state.prefix, f.runhashed = prefixPartial, ""
			f.catchUp(-1, false)
		}
		if f.state.prefix.known() {
			var captured []byte
			rec.Hash, captured = f.cur.sum()
			rec.Size = f.cur.n
			f.fs.rec.capture(rec.Hash, captured)
		} else {
			rec.Unhashed = cmp.Or(f.runhashed, OutcomeOther)
		}
	}
	if f.state.did.has(markListed) {
		sort.Strings(f.names)
		rec.N = len(f.names)
		rec.List = HashBytes([]byte(strings.Join(f.names, "\n")))
		if len(f.names) <= MaxNames {
			rec.Names = f.names
		}
	}
	if n := f.moved.Load(); n != nil {
		if now := f.fs.rel(*n); now != rec.Path {
			rec.To = now
		}
	}
	if f.orphan.Load() {
		rec.To = OutsidePath
	}
	f.cur.release()
	var err error
	if unclosed {
		rec.End = "unclosed"
	} else {
		err = f.inner.Close()
		f.fail("close", err)
	}
	rec.Fails = f.fails
	f.mu.Unlock()
	if unclosed {
		f.fs.rec.emit(&rec) // Recorder.Close took f off the open list
	} else {
		f.fs.rec.emitClosed(f, &rec)
	}
	return err
}

// outer returns the handle as the caller gets it: one that has ReadFrom,
// WriteTo and ReadDir exactly when the inner handle has them (an *os.File
// has all three, afero's in-memory files ReadDir, its UnionFile none), so
// that code asking for them sees what it would see without the recorder.
func (f *file) outer() afero.File {
	_, r := f.inner.(io.ReaderFrom)
	_, w := f.inner.(io.WriterTo)
	_, d := f.inner.(fs.ReadDirFile)
	switch {
	case r && w && d:
		return fileRWD{f}
	case r && w:
		return fileRW{f}
	case r && d:
		return fileRD{f}
	case w && d:
		return fileWD{f}
	case r:
		return fileR{f}
	case w:
		return fileW{f}
	case d:
		return fileD{f}
	}
	return f
}

// The handles with some of ReadFrom (R), WriteTo (W) and ReadDir (D); see
// outer.
type (
	fileR   struct{ *file }
	fileW   struct{ *file }
	fileD   struct{ *file }
	fileRW  struct{ *file }
	fileRD  struct{ *file }
	fileWD  struct{ *file }
	fileRWD struct{ *file }
)

var (
	_ io.ReaderFrom  = fileRWD{}
	_ io.WriterTo    = fileRWD{}
	_ fs.ReadDirFile = fileRWD{}
)

func (f fileR) ReadFrom(r io.Reader) (int64, error)    { return f.readFrom(r) }
func (f fileRW) ReadFrom(r io.Reader) (int64, error)   { return f.readFrom(r) }
func (f fileRD) ReadFrom(r io.Reader) (int64, error)   { return f.readFrom(r) }
func (f fileRWD) ReadFrom(r io.Reader) (int64, error)  { return f.readFrom(r) }
func (f fileW) WriteTo(w io.Writer) (int64, error)     { return f.writeTo(w) }
func (f fileRW) WriteTo(w io.Writer) (int64, error)    { return f.writeTo(w) }
func (f fileWD) WriteTo(w io.Writer) (int64, error)    { return f.writeTo(w) }
func (f fileRWD) WriteTo(w io.Writer) (int64, error)   { return f.writeTo(w) }
func (f fileD) ReadDir(n int) ([]fs.DirEntry, error)   { return f.readDir(n) }
func (f fileRD) ReadDir(n int) ([]fs.DirEntry, error)  { return f.readDir(n) }
func (f fileWD) ReadDir(n int) ([]fs.DirEntry, error)  { return f.readDir(n) }
func (f fileRWD) ReadDir(n int) ([]fs.DirEntry, error) { return f.readDir(n) }

// writeOnly and readOnly hide every method but Write or Read, so that
// io.Copy does not call ReadFrom or WriteTo back.
type (
	writeOnly struct{ f *file }
	readOnly  struct{ f *file }
)

func (w writeOnly) Write(p []byte) (int, error) { return w.f.Write(p) }
func (r readOnly) Read(p []byte) (int, error)   { return r.f.Read(p) }

// closed reports whether the handle was recorded already (closed, or
// flushed by Recorder.Close).
func (f *file) closed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state.did.has(markFlushed)
}

// readFrom copies r to the handle through Write, so that the bytes are
// hashed as they pass, as an *os.File's ReadFrom does where no zero-copy
// path applies. A handle recorded already forwards to the inner
// ReadFrom, which gives the error of a closed file.
func (f *file) readFrom(r io.Reader) (int64, error) {
	if f.closed() {
		return f.inner.(io.ReaderFrom).ReadFrom(r)
	}
	return io.Copy(writeOnly{f}, r)
}

// writeTo copies the handle to w through Read, the mirror of readFrom.
func (f *file) writeTo(w io.Writer) (int64, error) {
	if f.closed() {
		return f.inner.(io.WriterTo).WriteTo(w)
	}
	return io.Copy(w, readOnly{f})
}
