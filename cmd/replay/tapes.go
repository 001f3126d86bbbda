package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cowfs/cowfs/tape"
)

// loaded is a tape read from a file.
type loaded struct {
	file string
	t    *tape.Tape
}

// loadTape reads and parses one tape file. The error names the file.
func loadTape(file string) (*loaded, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := tape.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &loaded{file: file, t: t}, nil
}

// key is how tapes of two runs are paired: the package and test named in
// the header, or the file name for a tape that names neither.
func (l *loaded) key() string {
	h := l.t.Header
	if h.Package == "" && h.Test == "" {
		return filepath.Base(l.file)
	}
	return h.Package + " " + h.Test
}

// name is the test the tape is of, for display (see testName).
func (l *loaded) name() string {
	return testName(l.t.Header.Package, l.t.Header.Test, l.file)
}

// loadDir reads every *.tape file of dir, in name order. A file that does
// not parse is an error: a directory of tapes is not partly compared.
func loadDir(dir string) ([]*loaded, error) {
	files, err := tapeFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []*loaded
	for _, f := range files {
		l, err := loadTape(f)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// byKey indexes tapes by key. Several tapes with one key (a test that
// made two Envs, or ran twice under -count=2: helpers names them
// "<name>.tape", "<name>.2.tape", ...) get the keys "K", "K #2", ... in the
// order of those numbers, so that they pair up across runs.
func byKey(ls []*loaded) map[string]*loaded {
	ls = slices.Clone(ls)
	slices.SortStableFunc(ls, func(a, b *loaded) int {
		return cmp.Or(cmp.Compare(a.key(), b.key()), cmp.Compare(fileNumber(a.file), fileNumber(b.file)))
	})
	m := make(map[string]*loaded, len(ls))
	n := map[string]int{}
	for _, l := range ls {
		k := l.key()
		n[k]++
		if n[k] > 1 {
			k += " #" + strconv.Itoa(n[k])
		}
		m[k] = l
	}
	return m
}

// fileNumber is N of a tape file named "<name>.N.tape", 1 otherwise.
func fileNumber(file string) int {
	base := strings.TrimSuffix(filepath.Base(file), ".tape")
	if i := strings.LastIndexByte(base, '.'); i >= 0 {
		if n, err := strconv.Atoi(base[i+1:]); err == nil && n > 1 {
			return n
		}
	}
	return 1
}

// sortedKeys returns the union of the keys of the maps, sorted.
func sortedKeys[V any](ms ...map[string]V) []string {
	var ks []string
	for _, m := range ms {
		for k := range m {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return slices.Compact(ks)
}

// isVersionError says whether err is a tape too new for this reader, which
// every command treats as trouble rather than as an invalid tape.
func isVersionError(err error) bool { return errors.Is(err, tape.ErrVersion) }

// contentDirs returns the content sidecar directories that may hold the
// bytes recorded on the tape in file: the directories given with -content,
// then "<file>.content" and "content" beside the file, where they exist.
func contentDirs(file string, extra []string) []string {
	dirs := slices.Clone(extra)
	for _, d := range []string{
		strings.TrimSuffix(file, ".tape") + ".content",
		filepath.Join(filepath.Dir(file), "content"),
	} {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// readContent looks hash up in dirs.
func readContent(dirs []string, hash string) ([]byte, bool) {
	for _, d := range dirs {
		if b, err := tape.ReadContent(d, hash); err == nil {
			return b, true
		}
	}
	return nil, false
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// isReadError says whether err is about the tape's content (a
// *tape.ReadError) rather than about reaching the file.
func isReadError(err error) bool {
	var re *tape.ReadError
	return errors.As(err, &re)
}
