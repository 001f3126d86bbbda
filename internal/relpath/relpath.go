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
// names starting with "/" or "../". It is one pass over rel's bytes.
func Below(rel string) bool {
	start := 0 // of the current component
	for i := 0; i < len(rel); i++ {
		switch rel[i] {
		case 0:
			return false
		case '/':
			if !name(rel[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return name(rel[start:])
}

// name reports whether c may be a component: not empty, ".", or "..".
func name(c string) bool {
	return c != "" && c != "." && c != ".."
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
