package helpers

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
)

// Artifact file names written by a failing test to t.ArtifactDir().
const (
	ArtifactChanges = "cowfs-changes.txt" // the change list, one Change.String per line
	ArtifactPatch   = "cowfs.patch"       // the whole git patch of the layer
)

// report logs the change list and the patch of a failed test, each cut to
// LogLimit bytes, and writes them whole to t.ArtifactDir() when go test
// runs with -artifacts.
func (e *Env) report() {
	e.t.Helper()
	changes := changeList(e.ov.Changes())
	var patch bytes.Buffer
	perr := e.ov.WriteDiff(&patch)
	if changes == "" {
		e.logf("the test failed; the overlay has no changes")
	} else {
		e.logf("the test failed; changes in the overlay:\n%s", bound(changes, LogLimit))
		if perr != nil {
			e.logf("rendering the patch: %v", perr)
		} else {
			e.logf("as a git patch:\n%s", bound(patch.String(), LogLimit))
		}
	}
	if !e.artifacts() {
		return
	}
	dir := e.t.ArtifactDir()
	err := os.WriteFile(filepath.Join(dir, ArtifactChanges), []byte(changes), 0o644)
	if err == nil && perr == nil {
		err = os.WriteFile(filepath.Join(dir, ArtifactPatch), patch.Bytes(), 0o644)
	}
	if err != nil {
		e.logf("artifacts: %v", err)
		return
	}
	e.logf("changes and patch written to %s", dir)
}

// artifacts reports whether go test runs with -artifacts (flag
// test.artifacts), unless a test of this package said otherwise.
func (e *Env) artifacts() bool {
	if e.cfg.artifacts != nil {
		return *e.cfg.artifacts
	}
	f := flag.Lookup("test.artifacts")
	return f != nil && f.Value.String() == "true"
}
