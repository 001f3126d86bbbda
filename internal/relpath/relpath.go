// Package relpath holds cowfs's one set of rules for root-relative paths:
// the names of paths under an overlay's root as layers, changes, tapes and
// kernel plans carry them.
//
// A root-relative path is slash-separated and clean: path.Clean leaves it
// as it is, it is not absolute, and it does not climb out of the root
// with "..". Its components are C strings the kernel takes as names, so
// it holds no NUL; any other bytes are fine (names need not be UTF-8,
// which is where fs.ValidPath differs).
//
// The root itself is spelled [Root], ".", at every public edge: in a
// LayerEntry, a Change, a tape record and a kernel plan. A package may key
// the root differently inside (overlayfs's layer keys it ""), but says "."
// wherever a path leaves it.
package relpath

import "strings"

// Root is the root's own spelling.
const Root = "."

// Valid reports whether rel is Root or a path below the root (see
// [Below]).
func Valid(rel string) bool {
	return rel == Root || Below(rel)
}

// Below reports whether rel names a path strictly below the root: not
// empty, every component a name (not empty, ".", or ".."), no NUL. Those
// are the paths path.Clean keeps as they are, other than ".", ".." and
// names starting with "/" or "../". It searches rel for the bytes that
// can make it unclean (a NUL, a doubled slash, a dot starting a
// component) rather than look at each byte: the resolver's fast path
// runs it on every name.
func Below(rel string) bool {
	if rel == "" || rel[0] == '/' || rel[len(rel)-1] == '/' ||
		strings.IndexByte(rel, 0) >= 0 || strings.Contains(rel, "//") {
		return false
	}
	for i := strings.IndexByte(rel, '.'); i >= 0; {
		if i == 0 || rel[i-1] == '/' {
			// A component starting with a dot: "." or ".." alone?
			j := i + 1
			if j < len(rel) && rel[j] == '.' {
				j++
			}
			if j == len(rel) || rel[j] == '/' {
				return false
			}
		}
		k := strings.IndexByte(rel[i+1:], '.')
		if k < 0 {
			break
		}
		i += 1 + k
	}
	return true
}

// NamesFit reports whether no component of rel is longer than max bytes.
func NamesFit(rel string, max int) bool {
	if len(rel) <= max {
		return true
	}
	for rest := rel; ; {
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return len(rest) <= max
		}
		if i > max {
			return false
		}
		rest = rest[i+1:]
	}
}

// Fits reports whether rel is below the root (see [Below]) with no
// component longer than max bytes (see [NamesFit]). A short rel (the
// resolver's common name) is checked in one pass over its bytes; each of
// Below's searches costs a call of a few nanoseconds, most of the check
// on a name of a few bytes.
func Fits(rel string, max int) bool {
	if len(rel) > shortRel {
		return Below(rel) && NamesFit(rel, max)
	}
	start, plain := 0, false // plain: the component has a byte other than '.'
	for i := 0; i < len(rel); i++ {
		switch c := rel[i]; {
		case c > '/': // most bytes: '.', '/' and NUL sort below
			plain = true
		case c == '/':
			if !nameFits(i-start, plain, max) {
				return false
			}
			start, plain = i+1, false
		case c == 0:
			return false
		case c != '.':
			plain = true
		}
	}
	return nameFits(len(rel)-start, plain, max)
}

// shortRel is the longest rel Fits checks byte by byte: past it, Below's
// searches (vector instructions) are faster.
const shortRel = 32

// nameFits reports whether a component of n bytes, plain unless all dots,
// is a name of at most max bytes: not empty, ".", or "..".
func nameFits(n int, plain bool, max int) bool {
	return n > 0 && n <= max && (plain || n > 2)
}

// Dir returns the directory of a path below the root: Root for a name at
// the top.
func Dir(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return Root
}

// Join joins a root-relative directory (Root included) and a name.
func Join(dir, name string) string {
	if dir == Root || dir == "" {
		return name
	}
	return dir + "/" + name
}

// Within reports whether p is dir or lies below it; every path lies
// within the root (Root, or "" as a package keys it inside).
func Within(p, dir string) bool {
	switch {
	case dir == Root || dir == "":
		return true
	case len(p) == len(dir):
		return p == dir
	}
	return len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}
