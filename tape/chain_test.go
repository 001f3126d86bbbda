package tape

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"
)

// goldenVersions are the tapes of the sample scenario (sampleTape) as each
// format version wrote them.
var goldenVersions = []struct {
	file  string
	minor int
}{
	{"sample.tape", 0},
	{"sample-1.1.tape", 1},
	{"sample-1.2.tape", 2},
	{"sample-1.3.tape", 3},
	{"sample-1.4.tape", 4},
	{"sample-1.5.tape", 5},
}

// TestGoldenVersions: tapes written by formats 1.0 to 1.5 stay
// readable, each trailer's chain is the one FORMAT.md defines for its minor
// version (computed in the test with one-shot BLAKE3 over the lines), and
// each compares identical to a fresh recording, which is format 1.5. The
// final digests of 1.0 to 1.4 are those of 1.4's rules (which agree with
// older ones on this scenario), and 1.5's rules give the fresh one.
func TestGoldenVersions(t *testing.T) {
	freshRaw := sampleTape(t)
	fresh, err := Read(bytes.NewReader(freshRaw))
	require.NoError(t, err)
	require.Equal(t, Minor, fresh.Header.Minor, "a recorder writes format 1.5")
	for _, g := range goldenVersions {
		t.Run(g.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", g.file))
			require.NoError(t, err)
			tp, err := Read(bytes.NewReader(raw))
			require.NoError(t, err)
			require.Equal(t, g.minor, tp.Header.Minor)
			require.NotNil(t, tp.Trailer)
			ls := lines(raw)
			require.Equal(t, specChain(t, ls[:len(ls)-1]), tp.Trailer.Chain)
			if c, d := Classify(tp, fresh); c != Identical {
				t.Errorf("golden vs fresh: %v\n%v", c, d)
			}
			require.Equal(t, fresh.Trailer.Final, sum([]byte(strings.Join(tp.Final(), "\n"))))
			if g.minor < throughMinor {
				require.Equal(t, tp.Trailer.Final, sum([]byte(strings.Join(tp.final(4), "\n"))))
			} else {
				require.Equal(t, fresh.Trailer.Final, tp.Trailer.Final)
			}
		})
	}
	// From 1.2 on, the chain is BLAKE3 of the file's bytes before the trailer line.
	body := freshRaw[:bytes.LastIndexByte(freshRaw[:len(freshRaw)-1], '\n')+1]
	require.Equal(t, sum(body), fresh.Trailer.Chain)
}

// TestChainDetects: in every format version, changes that leave the
// records' count and final state as they were (so only the chain can see
// them) make Read fail with ErrTrailer at the trailer line; the same
// changes with a trailer resealed as FORMAT.md says read fine, so the
// rejection is the chain's.
func TestChainDetects(t *testing.T) {
	setMinor := func(h string, m int) string {
		return strings.Replace(h, fmt.Sprintf(`"minor":%d`, minorOf(t, h)), fmt.Sprintf(`"minor":%d`, m), 1)
	}
	for _, g := range goldenVersions {
		raw, err := os.ReadFile(filepath.Join("testdata", g.file))
		require.NoError(t, err)
		ls := lines(raw)
		hdr, recs, trailer := ls[0], ls[1:len(ls)-1], ls[len(ls)-1]
		// recs[3] is the rename b.txt -> c.txt, recs[4] the stat of a
		// missing name: swapping them keeps the final state.
		swapped := append([]string{}, recs...)
		swapped[3] = strings.Replace(recs[4], `"seq":5`, `"seq":4`, 1)
		swapped[4] = strings.Replace(recs[3], `"seq":4`, `"seq":5`, 1)
		spaced := append([]string{}, recs...)
		spaced[0] = strings.Replace(recs[0], `,"op"`, `, "op"`, 1)
		cr := append([]string{}, recs...)
		cr[1] += "\r"
		otherMinor := 2
		if g.minor >= 2 {
			otherMinor = 1
		}
		for _, c := range []struct {
			name string
			hdr  string
			recs []string
		}{
			{"header changed (test name)", strings.Replace(hdr, `"TestX"`, `"TestY"`, 1), recs},
			{"records swapped", hdr, swapped},
			{"space inside a record", hdr, spaced},
			{"carriage return before a newline", hdr, cr},
			{fmt.Sprintf("minor version set to %d", otherMinor), setMinor(hdr, otherMinor), recs},
		} {
			t.Run(g.file+"/"+c.name, func(t *testing.T) {
				in := strings.Join(append(append([]string{c.hdr}, c.recs...), trailer), "\n") + "\n"
				_, err := Read(strings.NewReader(in))
				var re *ReadError
				require.True(t, errors.As(err, &re) && errors.Is(err, ErrTrailer), "got %v, want ErrTrailer", err)
				require.Equal(t, len(c.recs)+2, re.Line)
				require.Contains(t, err.Error(), "chain hash")
				tp, err := Read(strings.NewReader(rebuild(t, c.hdr, c.recs)))
				require.NoError(t, err, "resealed")
				require.False(t, tp.Truncated)
			})
		}
	}
}

func minorOf(t testing.TB, header string) int {
	t.Helper()
	tp, err := Read(strings.NewReader(header + "\n"))
	require.NoError(t, err)
	return tp.Header.Minor
}

// TestChainLongConcurrent: a tape of many records made by several
// goroutines at once, longer than BLAKE3's 8 KiB batches, ends with the
// chain of its bytes as written, and reads back.
func TestChainLongConcurrent(t *testing.T) {
	mem := afero.NewMemMapFs()
	require.NoError(t, afero.WriteFile(mem, "/r/f", []byte("x"), 0o644))
	var buf bytes.Buffer
	rec := NewRecorder(&buf)
	w := rec.Wrap(mem, "/r")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				w.Stat(fmt.Sprintf("/r/%s-%d-%d", strings.Repeat("n", i%40), g, i))
				w.Stat("/r/f")
			}
		})
	}
	wg.Wait()
	require.NoError(t, rec.Close())
	raw := buf.Bytes()
	ls := lines(raw)
	require.Len(t, ls, 4*500*2+2)
	tp, err := Read(bytes.NewReader(raw))
	require.NoError(t, err)
	require.Equal(t, specChain(t, ls[:len(ls)-1]), tp.Trailer.Chain)
	require.Greater(t, len(raw), 64<<10)
}
