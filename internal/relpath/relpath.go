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
