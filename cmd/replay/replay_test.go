package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/spf13/afero"
	"github.com/zeebo/blake3"

	"github.com/cowfs/cowfs/internal/longtest"
	"github.com/cowfs/cowfs/tape"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"replay": func() { os.Exit(run(os.Args[1:])) },
	})
}

// TestScript runs testdata/script/*.txtar: replay as a user runs it.
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"mktape": cmdMktape, "seal": cmdSeal},
		Setup:               setupGoEnv,
		// [long]: COWFS_LONG asks for the long campaigns (longtest.On).
		Condition: func(cond string) (bool, error) {
			if cond == "long" {
				return longtest.On(), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

// setupGoEnv passes the go command's caches and module settings to
// scripts that run go, and names the bundled example module ($FLAKY) and
// this module's root ($COWFS, for a replace directive), and the module of
// replay check -vary ($VARY).
func setupGoEnv(e *testscript.Env) error {
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT", "GOTOOLCHAIN"} {
		v := os.Getenv(k)
		if v == "" {
			v = goEnv(k)
		}
		e.Setenv(k, v)
	}
	e.Setenv("GOPROXY", "off")
	e.Setenv("GOFLAGS", "-mod=mod")
	abs, err := filepath.Abs(filepath.Join("..", "..", "examples", "flaky"))
	if err != nil {
		return err
	}
	e.Setenv("FLAKY", abs)
	if abs, err = filepath.Abs(filepath.Join("..", "..", "examples", "vary")); err != nil {
		return err
	}
	e.Setenv("VARY", abs)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	e.Setenv("COWFS", root)
	return nil
}

// goEnv asks the go command for one of its settings.
func goEnv(key string) string {
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// cmdMktape records a tape through the real recorder, over a MemMapFs
// rooted at /r, so that scripts get tapes in the current format:
//
//	mktape [-pkg P] [-test T] [-content DIR] [-noclose] OUT.tape OP...
//
// Each OP is one call: write:PATH=TEXT, append:PATH=TEXT, read:PATH,
// readpart:PATH (one byte), stat:PATH, mkdir:PATH, rm:PATH, rename:OLD=NEW,
// open:PATH (left unclosed), missing:PATH (open fails), outside:PATH
// (stat of an absolute path outside the root), symlink:TARGET=LINK.
// TEXT gets a newline appended; "\n" in it is a newline. -noclose leaves
// the tape without trailer, as a crashed recorder does.
func cmdMktape(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! mktape")
	}
	var pkg, test, content string
	noclose := false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-pkg":
			pkg, args = args[1], args[2:]
		case "-test":
			test, args = args[1], args[2:]
		case "-content":
			content, args = ts.MkAbs(args[1]), args[2:]
		case "-noclose":
			noclose, args = true, args[1:]
		default:
			ts.Fatalf("mktape: unknown flag %s", args[0])
		}
	}
	if len(args) < 1 {
		ts.Fatalf("usage: mktape [-pkg P] [-test T] [-content DIR] [-noclose] OUT.tape OP...")
	}
	var buf bytes.Buffer
	opts := []tape.Option{tape.WithTest(pkg, test)}
	if content != "" {
		opts = append(opts, tape.WithContent(content, 1<<20))
	}
	rec := tape.NewRecorder(&buf, opts...)
	mem := afero.NewMemMapFs()
	ts.Check(mem.MkdirAll("/r", 0o755))
	fsys := rec.Wrap(mem, "/r")
	for _, op := range args[1:] {
		ts.Check(mktapeOp(fsys, op))
	}
	if !noclose {
		ts.Check(rec.Close())
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), buf.Bytes(), 0o644))
}

func mktapeOp(fsys afero.Fs, op string) error {
	verb, arg, ok := strings.Cut(op, ":")
	if !ok {
		return fmt.Errorf("mktape: op %q: want VERB:ARG", op)
	}
	name, text, _ := strings.Cut(arg, "=")
	p := "/r/" + name
	text = strings.ReplaceAll(text, `\n`, "\n") + "\n"
	switch verb {
	case "write":
		return afero.WriteFile(fsys, p, []byte(text), 0o644)
	case "append":
		f, err := fsys.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.Write([]byte(text)); err != nil {
			return err
		}
		return f.Close()
	case "read":
		_, err := afero.ReadFile(fsys, p)
		return err
	case "readpart":
		f, err := fsys.Open(p)
		if err != nil {
			return err
		}
		if _, err := f.Read(make([]byte, 1)); err != nil && err != io.EOF {
			return err
		}
		return f.Close()
	case "stat":
		fsys.Stat(p) // a failure is recorded, and is what the script wants
		return nil
	case "mkdir":
		return fsys.MkdirAll(p, 0o755)
	case "rm":
		fsys.Remove(p)
		return nil
	case "rename":
		return fsys.Rename(p, "/r/"+strings.TrimSuffix(text, "\n"))
	case "open":
		_, err := fsys.Open(p)
		return err
	case "missing":
		if _, err := fsys.Open(p); err == nil {
			return fmt.Errorf("mktape: %s exists", name)
		}
		return nil
	case "outside":
		fsys.Stat(name)
		return nil
	case "symlink":
		return fsys.(afero.Linker).SymlinkIfPossible(name, "/r/"+strings.TrimSuffix(text, "\n"))
	}
	return fmt.Errorf("mktape: unknown op %q", verb)
}

// cmdSeal appends the trailer FORMAT.md defines to a hand-written tape
// without one: seal IN OUT. The chain hash is computed here from the
// format's definition, not by package tape: from minor version 2 on,
// BLAKE3 of the bytes of the lines before the trailer; in 1.0 and 1.1,
// BLAKE3 of the header line, then of the previous chain value followed by
// each record line.
func cmdSeal(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: seal IN OUT")
	}
	sealed, err := seal(ts.ReadFile(args[0]))
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(sealed), 0o644))
}

// seal returns the tape in (header and record lines) with its trailer.
func seal(in string) (string, error) {
	lines := strings.Split(strings.TrimSuffix(in, "\n"), "\n")
	t, err := tape.Read(strings.NewReader(in))
	if err != nil {
		return "", err
	}
	var chain [32]byte
	if t.Header.Minor >= 2 {
		chain = blake3.Sum256([]byte(strings.Join(lines, "\n") + "\n"))
	} else {
		chain = blake3.Sum256([]byte(lines[0]))
		for _, l := range lines[1:] {
			chain = blake3.Sum256(append(chain[:], l...))
		}
	}
	final := tape.HashBytes([]byte(strings.Join(t.Final(), "\n")))
	trailer := fmt.Sprintf(`{"kind":"trailer","records":%d,"final":"%s","chain":"%s"}`, len(lines)-1, final, hex.EncodeToString(chain[:]))
	return in + trailer + "\n", nil
}
