package kernel_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/cowfs/cowfs/kernel"
)

// A test process killed in the middle of kernel.Run leaves its temporary
// directory behind; its owner record is no longer locked, so Cleanup
// removes it. Directories of live owners, and anything else, stay.
func ExampleCleanup() {
	dir, err := os.MkdirTemp("", "cleanup-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// What a killed Run leaves: upper and work, and an owner record
	// whose owner is gone.
	left := filepath.Join(dir, "cowfs-run-1234")
	for _, d := range []string{"upper", "work/work"} {
		if err := os.MkdirAll(filepath.Join(left, d), 0o755); err != nil {
			log.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(left, ".cowfs-owner"), []byte("cowfs owner pid=1234\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	// Not cowfs's.
	if err := os.Mkdir(filepath.Join(dir, "cowfs-notes"), 0o755); err != nil {
		log.Fatal(err)
	}

	removed, err := kernel.Cleanup(dir)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range removed {
		fmt.Println("removed", filepath.Base(p))
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		fmt.Println("kept", e.Name())
	}
	// Output:
	// removed cowfs-run-1234
	// kept cowfs-notes
}
