package tape

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/spf13/afero"
)

// The oracle of these tests is testdata/sample-1.5.tape, written by a
// recorder that made one Write per line: with its header's volatile facts
// given back through WithInfo, a recording of sampleOps must reproduce it
// byte for byte, however it was buffered.

// goldenOpts make a recorder write the header of testdata/sample-1.5.tape.
func goldenOpts() []Option {
	return []Option{
		WithTest("example.com/p", "TestX"),
		WithInfo("go", "go1.26.8"), WithInfo("pid", "17597"),
		WithInfo("start", "2026-11-24T03:43:22.868380651Z"),
	}
}

// goldenLines returns the lines of testdata/sample-1.5.tape, each with
// its newline, the trailer last.
func goldenLines(t testing.TB) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "sample-1.5.tape"))
	if err != nil {
		t.Fatal(err)
	}
	ls := strings.SplitAfter(string(raw), "\n")
	return ls[:len(ls)-1] // "" after the last newline
}

// recordSample records sampleOps, then extra failed stats of
// missing-NNN, and returns the recorder, not closed.
func recordSample(w io.Writer, extra int, opts ...Option) *Recorder {
	mem := afero.NewMemMapFs()
	afero.WriteFile(mem, "/r/a.txt", []byte("alpha"), 0o644)
	rec := NewRecorder(w, append(goldenOpts(), opts...)...)
	fsys := rec.Wrap(mem, "/r")
	sampleOps(fsys)
	for i := range extra {
		fsys.Stat(fmt.Sprintf("/r/missing-%03d", i))
	}
	return rec
}

// extraLines are the lines FORMAT.md gives the extra stats of
// recordSample, after the n records of the sample.
func extraLines(n, extra int) []string {
	var ls []string
	for i := range extra {
		ls = append(ls, fmt.Sprintf(`{"seq":%d,"op":"stat","path":"missing-%03d","err":"not-exist"}`+"\n", n+1+i, i))
	}
	return ls
}

// writtenBySize is what WithBuffer(size, ...) has written of the header
// and records when no timer fired and Close was not called: the header,
// then the records up to the last one that took the buffer past size.
func writtenBySize(header string, records []string, size int) (written string, writes int) {
	written, writes = header, 1
	var pending string
	for _, l := range records {
		pending += l
		if len(pending) > size {
			written += pending
			pending = ""
			writes++
		}
	}
	return written, writes
}

// lineWriter is a writer that checks each Write holds whole lines and
// counts them.
type lineWriter struct {
	t      testing.TB
	w      io.Writer
	writes int
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.writes++
	if len(p) == 0 || p[len(p)-1] != '\n' {
		lw.t.Errorf("Write %d does not end a line: %q", lw.writes, p)
	}
	return lw.w.Write(p)
}

func tempTape(t testing.TB) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "t.tape"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBufferedTapeIsGolden: whatever the buffer size, the file holds the
// golden tape's bytes after Close, written in whole lines, one Write per
// filling of the buffer (the count recomputed from the lines).
func TestBufferedTapeIsGolden(t *testing.T) {
	gl := goldenLines(t)
	golden := strings.Join(gl, "")
	// len(gl[1]): the first record fills the buffer exactly, which is
	// not past it.
	for _, size := range []int{-1, 1, len(gl[1]), 100, 300, 4096} {
		t.Run(fmt.Sprint("size=", size), func(t *testing.T) {
			f := tempTape(t)
			lw := &lineWriter{t: t, w: f}
			opts := []Option{WithBuffer(size, time.Hour)}
			if size < 0 {
				opts = nil // one Write per line
			}
			if err := recordSample(lw, 0, opts...).Close(); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, f.Name()); got != golden {
				t.Fatalf("tape:\n%s\nwant testdata/sample-1.5.tape:\n%s", got, golden)
			}
			want := len(gl)
			if size >= 0 {
				_, want = writtenBySize(gl[0], gl[1:len(gl)-1], size)
				want++ // the rest and the trailer, at Close
			}
			if lw.writes != want {
				t.Errorf("%d Writes, want %d", lw.writes, want)
			}
		})
	}
}

// TestBufferHeldUntilFlush: with an interval that does not pass, the file
// holds the header alone until Flush, and the trailer after Close.
func TestBufferHeldUntilFlush(t *testing.T) {
	gl := goldenLines(t)
	f := tempTape(t)
	rec := recordSample(f, 0, WithBuffer(1<<20, time.Hour))
	if got := readFile(t, f.Name()); got != gl[0] {
		t.Errorf("before Flush the file holds\n%s\nwant the header alone", got)
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := readFile(t, f.Name()), strings.Join(gl[:len(gl)-1], ""); got != want {
		t.Errorf("after Flush the file holds\n%s\nwant\n%s", got, want)
	}
	must(t, rec.Close())
	if got := readFile(t, f.Name()); got != strings.Join(gl, "") {
		t.Errorf("after Close the file holds\n%s", got)
	}
	if err := rec.Flush(); err != nil {
		t.Errorf("Flush after Close: %v", err)
	}
	if !errors.Is(rec.Close(), ErrClosed) {
		t.Error("a second Close is not ErrClosed")
	}
}

// TestBufferTimedFlush: without Flush or Close, the records reach the
// file once the interval has passed. The 10 s deadline only bounds a
// broken timer; the time taken is logged.
func TestBufferTimedFlush(t *testing.T) {
	gl := goldenLines(t)
	want := strings.Join(gl[:len(gl)-1], "")
	f := tempTape(t)
	const every = 20 * time.Millisecond
	start := time.Now()
	rec := recordSample(f, 0, WithBuffer(1<<20, every))
	var got string
	for deadline := start.Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if got = readFile(t, f.Name()); got == want {
			break
		}
	}
	if got != want {
		t.Fatalf("%v after recording, with an interval of %v, the file holds\n%s\nwant\n%s", time.Since(start), every, got, want)
	}
	t.Logf("records on disk %v after the first was made (interval %v)", time.Since(start), every)
	// Another round: the timer is armed again by the next oldest line.
	rec.Wrap(afero.NewMemMapFs(), "/").Stat("/again")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if got = readFile(t, f.Name()); len(got) > len(want) {
			break
		}
	}
	if wantMore := want + fmt.Sprintf(`{"seq":%d,"op":"stat","path":"again","err":"not-exist"}`+"\n", len(gl)-1); got != wantMore {
		t.Errorf("after a second record the file holds\n%s\nwant\n%s", got, wantMore)
	}
	must(t, rec.Close())
}

// failAfter fails every Write after the first n.
type failAfter struct {
	n, writes int
	w         bytes.Buffer
}

var errDiskFull = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	f.writes++
	if f.writes > f.n {
		return 0, errDiskFull
	}
	return f.w.Write(p)
}

// TestBufferWriteErrorSticky: the first failed Write is returned by the
// Flush that met it, by Err, and by Close; nothing is written after it.
func TestBufferWriteErrorSticky(t *testing.T) {
	w := &failAfter{n: 1}
	rec := recordSample(w, 0, WithBuffer(1<<20, time.Hour))
	must(t, rec.Err()) // nothing written yet but the header
	if err := rec.Flush(); !errors.Is(err, errDiskFull) {
		t.Errorf("Flush: %v, want the write error", err)
	}
	rec.Wrap(afero.NewMemMapFs(), "/").Stat("/more")
	if err := rec.Err(); !errors.Is(err, errDiskFull) {
		t.Errorf("Err: %v", err)
	}
	if err := rec.Close(); !errors.Is(err, errDiskFull) {
		t.Errorf("Close: %v", err)
	}
	if w.writes != 2 {
		t.Errorf("%d Writes, want 2: none after the failed one", w.writes)
	}
	if got := w.w.String(); got != goldenLines(t)[0] {
		t.Errorf("written: %q, want the header", got)
	}
}

// TestBufferConcurrent: many goroutines recording while others Flush and
// a short timer fires give a complete tape with every record (run with
// -race).
func TestBufferConcurrent(t *testing.T) {
	f := tempTape(t)
	rec := NewRecorder(f, WithBuffer(256, time.Millisecond))
	fsys := rec.Wrap(afero.NewMemMapFs(), "/")
	const g, n = 6, 300
	var wg sync.WaitGroup
	for i := range g {
		wg.Go(func() {
			for j := range n {
				fsys.Stat(fmt.Sprintf("/g%d/%d", i, j))
				if j%50 == 0 {
					must(t, rec.Flush())
				}
			}
		})
	}
	wg.Wait()
	must(t, rec.Close())
	tp, err := Read(strings.NewReader(readFile(t, f.Name())))
	must(t, err)
	if tp.Truncated || len(tp.Records) != g*n {
		t.Errorf("%d records, truncated %v; want %d", len(tp.Records), tp.Truncated, g*n)
	}
}

// bufferChildEnv makes TestBufferChild a child of TestBufferCrash.
const bufferChildEnv = "COWFS_TAPE_BUFFER_CHILD"

// childInterval is the WithBuffer interval of the "kill" child.
const childInterval = 50 * time.Millisecond

// TestBufferChild records in a child process of TestBufferCrash and dies
// without Close; it does nothing otherwise.
func TestBufferChild(t *testing.T) {
	mode, name, _ := strings.Cut(os.Getenv(bufferChildEnv), ":")
	if mode == "" {
		t.Skip("run by TestBufferCrash")
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	must(t, err)
	switch mode {
	case "exit":
		recordSample(f, 42, WithBuffer(300, time.Hour))
		os.Exit(0)
	case "kill":
		rec := NewRecorder(f, WithBuffer(DefaultBufferSize, childInterval))
		fsys := rec.Wrap(afero.NewMemMapFs(), "/")
		fmt.Println("recording")
		for i := 0; ; i++ {
			fsys.Stat(fmt.Sprintf("/t/%d-%d", i, time.Now().UnixNano()))
			time.Sleep(2 * time.Millisecond)
		}
	}
	t.Fatalf("mode %q", mode)
}

func bufferChild(t *testing.T, mode string) (*exec.Cmd, string) {
	name := filepath.Join(t.TempDir(), "child.tape")
	cmd := exec.Command(os.Args[0], "-test.run=^TestBufferChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), bufferChildEnv+"="+mode+":"+name)
	return cmd, name
}

// TestBufferCrash: a process that dies without Close leaves a tape of
// whole lines: after os.Exit, exactly the lines of the fillings of the
// buffer (recomputed from the golden lines and FORMAT.md's stat line);
// after SIGKILL, every record made more than the interval before the kill,
// give or take the scheduling of a busy machine.
func TestBufferCrash(t *testing.T) {
	t.Run("exit", func(t *testing.T) {
		cmd, name := bufferChild(t, "exit")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		gl := goldenLines(t)
		records := append(gl[1:len(gl)-1:len(gl)-1], extraLines(len(gl)-2, 42)...)
		want, _ := writtenBySize(gl[0], records, 300)
		got := readFile(t, name)
		if got != want {
			t.Fatalf("after os.Exit the tape holds\n%s\nwant\n%s", got, want)
		}
		if all := gl[0] + strings.Join(records, ""); len(want) <= len(gl[0]) || len(want) == len(all) {
			t.Fatalf("the scenario must lose some records and keep some: %d of %d bytes written", len(want), len(all))
		}
		tp, err := Read(strings.NewReader(got))
		must(t, err)
		if !tp.Truncated {
			t.Error("a tape without trailer does not read as truncated")
		}
	})
	t.Run("kill", func(t *testing.T) {
		cmd, name := bufferChild(t, "kill")
		out, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "recording\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child said %q, %v", line, err)
		}
		time.Sleep(20 * childInterval)
		killed := time.Now()
		must(t, cmd.Process.Kill())
		cmd.Wait()
		tp, err := Read(strings.NewReader(readFile(t, name)))
		must(t, err)
		if !tp.Truncated || len(tp.Records) == 0 {
			t.Fatalf("%d records, truncated %v", len(tp.Records), tp.Truncated)
		}
		var last time.Time
		for i, r := range tp.Records {
			n, ns, _ := strings.Cut(strings.TrimPrefix(r.Path, "t/"), "-")
			unix, err := strconv.ParseInt(ns, 10, 64)
			if n != strconv.Itoa(i) || r.Op != "stat" || err != nil {
				t.Fatalf("record %d: %+v", i, r)
			}
			last = time.Unix(0, unix)
		}
		// The child makes a record every 2 ms or so; records up to an
		// interval before the kill must be there. The 400 ms are for a
		// loaded machine, where a timer can fire late.
		lag := killed.Sub(last)
		t.Logf("%d records; the last one on disk made %v before the kill (interval %v)", len(tp.Records), lag, childInterval)
		if lag > childInterval+400*time.Millisecond {
			t.Errorf("the last record on disk was made %v before the kill, with an interval of %v", lag, childInterval)
		}
	})
}

// TestBufferHeaderArmsNoTimer: the header is written by NewRecorder
// itself, so no timer is armed for it (one was, and raced with
// NewRecorder's own write of the buffer under -race).
func TestBufferHeaderArmsNoTimer(t *testing.T) {
	var buf bytes.Buffer
	rec := NewRecorder(&buf, WithBuffer(1<<20, time.Millisecond))
	rec.mu.Lock()
	armed, timer := rec.armed, rec.timer
	rec.mu.Unlock()
	if armed || timer != nil {
		t.Errorf("armed %v, timer %v after the header alone", armed, timer)
	}
	must(t, rec.Close())
}

// TestBufferAllocatesOnce: the buffer is made at its size by NewRecorder;
// records that fill it, and the Writes that empty it, keep that array
// (grown by append, it cost a dozen allocations in the first records).
func TestBufferAllocatesOnce(t *testing.T) {
	rec := NewRecorder(io.Discard, WithBuffer(4096, time.Hour))
	array := unsafe.SliceData(rec.buf)
	// About 50 bytes each: the buffer is written twice.
	for range 200 {
		rec.emitStat("stat", "x", nil, os.ErrNotExist, nil)
		if unsafe.SliceData(rec.buf) != array {
			t.Fatalf("the buffer was reallocated at %d bytes", len(rec.buf))
		}
	}
	must(t, rec.Close())
}
