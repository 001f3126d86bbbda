package helpers

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/spf13/afero"
)

// chaosSeed returns the seed of the Chaos option: ChaosSeed's, else
// EnvChaosSeed's, else a random one. A value of EnvChaosSeed that is not
// a seed is an error: a typo must not replay another order silently.
func chaosSeed(c config) (uint64, error) {
	if c.seedSet {
		return c.seed, nil
	}
	if v := os.Getenv(EnvChaosSeed); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s=%q: not a seed (want a decimal uint64)", EnvChaosSeed, v)
		}
		return s, nil
	}
	return rand.Uint64(), nil
}

// chaosFs hands out directory handles whose listings come in a shuffled
// order (listing) and file handles whose Read returns fewer bytes than
// asked (shortRead). Every other call goes to the inner file system as it
// is; its optional methods are reached through Unwrap (see [As]).
type chaosFs struct {
	afero.Fs
	seed      uint64
	listing   bool     // shuffle listings
	shortRead bool     // cut reads short
	lower     afero.Fs // where entries are Lstat'ed unrecorded: the overlay
	roots     []string // spellings of the root: listings are keyed relative to it

	mu    sync.Mutex
	count map[string]uint64 // listings made per cleaned name
}

var (
	_ afero.Lstater    = (*chaosFs)(nil)
	_ afero.Linker     = (*chaosFs)(nil)
	_ afero.LinkReader = (*chaosFs)(nil)
)

// newChaosFs shuffles the listings of inner. lower is the file system
// below any recording wrapper of inner, used to Lstat entries the caller
// asks for after reading their names only.
func newChaosFs(inner afero.Fs, seed uint64, lower afero.Fs, roots ...string) *chaosFs {
	return &chaosFs{Fs: inner, seed: seed, listing: true, lower: lower, roots: roots, count: map[string]uint64{}}
}

// Unwrap returns the file system chaosFs wraps, for [As].
func (c *chaosFs) Unwrap() afero.Fs { return c.Fs }

func (c *chaosFs) lstat(name string) (fs.FileInfo, error) {
	if l, ok := c.lower.(afero.Lstater); ok {
		fi, _, err := l.LstatIfPossible(name)
		return fi, err
	}
	return c.lower.Stat(name)
}

// key names a directory for the permutation: its slash path relative to the
// root when inside it, so that a seed replays in another run over another
// temporary root; its cleaned absolute name otherwise.
func (c *chaosFs) key(name string) string {
	abs, err := filepath.Abs(name)
	if err != nil {
		return filepath.Clean(name)
	}
	for _, r := range c.roots {
		if rel, err := filepath.Rel(r, abs); err == nil && filepath.IsLocal(rel) {
			return filepath.ToSlash(rel)
		}
	}
	return abs
}

func (c *chaosFs) Name() string { return "ChaosFs" }

func (c *chaosFs) Create(name string) (afero.File, error) {
	return c.wrap(name)(c.Fs.Create(name))
}

func (c *chaosFs) Open(name string) (afero.File, error) {
	return c.wrap(name)(c.Fs.Open(name))
}

func (c *chaosFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	return c.wrap(name)(c.Fs.OpenFile(name, flag, perm))
}

func (c *chaosFs) wrap(name string) func(afero.File, error) (afero.File, error) {
	return func(f afero.File, err error) (afero.File, error) {
		if err != nil {
			return f, err
		}
		cf := &chaosFile{File: f, fs: c, name: name, key: c.key(name)}
		if c.shortRead {
			cf.short = c.rand("\x00read:" + cf.key) // apart from the listings: -vary=listing alone replays their order
		}
		return cf, nil
	}
}

// LstatIfPossible, SymlinkIfPossible and ReadlinkIfPossible go to the
// first file system down the chain that has them ([As]), and behave as
// afero's own wrappers when none does.

func (c *chaosFs) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	if l, ok := As[afero.Lstater](c.Fs); ok {
		return l.LstatIfPossible(name)
	}
	fi, err := c.Fs.Stat(name)
	return fi, false, err
}

func (c *chaosFs) SymlinkIfPossible(oldname, newname string) error {
	if l, ok := As[afero.Linker](c.Fs); ok {
		return l.SymlinkIfPossible(oldname, newname)
	}
	return &os.LinkError{Op: "symlink", Old: oldname, New: newname, Err: afero.ErrNoSymlink}
}

func (c *chaosFs) ReadlinkIfPossible(name string) (string, error) {
	if l, ok := As[afero.LinkReader](c.Fs); ok {
		return l.ReadlinkIfPossible(name)
	}
	return "", &os.PathError{Op: "readlink", Path: name, Err: afero.ErrNoReadlink}
}

// rand returns the source of the next handle of key: a function of the
// seed, key and how many handles or listings of key came before.
func (c *chaosFs) rand(key string) *rand.Rand {
	c.mu.Lock()
	k := c.count[key]
	c.count[key] = k + 1
	c.mu.Unlock()
	h := fnv.New64a()
	h.Write([]byte(key))
	return rand.New(rand.NewPCG(c.seed, h.Sum64()^(k*0x9e3779b97f4a7c15)))
}

// permutation returns a random order of n elements for the next listing of
// key: a function of the seed, key and how many listings of key came
// before. For n >= 2 it is never the identity, so an order-dependent caller
// never sees the inner order by luck.
func (c *chaosFs) permutation(key string, n int) []int {
	r := c.rand(key)
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	r.Shuffle(n, func(i, j int) { p[i], p[j] = p[j], p[i] })
	identity := true
	for i, v := range p {
		identity = identity && i == v
	}
	if identity && n >= 2 {
		p = append(p[1:], p[0])
	}
	return p
}

// chaosFile serves the listing of a directory in shuffled order. The whole
// listing is read from the inner handle at the first Readdir, Readdirnames
// or ReadDir (names only for Readdirnames), then handed out in pages with
// os's rules: n > 0 gives at most n entries and io.EOF at the end, n <= 0
// gives the rest and a nil error. The three share one position, as with
// os.File. Seek(0, io.SeekStart) starts a new listing, in a new order.
type chaosFile struct {
	afero.File
	fs   *chaosFs
	name string // as opened, to Lstat entries
	key  string

	mu     sync.Mutex
	short  *rand.Rand // shortRead: the lengths of reads
	loaded bool
	names  []string      // the listing, shuffled
	infos  []fs.FileInfo // the same order; nil until a call needs them
	pos    int
}

// load reads the listing at the first call; infos says the call needs
// FileInfos. Called with mu held.
func (f *chaosFile) load(infos bool) error {
	if !f.loaded {
		var n int
		var all []fs.FileInfo
		var names []string
		var err error
		if infos {
			all, err = f.File.Readdir(-1)
			n = len(all)
		} else {
			names, err = f.File.Readdirnames(-1)
			n = len(names)
		}
		if err != nil {
			return err
		}
		p := f.fs.permutation(f.key, n)
		if !f.fs.listing {
			p = identity(n)
		}
		f.names = make([]string, n)
		if infos {
			f.infos = make([]fs.FileInfo, n)
		}
		for i, j := range p {
			if infos {
				f.infos[i] = all[j]
				f.names[i] = all[j].Name()
			} else {
				f.names[i] = names[j]
			}
		}
		f.loaded, f.pos = true, 0
		return nil
	}
	if infos && f.infos == nil {
		// Readdirnames first, then Readdir or ReadDir on one handle:
		// Lstat the rest below the tape, as os does, dropping entries that
		// vanished meanwhile.
		names := f.names[:f.pos]
		f.infos = make([]fs.FileInfo, f.pos, len(f.names))
		for _, n := range f.names[f.pos:] {
			fi, err := f.fs.lstat(filepath.Join(f.name, n))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			names = append(names, n)
			f.infos = append(f.infos, fi)
		}
		f.names = names
	}
	return nil
}

// next returns the bounds of the next page of the listing.
func (f *chaosFile) next(n int, infos bool) (lo, hi int, err error) {
	if err := f.load(infos); err != nil {
		return 0, 0, err
	}
	lo, hi = f.pos, len(f.names)
	if n > 0 {
		if lo == hi {
			return 0, 0, io.EOF
		}
		hi = min(hi, lo+n)
	}
	f.pos = hi
	return lo, hi, nil
}

// maxShortRead bounds a cut-short Read: small enough that a read of a
// small file comes back short too.
const maxShortRead = 512

// Read asks the inner handle for fewer bytes than p holds (at least one,
// at most maxShortRead) when reads are cut short: io.Reader allows it,
// and callers that take one Read for the whole file break. The tape records the bytes read as
// spans, whatever the buffer sizes, so it does not change.
func (f *chaosFile) Read(p []byte) (int, error) {
	if f.short != nil && len(p) > 1 {
		f.mu.Lock()
		n := 1 + f.short.IntN(min(len(p)-1, maxShortRead))
		f.mu.Unlock()
		p = p[:n]
	}
	return f.File.Read(p)
}

func (f *chaosFile) Readdir(n int) ([]fs.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lo, hi, err := f.next(n, true)
	if err != nil {
		return nil, err
	}
	return append([]fs.FileInfo{}, f.infos[lo:hi]...), nil
}

func (f *chaosFile) Readdirnames(n int) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lo, hi, err := f.next(n, false)
	if err != nil {
		return nil, err
	}
	return append([]string{}, f.names[lo:hi]...), nil
}

// ReadDir is the fs.ReadDirFile method os.File has, shuffled too.
func (f *chaosFile) ReadDir(n int) ([]fs.DirEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lo, hi, err := f.next(n, true)
	if err != nil {
		return nil, err
	}
	des := make([]fs.DirEntry, hi-lo)
	for i, fi := range f.infos[lo:hi] {
		des[i] = fs.FileInfoToDirEntry(fi)
	}
	return des, nil
}

func (f *chaosFile) Seek(offset int64, whence int) (int64, error) {
	pos, err := f.File.Seek(offset, whence)
	if err == nil && offset == 0 && whence == io.SeekStart {
		f.mu.Lock()
		f.loaded, f.names, f.infos, f.pos = false, nil, nil, 0
		f.mu.Unlock()
	}
	return pos, err
}

func identity(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}
