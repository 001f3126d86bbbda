package kernel

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// workDir decides where the command runs, given where the root is as the
// command sees it (see: the root itself, or the copy): its Dir, or the
// process's working directory when Dir is empty, mapped to see when it lies
// inside the root. A working directory outside the root is replaced by the
// root when Dir was empty (the command then cannot write by relative names
// outside it), and kept (made absolute) when the caller set Dir. The second result is path
// resolved as the command's program, made absolute when the directory moved
// away from where a relative path was meant.
func workDir(root, see, dir, path string) (string, string) {
	d := dir
	if d == "" {
		d, _ = os.Getwd()
	}
	abs, err := filepath.Abs(d)
	if err == nil {
		real := abs
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			real = r
		}
		if rel, ok := relInside(root, real); ok {
			return filepath.Join(see, rel), path
		}
	}
	if dir != "" {
		if err == nil {
			return abs, path // absolute: the command may start elsewhere first
		}
		return dir, path
	}
	if !filepath.IsAbs(path) && strings.Contains(path, "/") {
		if p, err := filepath.Abs(path); err == nil {
			path = p
		}
	}
	return see, path
}

// tempOutsideRoot refuses a temporary directory inside the root: the upper
// dir, the copy and the command's TMPDIR would then be part of the tree
// the command runs on (and, in copy mode, writable parts of the real root).
func tempOutsideRoot(root, tmp string) error {
	abs, err := filepath.Abs(tmp)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if _, inside := relInside(root, abs); inside {
		return fmt.Errorf("kernel: Run: temporary directory %s lies inside the root %s; choose another with WithTempDir or TMPDIR", tmp, root)
	}
	return nil
}

// enterable checks that the command's directory dir (in the copy cp) can
// be entered, and otherwise fails as os/exec does for a missing Dir,
// naming the directory as the caller named it (given), or where it lies
// in the root.
func enterable(dir, given, cp, root string) error {
	_, err := os.Stat(dir)
	if err == nil {
		return nil
	}
	name := given
	if name == "" {
		name = dir
		if rel, ok := relInside(cp, dir); ok {
			name = filepath.Join(root, rel)
		}
	}
	var errno error = err
	if pe, ok := err.(*fs.PathError); ok {
		errno = pe.Err
	}
	return &fs.PathError{Op: "chdir", Path: name, Err: errno}
}
