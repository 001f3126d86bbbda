package helpers_test

import (
	"fmt"
	"os/exec"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
)

// A test runs a real command on its overlay: the command's writes land in
// the overlay (and, when recording, on the test's tape), never in the
// fixture. With an empty cmd.Dir and the test in its package directory,
// the command runs in the root.
func ExampleEnv_Run() {
	runExample("TestGenerate", func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(site)))
		cmd := exec.Command("sh", "-c", `sed 's/^title=/# /' config > README.md`)
		if err := env.Run(cmd); err != nil {
			t.Fatal(err)
		}
		env.Changed("A README.md")
		env.FileContent("README.md", "# Hello\n")
		fmt.Print(env.Patch())
	})
	// Output:
	// diff --git a/README.md b/README.md
	// new file mode 100644
	// index 0000000..fec5601
	// --- /dev/null
	// +++ b/README.md
	// @@ -0,0 +1 @@
	// +# Hello
}
