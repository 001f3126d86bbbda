package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestDemo runs the demo's overlay part on the bundled tree: the real tree
// stays unchanged and the patch applies with git (when git is installed).
func TestDemo(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-tree", "../../testdata/demo", "-check="}, &out, &errs); code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}
	for _, want := range []string{
		"deleted  docs/old.md",
		"added    tools/build.sh",
		"rename from scripts/build.sh\nrename to tools/build.sh",
		"new mode 100755",
		"GIT binary patch",
		"byte for byte what it was",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: the git apply step was skipped")
	}
	if !strings.Contains(out.String(), "equal the overlay's, byte for byte") {
		t.Errorf("demo did not prove the patch with git apply:\n%s", out.String())
	}
}
