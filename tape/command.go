package tape

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/cowfs/cowfs/internal/relpath"
)

// CommandChange is one path a subprocess changed under the root, as
// [Recorder.RecordCommand] records it.
type CommandChange struct {
	Op     string      // one of the OpCmd constants
	Path   string      // slash-separated, relative to the root
	Mode   fs.FileMode // cmd-write, cmd-mkdir, cmd-chmod, cmd-mknod: the new mode, type bits included
	Size   int64       // cmd-write: size of the new content
	Hash   string      // cmd-write: BLAKE3 of the new content, see HashReader
	Target string      // cmd-symlink: the link text
}

// RecordCommand records what the command argv changed under root: one
// record per change, in path order, each tagged with argv. In argv the
// root (either spelling, as Wrap takes it) is replaced by RootPrefix
// wherever it appears as a whole path prefix, and so are absolute symlink
// targets inside the root, so tapes of two runs over two temporary roots
// compare equal. A change whose op is not a command op, or whose path is
// not a clean relative path ("." is the root itself; any bytes but NUL,
// UTF-8 or not), is refused before anything is recorded.
func (r *Recorder) RecordCommand(root string, argv []string, changes []CommandChange) error {
	for _, c := range changes {
		if !IsCommandOp(c.Op) {
			return fmt.Errorf("tape: RecordCommand: %q is not a command op", c.Op)
		}
		// relpath.Valid, not fs.ValidPath: names need not be UTF-8.
		if !relpath.Valid(c.Path) { // "." is the root itself (its mode)
			return fmt.Errorf("tape: RecordCommand: invalid path %q", c.Path)
		}
	}
	// The command changed files behind the recorder's back: a handle that
	// looked its version up before it must not trust that version.
	r.writing()()
	names := newFs(r, nil, root)
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = replaceRoot(a, names.roots)
	}
	sorted := slices.Clone(changes)
	slices.SortStableFunc(sorted, func(a, b CommandChange) int { return cmp.Compare(a.Path, b.Path) })
	recs := make([]*Record, 0, len(sorted))
	for _, c := range sorted {
		rec := &Record{Op: c.Op, Path: path.Clean(c.Path), Cmd: args}
		switch c.Op {
		case OpCmdWrite:
			rec.Mode, rec.Size, rec.Hash = c.Mode.String(), c.Size, c.Hash
		case OpCmdMkdir, OpCmdChmod, OpCmdMknod:
			rec.Mode = c.Mode.String()
		case OpCmdSymlink:
			rec.Target = names.target(c.Target)
		}
		recs = append(recs, rec)
	}
	r.emitAll(recs) // together: nothing interleaves with a command's records
	return nil
}

// replaceRoot replaces by RootPrefix each occurrence of a root in arg that
// starts a path (at the start of arg, or after a byte that is neither a
// slash nor a file name byte: a space, quote, '=', ...) and ends there or
// continues with a slash or another byte that cannot continue a name.
func replaceRoot(arg string, roots []string) string {
	// Longest first: an EvalSymlinks spelling may extend the other.
	roots = slices.DeleteFunc(slices.Clone(roots), func(r string) bool { return r == "" || r == "/" })
	slices.SortFunc(roots, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	var b strings.Builder
	for i := 0; i < len(arg); {
		n := 0
		if i == 0 || arg[i-1] != '/' && !nameByte(arg[i-1]) {
			for _, root := range roots {
				end := i + len(root)
				if strings.HasPrefix(arg[i:], root) && (end == len(arg) || !nameByte(arg[end])) {
					n = len(root)
					break
				}
			}
		}
		if n > 0 {
			b.WriteString(RootPrefix)
			i += n
			continue
		}
		b.WriteByte(arg[i])
		i++
	}
	return b.String()
}

// nameByte reports whether c may continue a file name component.
func nameByte(c byte) bool {
	return c == '.' || c == '-' || c == '_' || c == '+' || c == '@' || c == '~' ||
		'0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}

// HashReader returns the BLAKE3 (lowercase hex, as in tapes) and the size
// of everything r yields, streaming.
func HashReader(r io.Reader) (hash string, size int64, err error) {
	h := blake3.New()
	size, err = io.Copy(h, r)
	if err != nil {
		return "", size, err
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}
