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
// changes hashed bytes and makes the prefix unknown (valid=false), after
// which Close reads the whole content back once. Before the first change,
// the version read so far is completed and its hash kept as the read hash.
type file struct {
	fs    *Fs
	inner afero.File
	id    int64
	rec   Record // Op, Path, Flag, Mode filled at open

	name atomic.Pointer[string] // inner name now, cleaned; follows renames

	mu        sync.Mutex
	readable  bool
	writable  bool
	appending bool
	pos       int64
	cur       stream
	valid     bool
	atEOF     bool // cur covers the whole current content
	readAny   bool
	readDone  bool // read version finished: its hash is in rhash
	rhash     string
	rsize     int64
	runhashed string
	spans     []Span
	modified  bool
	isDir     bool
	names     []string
	fails     []string
	flushed   bool
}

func newFile(fsys *Fs, inner afero.File, name string, flag int, rec Record) *file {
	f := &file{fs: fsys, inner: inner, rec: rec, id: fsys.rec.fileIDs.Add(1), valid: true}
	f.cur.p = fsys.rec.pools
	clean := filepath.Clean(name)
	f.name.Store(&clean)
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	f.readable = acc == os.O_RDONLY || acc == os.O_RDWR
	f.writable = acc == os.O_WRONLY || acc == os.O_RDWR
	f.appending = flag&os.O_APPEND != 0
	if f.writable && flag&os.O_TRUNC != 0 {
		f.atEOF = true // empty content, known
		f.modified = true
	}
	if c := fsys.rec.content; c != nil {
		f.cur.max = c.max
	}
	return f
}

func sortFiles(fs []*file) {
	slices.SortFunc(fs, func(a, b *file) int { return cmp.Compare(a.id, b.id) })
}

func (f *file) renamed(old, new string) {
	n := *f.name.Load()
	switch {
	case n == old:
		f.name.Store(&new)
	case strings.HasPrefix(n, old+string(filepath.Separator)):
		s := new + n[len(old):]
		f.name.Store(&s)
	}
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
	f.readAny = true
	f.addSpan(off, int64(len(p)))
	if !f.valid {
		return
	}
	end := off + int64(len(p))
	if off > f.cur.n {
		f.catchUp(off, false)
	}
	if f.valid && off <= f.cur.n && end > f.cur.n {
		f.cur.feed(p[f.cur.n-off:])
	}
	if f.valid && eof && end == f.cur.n {
		f.atEOF = true
	}
}

// catchUp reads the current content from cur.n up to limit (or to its end
// when limit < 0) into the stream. When the content ends before limit and
// hole is set, it feeds zeros up to limit: what a write at limit leaves
// behind. Failure makes the prefix unknown.
func (f *file) catchUp(limit int64, hole bool) {
	if !f.valid || f.atEOF && limit < 0 || limit >= 0 && limit <= f.cur.n {
		return
	}
	err := f.readBack(f.cur.n, limit, f.cur.feed)
	switch {
	case err == nil:
		f.atEOF = limit < 0
	case errors.Is(err, io.EOF):
		// The content ends before limit; a write at limit leaves zeros
		// in between and ends the content there or later.
		if hole {
			f.cur.feedZeros(limit - f.cur.n)
		}
		f.atEOF = true
	default:
		f.valid = false
		f.runhashed = ErrorOutcome(err)
	}
}

// readBack reads [off, limit) (limit < 0: to the end) of the current
// content and passes it to fn. It reads through the handle when it was
// opened for reading, else through a fresh read-only open of the name the
// file has now. It returns io.EOF when the content ends before limit.
func (f *file) readBack(off, limit int64, fn func([]byte)) error {
	var r io.ReaderAt = f.inner
	if !f.readable {
		g, err := f.fs.inner.Open(*f.name.Load())
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
	f.modified = true
	if !f.readAny || f.readDone {
		return
	}
	f.readDone = true
	f.catchUp(-1, false)
	if f.valid {
		var captured []byte
		f.rhash, captured = f.cur.sum()
		f.rsize = f.cur.n
		f.fs.rec.capture(f.rhash, captured)
	} else {
		f.rhash, f.rsize = "", 0
	}
}

// beforeWrite prepares the stream for a write of n bytes at off (off < 0:
// append at the end). It returns the offset the write will land at, or -1
// when unknown.
func (f *file) beforeWrite(off int64) int64 {
	f.beforeChange()
	if !f.valid {
		return -1
	}
	if off < 0 {
		f.catchUp(-1, false)
		if !f.valid {
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
	case !f.valid:
	case off < 0 || !complete || off < f.cur.n:
		f.valid = false
	case off == f.cur.n:
		// Whether bytes follow is unchanged: overwriting old bytes leaves
		// any beyond p in place, writing at the end keeps it the end.
		f.cur.feed(p)
	}
}

func (f *file) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
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
	if f.appending {
		off = -1
	}
	track := f.writable && len(p) > 0
	if track {
		off = f.beforeWrite(off)
	}
	n, err := f.inner.Write(p)
	f.fail("write", err)
	if track {
		f.afterWrite(p[:n], off, n == len(p))
	}
	if f.appending && off >= 0 {
		f.pos = off + int64(n)
	} else {
		f.pos += int64(n)
	}
	return n, err
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	track := f.writable && off >= 0 && !f.appending && len(p) > 0
	at := off
	if track {
		at = f.beforeWrite(off)
	}
	n, err := f.inner.WriteAt(p, off)
	f.fail("writeat", err)
	if track {
		f.afterWrite(p[:n], at, n == len(p))
	} else if f.writable && n > 0 {
		f.beforeChange()
		f.valid = false
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
	if f.writable && size >= 0 {
		f.beforeChange()
	}
	err := f.inner.Truncate(size)
	f.fail("truncate", err)
	if err != nil || !f.writable {
		return err
	}
	switch {
	case size == 0:
		f.cur.reset()
		f.valid, f.atEOF = true, true
	case size < f.cur.n:
		f.valid = false
	case size == f.cur.n && f.valid:
		f.atEOF = true
	default:
		f.atEOF = false // old bytes or zeros beyond cur.n, read at Close
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
	fi, err := f.inner.Stat()
	rec := Record{Op: OpFstat, Path: f.rec.Path, Err: ErrorOutcome(err)}
	if err == nil {
		statFields(&rec, fi)
	}
	f.fs.rec.emit(&rec)
	return fi, err
}

func (f *file) listed(names []string) {
	f.isDir = true
	f.names = append(f.names, names...)
}

func (f *file) Readdir(count int) ([]os.FileInfo, error) {
	fis, err := f.inner.Readdir(count)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail("readdir", err)
	f.isDir = true
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

// ReadDir makes the handle an fs.ReadDirFile, as *os.File and afero's
// in-memory files are.
func (f *file) ReadDir(n int) ([]fs.DirEntry, error) {
	var ents []fs.DirEntry
	var err error
	if rd, ok := f.inner.(fs.ReadDirFile); ok {
		ents, err = rd.ReadDir(n)
	} else {
		var fis []os.FileInfo
		fis, err = f.inner.Readdir(n)
		for _, fi := range fis {
			ents = append(ents, fs.FileInfoToDirEntry(fi))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail("readdir", err)
	f.isDir = true
	for _, e := range ents {
		f.names = append(f.names, e.Name())
	}
	return ents, err
}

func (f *file) Close() error {
	if !f.fs.rec.untrack(f) {
		return f.inner.Close() // flushed already: second Close, or after Recorder.Close
	}
	return f.flush(false)
}

// flush completes the record and writes it. unclosed is true when called
// by Recorder.Close for a handle the program never closed; the inner handle
// then stays open.
func (f *file) flush(unclosed bool) error {
	f.mu.Lock()
	if f.flushed {
		f.mu.Unlock()
		return nil
	}
	f.flushed = true
	rec := f.rec
	if f.readAny && !f.readDone {
		f.readDone = true
		f.catchUp(-1, false)
		if f.valid {
			var captured []byte
			f.rhash, captured = f.cur.sum()
			f.rsize = f.cur.n
			f.fs.rec.capture(f.rhash, captured)
		}
	}
	if f.readAny {
		rec.RHash, rec.RSize = f.rhash, f.rsize
		rec.Spans = mergeSpans(f.spans)
		if f.rhash == "" {
			rec.Unhashed = cmp.Or(f.runhashed, OutcomeOther)
		}
	}
	if f.modified && !f.isDir {
		if f.valid {
			f.catchUp(-1, false)
		}
		if !f.valid {
			// A write or truncate landed inside bytes already hashed: read
			// the result back once. Unavoidable for WriteAt in the middle.
			f.cur.reset()
			f.valid, f.atEOF, f.runhashed = true, false, ""
			f.catchUp(-1, false)
		}
		if f.valid {
			var captured []byte
			rec.Hash, captured = f.cur.sum()
			rec.Size = f.cur.n
			f.fs.rec.capture(rec.Hash, captured)
		} else {
			rec.Unhashed = cmp.Or(f.runhashed, OutcomeOther)
		}
	}
	if f.isDir {
		sort.Strings(f.names)
		rec.N = len(f.names)
		rec.List = HashBytes([]byte(strings.Join(f.names, "\n")))
		if len(f.names) <= MaxNames {
			rec.Names = f.names
		}
	}
	if now := f.fs.rel(*f.name.Load()); now != rec.Path {
		rec.To = now
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
	f.fs.rec.emit(&rec)
	return err
}
