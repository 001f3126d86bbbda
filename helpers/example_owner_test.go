//go:build unix

package helpers_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/cowfs/cowfs/helpers"
)

// AsRootOwner: the code under test meets a read-only output directory as
// a developer's checkout would present it, even when the test runs as
// root.
func ExampleAsRootOwner() {
	runExample("TestReadOnlyOutput", func(t testing.TB) {
		env := helpers.NewArchive(t, txtar.Parse([]byte(site)), helpers.AsRootOwner())
		if err := env.Fs().Chmod(env.Root(), 0o555); err != nil {
			t.Fatal(err)
		}
		err := render(env.Fs(), env.Root())
		var pe *fs.PathError
		if errors.As(err, &pe) {
			fmt.Println(pe.Op, pe.Err)
		}
	})
	// Output:
	// mkdir permission denied
}
