package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeCommands checks the commands of the README's and
// PERFORMANCE.md's sh blocks against the repository: every replay
// subcommand exists and accepts the flags written, every ./path given to
// go run, go test or go get -tool exists, "replay help" runs. A command of
// another kind fails the test, so a new one gets a check here.
func TestReadmeCommands(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, doc := range []string{"README.md", "PERFORMANCE.md"} {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		cmds := shCommands(b)
		if len(cmds) == 0 {
			t.Errorf("%s: no commands in sh blocks", doc)
		}
		for _, argv := range cmds {
			checkReadmeCommand(t, root, doc, argv)
		}
	}
}

// shCommands returns the command lines of the ```sh blocks of a markdown
// file, comments dropped, split as sh would split simple lines.
func shCommands(md []byte) [][]string {
	var out [][]string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		}
		if !in {
			continue
		}
		if argv := shSplit(line); len(argv) > 0 {
			out = append(out, argv)
		}
	}
	return out
}

// shSplit splits a line into words with single quotes, up to a comment.
func shSplit(line string) []string {
	var words []string
	var w strings.Builder
	have, quoted := false, false
	for _, r := range line {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			w.WriteRune(r)
		case r == '\'':
			quoted, have = true, true
		case r == '#' && !have:
			return words
		case r == ' ' || r == '\t':
			if have {
				words = append(words, w.String())
				w.Reset()
				have = false
			}
		default:
			w.WriteRune(r)
			have = true
		}
	}
	if have {
		words = append(words, w.String())
	}
	return words
}

func checkReadmeCommand(t *testing.T, root, doc string, argv []string) {
	t.Helper()
	line := strings.Join(argv, " ")
	if len(argv) < 2 || argv[0] != "go" {
		t.Errorf("%s: %q: not a go command; teach TestReadmeCommands to check it", doc, line)
		return
	}
	switch argv[1] {
	case "tool":
		if len(argv) < 3 || argv[2] != "replay" {
			break
		}
		args := argv[3:]
		if len(args) > 0 && args[0] == "help" {
			e := &env{ctx: context.Background(), stdout: io.Discard, stderr: io.Discard, getenv: os.Getenv}
			if code := e.main(args); code != exitSame {
				t.Errorf("%s: %q exits %d", doc, line, code)
			}
			return
		}
		c := lookup(args[0])
		if c == nil {
			t.Errorf("%s: %q: replay has no command %q", doc, line, args[0])
			return
		}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.flags(fs)
		if err := fs.Parse(args[1:]); err != nil {
			t.Errorf("%s: %q: %v", doc, line, err)
		}
		return
	case "run", "test":
		for _, a := range argv[2:] {
			if strings.HasPrefix(a, "./") {
				dir := filepath.Join(root, strings.TrimSuffix(strings.TrimSuffix(a, "..."), "/"))
				if _, err := os.Stat(dir); err != nil {
					t.Errorf("%s: %q: %v", doc, line, err)
				}
			}
		}
		return
	case "get":
		const mod = "github.com/cowfs/cowfs"
		p := argv[len(argv)-1]
		if p == mod {
			return
		}
		if rel, ok := strings.CutPrefix(p, mod+"/"); ok {
			if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
				t.Errorf("%s: %q: %v", doc, line, err)
			}
			return
		}
	}
	t.Errorf("%s: %q: not a command TestReadmeCommands knows", doc, line)
}
