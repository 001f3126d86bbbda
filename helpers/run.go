package helpers

import (
	"context"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"

	"github.com/cowfs/cowfs/kernel"
	"github.com/cowfs/cowfs/overlayfs"
	"github.com/cowfs/cowfs/tape"
)

// Run runs cmd on the test's overlay with [kernel.Run] (a kernel overlay
// of the root, or the copy fallback; confined as kernel.Run describes)
// and imports what it changed into the overlay, so Changes, golden patches
// and Commit see it. The test's context kills the command when the test
// ends; called from a Cleanup function, when that context is already
// done, Run runs the command all the same (no process of it outlives the
// test binary either way).
//
// When the test records a tape, what the command changed is recorded
// after it: one command record per changed path, in path order (a write
// with the BLAKE3 and size of the new content, a removal, a mkdir, a
// symlink target, a mode change, a FIFO or socket), tagged with cmd.Args
// with the root replaced by a placeholder. `replay check` therefore sees a
// command whose output differs between runs, and names the path.
//
// The error is kernel.Run's: the command's own *exec.ExitError (its
// changes imported and recorded all the same), or why it could not run.
// On Linux only; elsewhere it returns an error wrapping
// errors.ErrUnsupported.
func (e *Env) Run(cmd *exec.Cmd, opts ...kernel.RunOption) error {
	e.t.Helper()
	var before *overlayfs.Snapshot
	if e.rec != nil {
		before = e.ov.Snapshot()
	}
	ctx := e.t.Context()
	if ctx.Err() != nil {
		// In a Cleanup: the test has ended, its teardown still runs commands.
		ctx = context.WithoutCancel(ctx)
	}
	err := kernel.Run(ctx, e.ov, cmd, opts...)
	if e.rec != nil {
		if rerr := e.recordCommand(cmd.Args, before); rerr != nil {
			e.t.Errorf("helpers: recording what %s changed: %v", filepath.Base(cmd.Path), rerr)
		}
	}
	return err
}

// recordCommand records on the tape how the overlay differs from before.
func (e *Env) recordCommand(argv []string, before *overlayfs.Snapshot) error {
	after := e.ov.Snapshot()
	old := e.ov.Fork()
	old.Restore(before)
	var changes []tape.CommandChange
	for _, c := range e.ov.ChangesBetween(before, after) {
		if c.Root != "" && c.Root != e.ov.Root() {
			continue // another root of the overlay: not the tape's
		}
		cc, ok, err := commandChange(e.ov, old, c)
		if err != nil {
			return err
		}
		if ok {
			changes = append(changes, cc)
			if cc.Op == tape.OpCmdWrite {
				// The bytes too, so that a divergence shows a text diff.
				e.rec.keepContent(e.ov, filepath.Join(e.ov.Root(), filepath.FromSlash(cc.Path)), cc.Hash, cc.Size)
			}
		}
	}
	// The root as given, whose EvalSymlinks spelling (Root) RecordCommand
	// adds: argv holds whichever the test used.
	return e.rec.recorder.RecordCommand(e.given, argv, changes)
}

// commandChange turns one change between the old view and now into the
// record of what the command left there. ok is false for a change no
// command record describes.
func commandChange(now, old *overlayfs.Fs, c overlayfs.Change) (cc tape.CommandChange, ok bool, err error) {
	abs := filepath.Join(now.Root(), filepath.FromSlash(c.Path))
	cc = tape.CommandChange{Path: c.Path, Mode: c.Mode}
	if c.Kind == overlayfs.Deleted {
		cc.Op = tape.OpCmdRemove
		return cc, true, nil
	}
	sameType := c.Kind == overlayfs.Modified && c.Mode.Type() == c.OldMode.Type()
	switch t := c.Mode.Type(); {
	case t == fs.ModeDir:
		cc.Op = tape.OpCmdMkdir
		if sameType {
			cc.Op = tape.OpCmdChmod
		}
	case t == fs.ModeSymlink:
		cc.Op = tape.OpCmdSymlink
		cc.Target, err = now.ReadlinkIfPossible(abs)
	case t == fs.ModeNamedPipe || t == fs.ModeSocket:
		cc.Op = tape.OpCmdMknod
	case t == 0:
		cc.Op = tape.OpCmdWrite
		if cc.Hash, cc.Size, err = hashFile(now, abs); err != nil {
			return cc, false, err
		}
		if sameType && c.Mode != c.OldMode {
			// Content or mode changed, or both: only a mode change is a chmod.
			oh, _, err := hashFile(old, abs)
			if err != nil {
				return cc, false, err
			}
			if oh == cc.Hash {
				cc.Op, cc.Hash, cc.Size = tape.OpCmdChmod, "", 0
			}
		}
	default:
		return cc, false, nil
	}
	return cc, err == nil, err
}

func hashFile(f *overlayfs.Fs, name string) (string, int64, error) {
	r, err := f.Open(name)
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	h, n, err := tape.HashReader(r)
	if err != nil {
		return "", 0, fmt.Errorf("hashing %s: %w", name, err)
	}
	return h, n, nil
}
