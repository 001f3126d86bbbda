package kernel

import "errors"

// The sentinels of this package's own conditions. Their text does not
// say "kernel:": they are always returned wrapped, in an *fs.PathError
// naming the path or in a message that names the operation, so the
// package is said once.
var (
	// ErrNoOverlay means the running kernel has no overlay filesystem.
	ErrNoOverlay = errors.New("overlay filesystem not supported by this kernel (modprobe overlay)")
	// ErrReadOnly means the overlay mounted, but read-only: the kernel
	// could not use the work directory or the upper filesystem and fell back
	// silently. Mount unmounts it again and returns this error.
	ErrReadOnly = errors.New("overlay came up read-only (work dir or upper filesystem unusable)")
	// ErrUpperFilesystem means upper and work are on different filesystems,
	// or on an overlay, which the kernel refuses as an upper layer.
	ErrUpperFilesystem = errors.New("upper and work must be on one non-overlay filesystem (a tmpfs works)")
	// ErrRedirect means an upper directory uses redirect_dir, which a layer
	// cannot express (a renamed lower directory). Import refuses it.
	ErrRedirect = errors.New("upper dir uses redirect_dir (renamed lower directory); mount with redirect_dir=nofollow")
	// ErrMetacopy means an upper file is a metadata-only copy-up whose data
	// lives elsewhere. Import refuses it.
	ErrMetacopy = errors.New("upper dir uses metacopy (metadata-only copy-up); mount with metacopy=off")
	// ErrUnsupportedType means a file type a layer cannot hold: a device
	// node other than the 0/0 whiteout.
	ErrUnsupportedType = errors.New("file type not supported in a layer")
	// ErrUnrepresentable means a layer entry that an OCI layer tar cannot
	// carry: a name that starts with the whiteout prefix ".wh.", or a
	// socket (tar has no type for it).
	ErrUnrepresentable = errors.New("name not representable in an OCI layer")
	// ErrUnconfined means Run could not confine the command as promised:
	// in the copy fallback without Landlock the real root would be
	// writable, and without namespaces the host would be, so Run refuses
	// unless [Unconfined] was given.
	ErrUnconfined = errors.New("command cannot be confined; pass Unconfined() to run it anyway")
)

// ErrReservedName means an entry at the root's ".cowfs-commit", the name
// overlayfs's Commit keeps for its journal: a layer holding it could never
// be committed. Import and Run skip it (importing everything else) and
// ReadOCILayer refuses the tar; their errors wrap this one.
var ErrReservedName = errors.New(`name reserved for Commit's journal (".cowfs-commit")`)

// ErrLinkTarget means a hard link of an OCI layer tar whose target is not
// a file or symlink of the same tar or of the view below it, reached
// without following a symlink. ReadOCILayer refuses the tar.
var ErrLinkTarget = errors.New("hard link target is not a file of this layer or of the layers below")
