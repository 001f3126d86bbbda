package helpers

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/tape"
)

// maxTapeName bounds the length of a tape file name: most file systems
// take at most 255 bytes, and room is left for a collision suffix.
const maxTapeName = 240

// recording is the tape of one Env: written to a file of the tape.EnvDir
// directory and/or kept in memory for a golden tape.
type recording struct {
	recorder *tape.Recorder
	file     *os.File      // the tape in tape.EnvDir, or nil
	buf      *bytes.Buffer // the tape in memory, for GoldenTape, or nil
	golden   string        // golden tape file, when GoldenTape
	mode     tape.Mode
	online   bool        // a reference was given to the recorder
	noGolden bool        // the missing golden was reported already
	diverged atomic.Bool // the online check reported a divergence

	contentDir string // where content versions are kept, or ""
	contentMax int64  // their size bound
}

// wrap returns fsys with its calls recorded on the tape, paths relative
// to root.
func (r *recording) wrap(fsys afero.Fs, root string) afero.Fs {
	return r.recorder.Wrap(fsys, root)
}

// startRecording starts the tape of e when tape.EnvDir is set or a golden
// tape is wanted; it returns nil otherwise.
func startRecording(e *Env) (*recording, error) {
	e.t.Helper()
	dir := os.Getenv(tape.EnvDir)
	if dir == "" && !e.cfg.goldenTape {
		return nil, nil
	}
	r := &recording{mode: e.cfg.tapeMode}
	opts := append([]tape.Option{tape.WithTest(e.pkg, e.name)}, e.vary.tapeInfo()...)
	var ws []io.Writer
	if e.cfg.goldenTape {
		r.golden = e.goldenFile(".tape")
		r.buf = new(bytes.Buffer)
		ws = append(ws, r.buf)
		if e.cfg.online && !e.updating() {
			ref, err := readTapeFile(r.golden)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				r.noGolden = true
				e.t.Errorf("helpers: golden tape %s is missing: run with %s=1 to create it", rel(r.golden), EnvUpdateGolden)
			case err != nil:
				return nil, err
			default:
				r.online = true
				opts = append(opts, tape.WithReferenceMode(r.mode), tape.WithReference(ref, func(d *tape.Divergence) {
					r.diverged.Store(true)
					e.t.Errorf("helpers: the recording diverges from the golden tape %s at this call (%s mode; a: golden, b: this run):\n%s",
						rel(r.golden), r.mode, d)
				}))
			}
		}
	}
	limit, err := contentLimit()
	if err != nil {
		return nil, err
	}
	if dir == "" && limit > 0 {
		// A golden tape alone: this run's versions go to a temporary
		// directory, for the text diff of a mismatch (goldenContentDiffs).
		r.contentDir, r.contentMax = filepath.Join(e.t.TempDir(), ContentDir), limit
		opts = append(opts, tape.WithContent(r.contentDir, limit))
	}
	if dir != "" {
		f, err := createTape(dir, tape.FileName(e.pkg, e.name))
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", tape.EnvDir, dir, err)
		}
		if limit > 0 {
			// createTape made dir absolute and created it.
			r.contentDir, r.contentMax = filepath.Join(filepath.Dir(f.Name()), ContentDir), limit
			opts = append(opts, tape.WithContent(r.contentDir, limit))
		}
		r.file = f
		ws = append(ws, f)
		// A write(2) per record doubled the cost of a recorded Stat. A
		// test killed by go test's -timeout runs no Cleanup: the timer
		// has written all but the last interval's records by then.
		opts = append(opts, tape.WithBuffer(tape.DefaultBufferSize, tape.DefaultFlushInterval))
	}
	// The buffer comes first: io.MultiWriter stops at the first writer
	// that fails, and a full disk must not cost the golden check.
	r.recorder = tape.NewRecorder(io.MultiWriter(ws...), opts...)
	return r, nil
}

// createTape creates the tape file name in dir exclusively. On a collision
// (go test -count=2, two Envs in one test, or two test names that sanitize
// alike) it tries <name>.2.tape, <name>.3.tape, ... A name too long for a
// file system is cut and completed by a hash of the whole name.
func createTape(dir, name string) (*os.File, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(name, ".tape")
	if len(name) > maxTapeName {
		h := fnv.New64a()
		h.Write([]byte(base))
		sum := fmt.Sprintf("-%016x", h.Sum64())
		base = base[:maxTapeName-len(sum)-len(".tape")] + sum
	}
	for i := 1; i <= 10000; i++ {
		n := base + ".tape"
		if i > 1 {
			n = fmt.Sprintf("%s.%d.tape", base, i)
		}
		f, err := os.OpenFile(filepath.Join(dir, n), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("%s: 10000 tapes of this test exist already", filepath.Join(dir, base+".tape"))
}

// TapeFile returns the name of the file the test's tape is being written
// to in the [tape.EnvDir] directory, or "" when not recording there.
func (e *Env) TapeFile() string {
	if e.rec == nil || e.rec.file == nil {
		return ""
	}
	return e.rec.file.Name()
}

// finish closes the tape, then checks or updates the golden tape.
func (r *recording) finish(e *Env) {
	e.t.Helper()
	// Close writes the buffered records and the trailer: the file is
	// closed after it, never before.
	err := r.recorder.Close()
	if r.file != nil {
		err = errors.Join(err, r.file.Close())
	}
	if err != nil {
		e.t.Errorf("helpers: tape: %v", err)
	}
	if r.golden == "" {
		return
	}
	got, err := tape.Read(bytes.NewReader(r.buf.Bytes()))
	if err != nil {
		e.t.Errorf("helpers: reading back the tape: %v", err)
		return
	}
	want, werr := readTapeFile(r.golden)
	if e.updating() {
		if werr == nil && tape.Compare(want, got, r.mode) == nil {
			return
		}
		if err := writeGolden(r.golden, r.buf.Bytes()); err != nil {
			e.t.Errorf("helpers: %v", err)
			return
		}
		if err := r.keepGoldenContent(got); err != nil {
			e.t.Errorf("helpers: %v", err)
		}
		e.logf("updated golden tape %s", rel(r.golden))
		return
	}
	switch {
	case r.online || r.noGolden:
		// Divergences were reported as they happened (or at Close).
	case errors.Is(werr, fs.ErrNotExist):
		e.t.Errorf("helpers: golden tape %s is missing: run with %s=1 to create it", rel(r.golden), EnvUpdateGolden)
	case werr != nil:
		e.t.Errorf("helpers: %v", werr)
	default:
		if d := tape.Compare(want, got, r.mode); d != nil {
			e.t.Errorf("helpers: the recording differs from the golden tape %s (%s mode; a: golden, b: this run; run with %s=1 to accept):\n%s%s",
				rel(r.golden), r.mode, EnvUpdateGolden, d, r.goldenContentDiffs(d))
		}
	}
}

// contentLimit is the capture bound [EnvTapeContent] sets.
func contentLimit() (int64, error) {
	v, ok := os.LookupEnv(EnvTapeContent)
	if !ok || v == "" {
		return DefaultTapeContent, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: not a byte count (want 0 to turn capture off, or N > 0)", EnvTapeContent, v)
	}
	return n, nil
}

// readTapeFile reads a complete tape: a golden cut short is an error.
func readTapeFile(name string) (*tape.Tape, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := tape.Read(f)
	if err != nil {
		return nil, fmt.Errorf("golden tape %s: %w", name, err)
	}
	if t.Truncated {
		return nil, fmt.Errorf("golden tape %s: %w: no trailer", name, tape.ErrFormat)
	}
	return t, nil
}

// keepContent stores the bytes of the file name of fsys, whose BLAKE3 is
// hash, in the content directory beside the tape, as the recorder keeps
// the versions it sees: the content of a file a subprocess wrote
// ([Env.Run]), which no handle of the recorder read. Nothing is kept when
// capture is off, the file is larger than the bound, or it is kept
// already; errors are ignored (the diff then shows hashes only).
func (r *recording) keepContent(fsys afero.Fs, name, hash string, size int64) {
	if r == nil || r.contentDir == "" || size > r.contentMax || hash == "" {
		return
	}
	p := tape.ContentPath(r.contentDir, hash)
	if _, err := os.Stat(p); err == nil {
		return
	}
	b, err := afero.ReadFile(fsys, name)
	if err != nil || int64(len(b)) != size {
		return
	}
	if os.MkdirAll(filepath.Dir(p), 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return
	}
	_, err = tmp.Write(b)
	if err = errors.Join(err, tmp.Close()); err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
}
