package overlayfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/afero"
	"github.com/tidwall/btree"
)

var (
	_ afero.Fs         = (*Fs)(nil)
	_ afero.Lstater    = (*Fs)(nil)
	_ afero.Linker     = (*Fs)(nil)
	_ afero.LinkReader = (*Fs)(nil)
)

// Fs is a copy-on-write overlay of a real directory tree. See the package
// documentation for the contract.
type Fs struct {
	*shared
	layers []*layer // one per root: the primary root's first, then WithRoot's
}

// shared is what the layers of an Fs and of its forks have in common: the
// options, the family and the canonical roots. Only fam changes after
// New, atomically.
type shared struct {
	opts  options
	fam   *family
	roots []string // every layer's root, set in New: outside writes may not reach them
	alias aliases  // the roots' identities, to tell their aliases (alias.go)
}

// layer is one root's copy-on-write layer: its entries and contents, what
// Commit depends on, its handles and its caches of the lower, under its
// own locks.
type layer struct {
	*shared
	root string // canonical absolute root

	mu      sync.RWMutex
	paths   pathMap                    // root-relative slash path -> entry
	cache   atomic.Pointer[lowerCache] // what the layer knows of the lower: see lower
	blobs   *btree.Map[uint64, *blob]  // file identity -> content
	gen     uint64                     // blobs with another gen are shared: clone before writing
	deps    *btree.Map[string, dep]    // lower paths the layer depends on (for Commit)
	copied  map[string]uint64          // lower file -> identity of its copy-up
	copyIno map[uint64]bool            // the identities in copied: kept while early read handles may need them
	copies  atomic.Int64               // copy-ups ever made: read handles' cheap check
	links   linkState                  // hard links (link.go)

	hmu     sync.Mutex
	opened  map[uint64]*handleCount // open handle count per file identity
	bound   bindings                // where open handles are (the strings change under mu)
	orphan  map[uint64]bool         // identities unlinked while open: true while WithQuota counts them (until the last close)
	orphans atomic.Int32            // len(orphan), read by release without hmu
	sites   map[*file]*handleSite   // WithQuota: where open layer-file handles are (quota_sites.go)

	q quotaState // what WithQuota counts (quota.go), under mu
}

// family is shared by an Fs, its forks and its extra roots: generations
// must be unique across all of them because they share blobs, and they
// create entries with one umask and owner.
type family struct {
	gen atomic.Uint64
	ino atomic.Uint64

	// epoch counts the changes of the lower made through the family
	// (Commit), and Resets and Restores: a layer's cache of the lower is
	// good for one epoch (see layer.lower).
	epoch atomic.Uint64

	once sync.Once
	proc creator // the process's umask and ids, read at the first creation

	clock clock // the times of changes
}

type options struct {
	extra         []string
	outsideWrites bool
	outsideReads  bool
	umask         fs.FileMode
	umaskSet      bool
	quota         quota                       // WithQuota (quota.go)
	faults        func(op, name string) error // WithFaults (faults.go)
	as            *asUser                     // AsUser (perm.go): nil checks nothing
	maxFile       int64                       // the largest a layer file grows: see maxFileSize
}

// Option configures New.
type Option func(*options)

// AllowOutsideWrites lets writes to paths outside the root go to the real
// file system, as afero.OsFs would do. By default they fail with
// ErrOutsideRoot. A path that reaches the root by another name (a bind
// mount of it, of a directory holding it or of one of its directories) is
// not outside: its writes go to the layer (see the package documentation).
// A hard link outside the root to a file of the root is that same file:
// writing or changing it through the outside name changes the root's file
// (nothing tells a name of an inode from its other names short of
// searching the root).
func AllowOutsideWrites() Option { return func(o *options) { o.outsideWrites = true } }

// DenyOutsideReads makes reads of paths outside the root fail with
// ErrOutsideRoot. By default they pass through to the real file system.
func DenyOutsideReads() Option { return func(o *options) { o.outsideReads = false } }

// WithUmask sets the umask applied to the permission bits of new files and
// directories. Without it, an Fs applies the process umask as it is when
// the Fs, one of its forks or one of its extra roots first creates a file
// or directory: it is read then, once, and kept for all of them (os reads
// it at every creation; a test that changes the umask after its Fs has
// created something should pass WithUmask).
func WithUmask(m fs.FileMode) Option {
	return func(o *options) { o.umask, o.umaskSet = m&fs.ModePerm, true }
}

// New returns an overlay of the directory root. The root is made absolute and
// its symlinks are resolved once, here; it must exist and be a directory.
// An empty root is an error wrapping [fs.ErrInvalid], not the working
// directory. New does not read the umask (see [WithUmask]).
func New(root string, opts ...Option) (*Fs, error) {
	o := options{outsideReads: true, maxFile: maxFileSize()}
	for _, opt := range opts {
		opt(&o)
	}
	f := &Fs{shared: &shared{opts: o, fam: new(family)}}
	for _, dir := range append([]string{root}, o.extra...) {
		if err := f.addRoot(dir); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// newLayer returns an empty layer of the directory root.
func newLayer(sh *shared, root string) (*layer, error) {
	if root == "" {
		// filepath.Abs("") is the working directory: an unset variable
		// would silently overlay the package directory.
		return nil, pathErr("overlayfs.New", root, fmt.Errorf("empty root: %w", fs.ErrInvalid))
	}
	canon, err := canonRoot(root)
	if err != nil {
		return nil, err
	}
	f := &layer{shared: sh, root: canon}
	f.resetLocked()
	return f, nil
}

// canonRoot returns the canonical absolute path of the directory root,
// which must not hold an unfinished commit journal. Where no component of
// the absolute path is a symlink, the cleaned path is canonical already:
// three system calls say so, and check the rest (see plainDir).
func canonRoot(root string) (string, error) {
	abs := filepath.Clean(root)
	if !filepath.IsAbs(root) {
		wd, err := getwd()
		if err != nil {
			return "", pathErr("overlayfs.New", root, err)
		}
		abs = filepath.Join(wd, root)
	}
	if journal, ok := plainDir(abs, journalName); ok {
		if journal && !liveJournal(abs) {
			return "", interruptedErr("overlayfs.New", root)
		}
		return abs, nil
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if _, serr := os.Stat(abs); serr != nil {
			err = serr // as os says it: EvalSymlinks says ELOOP in words only
		}
		return "", fixErr("overlayfs.New", root, err)
	}
	isDir, err := checkJournal("overlayfs.New", root, canon)
	if err != nil {
		return "", err
	}
	if !isDir {
		fi, err := os.Stat(canon)
		if err != nil {
			return "", fixErr("overlayfs.New", root, err)
		}
		if !fi.IsDir() {
			return "", pathErr("overlayfs.New", root, errNotDir)
		}
	}
	return canon, nil
}

// resetLocked empties the layer. The family's epoch moves: what any layer
// saw of the lower is seen again.
func (l *layer) resetLocked() {
	l.fam.lowerChanged()
	l.paths = newPathMap(btree.NewMap[string, entry](32))
	l.blobs = btree.NewMap[uint64, *blob](32)
	l.gen = l.fam.gen.Add(1)
	l.deps = btree.NewMap[string, dep](32)
	l.links.names = nil            // made at the first link
	l.copied, l.copyIno = nil, nil // made at the first copy-up
	l.q = quotaState{}
	l.hmu.Lock()
	l.bound, l.opened, l.orphan, l.sites = bindings{}, nil, nil, nil // made at the first use
	l.orphans.Store(0)
	l.hmu.Unlock()
}

// ResetLayer discards the layer of the primary root only (the one [Fs.Layer]
// returns and [Fs.PutEntry] writes), as Reset does for every root: the
// layers of roots added with [WithRoot] are kept. With a single root it is
// Reset.
func (f *Fs) ResetLayer() {
	g := f.primary()
	g.mu.Lock()
	g.resetLocked()
	g.mu.Unlock()
}

// Root returns the canonical absolute path of the root.
func (f *Fs) Root() string { return f.primary().root }

// Name returns "overlayfs".
func (f *Fs) Name() string { return "overlayfs" }

// Reset discards the layer: the view is the lower again. Handles open on
// layer files keep working on detached copies of their content.
func (f *Fs) Reset() {
	for _, g := range f.layers {
		g.mu.Lock()
		g.resetLocked()
		g.mu.Unlock()
	}
}

// host returns the host path of a root-relative path.
func (l *layer) host(rel string) string {
	if rel == "" {
		return l.root
	}
	if l.root == "/" {
		return "/" + rel
	}
	return l.root + "/" + filepath.FromSlash(rel)
}

// now is the time of a change made now (see clock).
func (s *shared) now() time.Time { return s.fam.clock.now() }
