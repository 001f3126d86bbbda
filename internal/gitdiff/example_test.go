package gitdiff_test

import (
	"fmt"
	"io/fs"
	"os"

	"github.com/cowfs/cowfs/internal/gitdiff"
)

func content(s string) func() ([]byte, error) {
	return func() ([]byte, error) { return []byte(s), nil }
}

func ExampleWrite() {
	changes := []gitdiff.Change{
		{
			Path: "hello.txt",
			Old:  &gitdiff.File{Mode: 0o644, Content: content("hello\nworld\n")},
			New:  &gitdiff.File{Mode: 0o755, Content: content("hello\ngopher\n")},
		},
		{
			Path: "docs/new.md",
			New:  &gitdiff.File{Mode: 0o644, Content: content("# Title")},
		},
		{
			Path: "current",
			New:  &gitdiff.File{Mode: fs.ModeSymlink | 0o777, Content: content("v2")},
		},
	}
	if err := gitdiff.Write(os.Stdout, changes); err != nil {
		fmt.Println(err)
	}
	// Output:
	// diff --git a/current b/current
	// new file mode 120000
	// index 0000000..8494ac2
	// --- /dev/null
	// +++ b/current
	// @@ -0,0 +1 @@
	// +v2
	// \ No newline at end of file
	// diff --git a/docs/new.md b/docs/new.md
	// new file mode 100644
	// index 0000000..8a38d58
	// --- /dev/null
	// +++ b/docs/new.md
	// @@ -0,0 +1 @@
	// +# Title
	// \ No newline at end of file
	// diff --git a/hello.txt b/hello.txt
	// old mode 100644
	// new mode 100755
	// index 94954ab..2959e2c
	// --- a/hello.txt
	// +++ b/hello.txt
	// @@ -1,2 +1,2 @@
	//  hello
	// -world
	// +gopher
}

func ExampleWrite_binary() {
	changes := []gitdiff.Change{{
		Path: "blob.bin",
		New:  &gitdiff.File{Mode: 0o644, Content: content("\x00\x01\x02")},
	}}
	if err := gitdiff.Write(os.Stdout, changes); err != nil {
		fmt.Println(err)
	}
	// Output:
	// diff --git a/blob.bin b/blob.bin
	// new file mode 100644
	// index 0000000000000000000000000000000000000000..8352675d67aed6625ece79af41c27fdb4ee2e867
	// GIT binary patch
	// literal 3
	// ScmV(d0Q~;|0RjO40RR602LJ>B
	//
	// literal 0
	// KcmV+b0RR6000031
	//
}
