package tape_test

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/tape"
)

// run is the code under test: it reads a config and writes a report.
func run(fsys afero.Fs, greeting string) {
	cfg, _ := afero.ReadFile(fsys, "/work/config.txt")
	afero.WriteFile(fsys, "/work/out/report.txt", append(cfg, greeting...), 0o644)
}

func record(greeting string) *tape.Tape {
	mem := afero.NewMemMapFs()
	afero.WriteFile(mem, "/work/config.txt", []byte("name=demo\n"), 0o644)
	mem.MkdirAll("/work/out", 0o755)

	var buf bytes.Buffer
	rec := tape.NewRecorder(&buf, tape.WithTest("example.com/demo", "TestReport"))
	run(rec.Wrap(mem, "/work"), greeting)
	if err := rec.Close(); err != nil {
		panic(err)
	}
	t, err := tape.Read(&buf)
	if err != nil {
		panic(err)
	}
	return t
}

func Example() {
	a, b := record("hello"), record("hello")
	fmt.Println(tape.Compare(a, b, tape.ModePath) == nil)

	c := record("bye")
	class, d := tape.Classify(a, c)
	fmt.Println(class, d.Path, len(d.A), len(d.B))
	// Output:
	// true
	// data out/report.txt 1 1
}

func ExampleTape_Canon() {
	t := record("hello")
	for _, l := range t.Canon(tape.ModeGlobal) {
		fmt.Println(l)
	}
	// Output:
	// fstat config.txt mode=-rw-r--r-- size=10
	// open config.txt flag=r rsize=10 rhash=d9cfbf7b8d7979d7ec5c5030a8e6daae0ed585849408eaf9398e06b904f331f0 spans=0+10
	// open out/report.txt flag=w|create|trunc mode=-rw-r--r-- size=15 hash=7357936cd60e700afe97dabfa406af30273d6bd153a5b65d60d2535cdcc190bd
}

func ExampleCompare() {
	a := record("hello")
	b := record("hello, world")
	d := tape.Compare(a, b, tape.ModePath)
	fmt.Print(d)
	// Output:
	// tape: first divergence in path mode (class data) at path out/report.txt
	//   a: #3 open out/report.txt flag=w|create|trunc mode=-rw-r--r-- size=15 hash=7357936cd60e700afe97dabfa406af30273d6bd153a5b65d60d2535cdcc190bd
	//   b: #3 open out/report.txt flag=w|create|trunc mode=-rw-r--r-- size=22 hash=51e17dc3c8da76b4b0d7436fd2616bbaf93c30c323aa65829bdf478bf419225f
}

func ExampleDiff() {
	a := record("hello")
	b := record("bye")
	class, ds := tape.Diff(a, b, tape.ModeGlobal, tape.WithContext(1))
	fmt.Println(class, len(ds))
	for _, d := range ds {
		fmt.Println("context:", d.ContextLines)
		fmt.Println("a:", d.ALines[0][:len("open out/report.txt")], "b:", d.BLines[0][:len("open out/report.txt")])
	}
	// Output:
	// data 1
	// context: [open config.txt flag=r rsize=10 rhash=d9cfbf7b8d7979d7ec5c5030a8e6daae0ed585849408eaf9398e06b904f331f0 spans=0+10]
	// a: open out/report.txt b: open out/report.txt
}

func ExampleRead_truncated() {
	var buf bytes.Buffer
	rec := tape.NewRecorder(&buf)
	fsys := rec.Wrap(afero.NewMemMapFs(), "/")
	fsys.Mkdir("/a", 0o755)
	fsys.Stat("/a/b")
	// The process dies here: no Close, no trailer.
	t, err := tape.Read(&buf)
	fmt.Println(err, t.Truncated, len(t.Records))
	for _, l := range t.Canon(tape.ModeGlobal) {
		fmt.Println(l)
	}
	// Output:
	// <nil> true 2
	// mkdir a mode=-rwxr-xr-x
	// stat a/b err=not-exist
}

func ExampleWithReference() {
	ref := record("hello")

	mem := afero.NewMemMapFs()
	afero.WriteFile(mem, "/work/config.txt", []byte("name=demo\n"), 0o644)
	mem.MkdirAll("/work/out", 0o755)
	rec := tape.NewRecorder(io.Discard, tape.WithReference(ref, func(d *tape.Divergence) {
		// A test would call t.Errorf("%v", d) here: d.Stack shows this call.
		fmt.Println("diverged at", d.Path, "with", d.B[0].Op)
	}))
	fsys := rec.Wrap(mem, "/work")
	run(fsys, "bye")
	rec.Close()
	// Output:
	// diverged at out/report.txt with open
}

func ExampleFs() {
	mem := afero.NewMemMapFs()
	rec := tape.NewRecorder(io.Discard)
	fsys := rec.Wrap(mem, "/")
	// Wrap returns an afero.Fs; its dynamic type is *tape.Fs.
	tf := fsys.(*tape.Fs)
	fmt.Println(tf.Inner() == mem, tf.Name())
	// Output:
	// true TapeFs
}

// The final state names what a run leaves: a file the records prove new
// with its mode, a write where something may have been with the
// permission a new file would get (perm), and, once that name is removed,
// a residue line: had it been a symlink, what was written lives on at its
// target.
func ExampleTape_Final() {
	mem := afero.NewMemMapFs()
	afero.WriteFile(mem, "/work/old.txt", []byte("old\n"), 0o644)
	var buf bytes.Buffer
	rec := tape.NewRecorder(&buf)
	fsys := rec.Wrap(mem, "/work")
	if f, err := fsys.OpenFile("/work/new.txt", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.WriteString("new\n")
		f.Close()
	}
	afero.WriteFile(fsys, "/work/out.txt", []byte("out\n"), 0o644)
	afero.WriteFile(fsys, "/work/old.txt", []byte("tmp\n"), 0o644)
	fsys.Remove("/work/old.txt")
	if err := rec.Close(); err != nil {
		panic(err)
	}
	t, err := tape.Read(&buf)
	if err != nil {
		panic(err)
	}
	for _, l := range t.Final() {
		fmt.Println(l)
	}
	// Output:
	// new.txt file size=4 hash=79d1d8da0b625035cdbfc9d51841030861b9f4cf7c5abbe442a8d13efc352170 mode=-rw-------
	// old.txt deleted
	// old.txt residue was=lower size=4 hash=57282565456ddaa6022879ec7abce1e3937dc7e2065a1a74ecea7711c9763b7d perm=-rw-r--r--
	// out.txt lower size=4 hash=88701ce6a0ef00d97590d1cda02dd0cb7e78e5255972941e3e1e082ec9b4aedb perm=-rw-r--r--
}
