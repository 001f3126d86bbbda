package overlayfs

import (
	"os"
	"path/filepath"
	"strings"
)

// Linux's limits: symlinks followed before ELOOP, bytes in a name, bytes
// in a path (with its NUL).
const (
	maxHops = 40
	nameMax = 255
	pathMax = 4096
)

// loc is a resolved name: where an operation on it lands.
// Its fields are ordered so that its size is a multiple of 16 bytes (see
// node).
type loc struct {
	name    string // as the caller passed it; used in errors
	rel     string // root-relative slash path, when inside
	host    string // resolved host path, when outside (os resolves the rest); inside: f.host(rel), or "" until needed
	n       node   // the node at rel, when have is set
	other   int    // outside: 1 + the index of the other root host lies in (see errOtherRoot), or 0
	inside  bool
	visible bool // the lower shows through rel's parent
	dirOnly bool // the name ended in a slash or "." or "..": it must be a directory
	slash   bool // the name ends in a slash after a normal last component
	last    lastKind
	have    bool
}

// hostOf returns the host path of an inside location.
func (l *layer) hostOf(at loc) string {
	if at.host != "" {
		return at.host
	}
	return l.host(at.rel)
}

// lastKind is what the last component of a name is, as the kernel sorts
// it: an operation on the entry itself (mkdir, unlink, rename) cannot act
// on "." or "..".
type lastKind uint8

const (
	lastNorm   lastKind = iota // a name
	lastDot                    // "x/.", ".": the directory x itself
	lastDotDot                 // "x/..", "..": x's parent
)

// lastOf returns the kind of name's last component and whether a slash
// follows it.
func lastOf(name string) (lastKind, bool) {
	t := strings.TrimRight(name, "/")
	slash := len(t) < len(name)
	if t == "" {
		return lastDot, false // "/": the root directory itself
	}
	switch t[strings.LastIndexByte(t, '/')+1:] {
	case ".":
		return lastDot, false
	case "..":
		return lastDotDot, false
	}
	return lastNorm, slash
}

// dirCheck is for a name ending in "." or "..", whose last component is
// never acted on: the directory it names must exist. It returns the error
// the kernel gives when it does not (resolving the name's "parent"), or
// nil.
func (l *layer) dirCheck(at loc) error {
	n, err := l.final(at)
	switch {
	case err != nil:
		return err
	case !n.exists():
		return errNoEnt
	case n.kind != kindDir:
		return errNotDir
	}
	return nil
}

// resolve maps a caller's name to a location. Every operation goes through
// it: it cleans the name, decides inside or outside the root, and follows
// symlinks component by component in the merged view. The final component
// is followed only when follow is set or the name ends in a slash.
// abs is name made absolute (see Fs.pick), or "" for resolve to make it.
// Callers hold l.mu (read or write).
func (l *layer) resolve(op, name, abs string, follow bool) (loc, error) {
	var at loc
	err := l.resolveInto(&at, op, name, abs, howOf(follow)|hSlashFollows)
	return at, err
}

// resolveEntry resolves a name whose last component an operation creates
// or removes (mkdir, rmdir, rename): a trailing slash does not make it
// follow a final symlink, as in Linux; dirOnly still reports the slash.
// Callers check l.last: the kernel never acts on a last "." or "..".
func (l *layer) resolveEntry(op, name, abs string) (loc, error) {
	var at loc
	err := l.resolveInto(&at, op, name, abs, 0)
	return at, err
}

// how says how resolveInto resolves a name.
type how uint8

const (
	hFollow       how = 1 << iota // follow a final symlink
	hSlashFollows                 // a trailing slash follows a final symlink (not for resolveEntry)
	hStat                         // the caller reads the node: Stat, Lstat (see fastLoc)
)

// howOf returns hFollow when follow is set.
func howOf(follow bool) how {
	if follow {
		return hFollow
	}
	return 0
}

// resolveInto resolves name into *at: resolve and resolveEntry, and Stat's
// resolution (hStat). It is the only route from a name to a location: a
// clean name in a known directory takes the fast path (fastLoc), anything
// else is walked. at is the caller's, zero on entry, filled in place: a
// Stat moves no loc from one frame to the next.
func (l *layer) resolveInto(at *loc, op, name, abs string, h how) error {
	if name == "" {
		return pathErr(op, name, errNoEnt)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return pathErr(op, name, errInval) // as os: no NUL in a C string
	}
	if len(name) >= pathMax {
		return pathErr(op, name, errNameTooLong)
	}
	if abs == "" {
		abs = name
	}
	if !filepath.IsAbs(abs) {
		wd, err := getwd()
		if err != nil {
			return pathErr(op, name, err)
		}
		abs = wd + "/" + name
	}
	follow := h&hFollow != 0
	if ok, err := l.fastLoc(at, op, name, abs, h); ok && (l.opts.as == nil || l.searchUpLocked(at.rel)) {
		return err
	}
	last, slash := lastOf(name)
	dirOnly := slash || last != lastNorm
	// "x/." walks x as a directory to look "." up in: x is always followed.
	follow = follow || last == lastDot || slash && h&hSlashFollows != 0
	var err error
	if rest, ok := l.within(lexClean(abs)); ok {
		*at, err = l.walk(op, name, splitRel(rest), exit{}, follow, 0)
	} else {
		*at, err = l.outside(op, name, abs, follow, 0)
	}
	at.name, at.dirOnly, at.slash, at.last = name, at.dirOnly || dirOnly, slash, last
	if err == nil && last == lastDot && at.inside && l.opts.as != nil && l.searchLocked(at.rel) != nil {
		*at = loc{}
		return pathErr(op, name, errAccess) // AsUser: "x/." looks "." up in x
	}
	if err == nil && !at.inside {
		// The resolved host path, with what the name's end asks for.
		switch {
		case last == lastDot:
			at.host += "/."
		case slash || at.dirOnly && last == lastNorm:
			at.host += "/"
		}
	}
	return err
}

// within reports whether a lexically clean absolute path lies in the root,
// and returns the root-relative rest (which may still hold "..").
func (l *layer) within(p string) (string, bool) {
	return relUnder(l.root, p)
}

// outside handles a name that is not lexically under the root. It walks
// the name on the real file system, as the kernel would, only as long as
// it is outside the root: a name that enters the root ("../x" from a
// working directory beside it, a symlink pointing into it, an alias such as
// a bind mount of the root or of one of its directories: see alias.go)
// continues in the merged view from there. Anything else is a host path;
// loc.other says when it lies in another root of the Fs (also with the
// error of a name that stops there).
func (l *layer) outside(op, name, abs string, follow bool, hops int) (loc, error) {
	pending := splitRel(abs)
	cur := "/"
	// Where cur is: for each directory from "/", its mount and the root
	// it lies in (alias.go).
	ids := l.rootIDs()
	var buf [16]hostLevel
	levels := append(buf[:0], ids.slashLevel())
	host := "" // set when the walk stops before the end
	for len(pending) > 0 {
		if rel, ok := l.within(cur); ok {
			return l.walk(op, name, append(splitRel(rel), pending...), exit{}, follow, hops)
		}
		c := pending[0]
		pending = pending[1:]
		if c == ".." {
			levels = levels[:max(1, len(levels)-1)]
			if len(pending) == 0 {
				host = joinRaw(cur, []string{c}) // a last "..": not to be acted on
				break
			}
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		kind, id, err := lstatID(next)
		if err != nil || kind != hostSymlink || len(pending) == 0 && !follow {
			switch {
			case err == nil && kind == hostDir:
				cur = next
				lv, in, rel := l.enter(ids, levels[len(levels)-1], cur, id)
				levels = append(levels, lv)
				if in >= 0 && l.roots[in] == l.root {
					// An alias of the root or of one of its directories: ".."
					// leaves it for the alias's parent, as in the kernel.
					ex := exit{depth: len(splitRel(rel)), up: filepath.Dir(cur)}
					return l.walk(op, name, append(splitRel(rel), pending...), ex, follow, hops)
				}
				continue
			case len(pending) == 0:
			case err != nil && isMissing(err):
				// Something must follow: "missing/..", "file/x". Fs.pick
				// reads other, to pick the root the name stopped in.
				return loc{other: levels[len(levels)-1].in + 1}, pathErr(op, name, errno(err))
			case err == nil:
				return loc{other: levels[len(levels)-1].in + 1}, pathErr(op, name, errNotDir)
			}
			host = joinRaw(next, pending) // the kernel takes it from here, outside the root
			break
		}
		if hops++; hops > maxHops {
			return loc{}, pathErr(op, name, errLoop)
		}
		target, err := os.Readlink(next)
		if err != nil {
			host = joinRaw(next, pending)
			break
		}
		if filepath.IsAbs(target) {
			cur = "/"
			levels = append(levels[:0], ids.slashLevel())
		}
		pending = append(splitRel(target), pending...)
	}
	if host == "" {
		if rel, ok := l.within(cur); ok {
			return l.walk(op, name, splitRel(rel), exit{}, follow, hops)
		}
		host = cur
	}
	return loc{host: host, other: levels[len(levels)-1].in + 1}, nil
}

// exit is where ".." leads out of a walk's tree: from the directory depth
// components below the root (the root itself for the zero exit) to the
// host directory up (the root's parent for the zero exit). A walk entered
// through an alias of one of the root's directories leaves at that
// directory for the alias's parent.
type exit struct {
	depth int
	up    string
}

// dir returns the host directory ".." leads to from e's directory.
func (e exit) dir(l *layer) string {
	if e.up == "" {
		return filepath.Dir(l.root)
	}
	return e.up
}

type frame struct {
	rel   string
	under bool // the lower shows through this directory
	chain bool // it and its ancestors are real lower directories (see lowerCache.chains)
}

// walk resolves root-relative components in the merged view.
// ex is where ".." leaves the walk's tree.
func (l *layer) walk(op, name string, pending []string, ex exit, follow bool, hops int) (loc, error) {
	lc := l.lower()
	var frames [16]frame
	stack := append(frames[:0], frame{"", true, true}) // the root is never opaque
	var dt dirTargets                                  // final symlinks' targets ending in a slash
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		dt.next(len(pending))
		if c == "" || c == "." {
			continue
		}
		top := stack[len(stack)-1]
		if l.opts.as != nil {
			if err := l.searchLocked(top.rel); err != nil {
				return loc{}, pathErr(op, name, err)
			}
		}
		if c == ".." {
			if len(stack) == 1+ex.depth {
				return l.outside(op, name, joinRaw(ex.dir(l), pending), follow, hops)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		if len(c) > nameMax {
			return loc{}, pathErr(op, name, errNameTooLong)
		}
		rel := join(top.rel, c)
		last := len(pending) == 0
		if last && !follow {
			return loc{inside: true, rel: rel, visible: top.under, dirOnly: dt.mustDir}, nil
		}
		n, err := l.step(lc, top, rel, last)
		if err != nil {
			return loc{}, fixErr(op, name, err)
		}
		switch n.kind {
		case kindNone:
			if last {
				return loc{inside: true, rel: rel, visible: top.under, n: n, have: true, dirOnly: dt.mustDir}, nil
			}
			return loc{}, pathErr(op, name, errNoEnt)
		case kindSymlink:
			if hops++; hops > maxHops {
				// dirOnly says a final symlink's target ended in a slash
				// on the way, where a create stops (see openWriteLocked),
				// unless the loop is in that target's directory part,
				// which the kernel walks first (a -> "a/.": ELOOP).
				return loc{dirOnly: dt.slashStop}, pathErr(op, name, errLoop)
			}
			target, err := l.linkTarget(rel, n)
			if err != nil {
				return loc{}, fixErr(op, name, err)
			}
			if last {
				dt.final(target)
			}
			if !filepath.IsAbs(target) {
				pending = append(splitRel(target), pending...)
				continue
			}
			if rest, ok := l.within(lexClean(target)); ok {
				stack, ex = stack[:1], exit{}
				pending = append(splitRel(rest), pending...)
				continue
			}
			return l.outside(op, name, joinRaw(target, pending), follow, hops)
		case kindDir:
			if last {
				return loc{inside: true, rel: rel, visible: top.under, n: n, have: true, dirOnly: dt.mustDir}, nil
			}
			stack = append(stack, frame{rel, n.under, !n.layer && top.chain})
		default:
			if last {
				return loc{inside: true, rel: rel, visible: top.under, n: n, have: true, dirOnly: dt.mustDir}, nil
			}
			return loc{}, pathErr(op, name, errNotDir)
		}
	}
	// The name ended at a directory already on the stack ("a/..", the root).
	top := stack[len(stack)-1]
	visible := true
	if len(stack) > 1 {
		visible = stack[len(stack)-2].under
	}
	at := loc{inside: true, rel: top.rel, visible: visible, dirOnly: dt.mustDir}
	if top.rel == "" {
		n, err := l.rootNode()
		if err != nil {
			return loc{}, fixErr(op, name, err)
		}
		at.n, at.have = n, true
	}
	return at, nil
}

// step looks up the component rel in the directory top. Intermediate
// lower directories are served from the cache of real lower directory
// chains, so a deep path costs no system calls beyond the first visit; a
// lower directory met in a chain extends it.
func (l *layer) step(c *lowerCache, top frame, rel string, last bool) (node, error) {
	if !last && top.under && top.chain && c.isChain(rel) {
		if _, ok := l.paths.Get(rel); !ok {
			return node{kind: kindDir, under: true}, nil
		}
	}
	n, err := l.lookup(rel, top.under)
	if err == nil && top.chain && n.kind == kindDir && !n.layer {
		c.sawChain(rel)
	}
	return n, err
}

// rootNode returns the node of the root directory itself.
func (l *layer) rootNode() (node, error) {
	if e, ok := l.paths.Get(""); ok {
		return node{kind: kindDir, layer: true, e: e, under: !e.opaque}, nil
	}
	fi, err := os.Stat(l.root)
	if err != nil {
		return node{}, err
	}
	return node{kind: kindDir, fi: fi, under: true}, nil
}

// linkTarget returns the target of a symlink node.
func (l *layer) linkTarget(rel string, n node) (string, error) {
	if n.layer {
		return n.e.target(), nil
	}
	return os.Readlink(l.host(rel))
}

// lexClean removes empty and "." components and duplicate slashes but keeps
// "..", whose meaning depends on symlinks.
func lexClean(p string) string {
	if !strings.Contains(p, "//") && !strings.Contains(p, "/.") && !strings.HasSuffix(p, "/") {
		return p
	}
	parts := strings.Split(p, "/")
	out := parts[:0]
	for _, s := range parts {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return "/" + strings.Join(out, "/")
}

// joinRaw joins a path and components with slashes, without cleaning:
// "file/.." must still fail as the kernel fails it.
func joinRaw(p string, rest []string) string {
	if len(rest) == 0 {
		return p
	}
	return strings.TrimRight(p, "/") + "/" + strings.Join(rest, "/")
}

// dirTargets is what the walk saw of final symlinks' targets.
type dirTargets struct {
	// mustDir: the name resolved through a symlink whose target ends in
	// a slash, "/." or is ".", as its last component: the result must
	// be a directory.
	mustDir bool
	// slashTarget: such a target ends in a name and a slash; slashStop:
	// the walk reached that name, where a create stops with EISDIR (the
	// kernel walks the target's directory part first: a loop there is
	// ELOOP).
	slashTarget, slashStop bool
}

// final notes the target of a final symlink.
func (d *dirTargets) final(target string) {
	if strings.HasSuffix(target, "/") || strings.HasSuffix(target, "/.") || target == "." {
		d.mustDir = true
		if slashAfterName(target) {
			d.slashTarget = true
		}
	}
}

// next notes that the walk takes a component, with left ones after it.
func (d *dirTargets) next(left int) {
	if left == 0 && d.slashTarget {
		d.slashStop = true
	}
}

// slashAfterName reports whether target ends in a slash after a name
// (not "." or ".."): "s/", not "s/./" or "../".
func slashAfterName(target string) bool {
	t := strings.TrimRight(target, "/")
	if t == target {
		return false
	}
	base := t[strings.LastIndexByte(t, '/')+1:]
	return base != "" && base != "." && base != ".."
}

// splitRel splits a slash path into its non-empty components.
func splitRel(p string) []string {
	p = filepath.ToSlash(p)
	out := make([]string, 0, strings.Count(p, "/")+1)
	for s := range strings.SplitSeq(p, "/") {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}
