package overlayfs

import "strings"

// deleteTreeLocked removes the layer entries at and below rel.
func (l *layer) deleteTreeLocked(rel string) {
	var keys []string
	l.eachBelow(rel, true, func(k string, e entry) bool {
		keys = append(keys, k)
		return true
	})
	for _, k := range keys {
		if e, ok := l.deleteEntry(k); ok {
			l.dropNameLocked(e)
		}
	}
}

// eachBelow calls fn for layer entries strictly below rel (and rel itself if
// self), in path order.
func (l *layer) eachBelow(rel string, self bool, fn func(k string, e entry) bool) {
	prefix := rel + "/"
	if rel == "" {
		prefix = ""
	}
	if self {
		if e, ok := l.paths.Get(rel); ok && rel != "" {
			if !fn(rel, e) {
				return
			}
		}
	}
	l.paths.Ascend(prefix, func(k string, e entry) bool {
		if !strings.HasPrefix(k, prefix) {
			return false
		}
		if k == "" {
			return true
		}
		return fn(k, e)
	})
}

// parent returns the parent of a root-relative path ("" for top level).
func parent(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

// join joins a root-relative directory and a name.
func join(dir, name string) string {
	if name == "" {
		return dir
	}
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// base returns the last element of a root-relative path.
func base(rel string) string {
	return rel[strings.LastIndexByte(rel, '/')+1:]
}
