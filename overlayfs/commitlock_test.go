//go:build unix

package overlayfs_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/cowfs/cowfs/overlayfs"
)

// lockChildEnv, when set, makes TestCommitLockChild a committing process
// of TestCommitLockTwoProcesses: it holds the JSON of a lockSpec.
const lockChildEnv = "COWFS_LOCK_CHILD"

type lockSpec struct {
	Root   string
	ID     int
	Rounds int
	Seed   uint64
	Log    string
}

// lockNames are the files both processes touch: lower files, and names
// the layers create.
var lockNames = []string{"f0", "f1", "f2", "f3", "f4", "n0", "n1", "n2"}

// lockRound is what one round of a committing process did: the files it
// touched with what it saw of each ("" absent) and the line it appended,
// and how the commit ended.
type lockRound struct {
	Token     string
	Seen      map[string]*string
	OK        bool
	Conflicts []string
	Err       string
}

// TestCommitLockChild is a committing process of
// TestCommitLockTwoProcesses (it does nothing in a plain test run).
func TestCommitLockChild(t *testing.T) {
	spec := os.Getenv(lockChildEnv)
	if spec == "" {
		t.Skip("a child of TestCommitLockTwoProcesses")
	}
	var s lockSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(s.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	enc := json.NewEncoder(out)
	r := rand.New(rand.NewPCG(s.Seed, uint64(s.ID)))
	for round := range s.Rounds {
		if err := enc.Encode(lockOneRound(s, r, round)); err != nil {
			t.Fatal(err)
		}
	}
}

// lockOneRound makes a layer on the root that appends a line to one to
// three of lockNames (creating the absent ones), and commits it.
func lockOneRound(s lockSpec, r *rand.Rand, round int) lockRound {
	res := lockRound{Token: fmt.Sprintf("p%d.r%d", s.ID, round), Seen: map[string]*string{}}
	c, err := overlayfs.New(s.Root)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	for _, i := range r.Perm(len(lockNames))[:1+r.IntN(3)] {
		name := filepath.Join(s.Root, lockNames[i])
		data, err := afero.ReadFile(c, name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			res.Seen[lockNames[i]] = nil
			err = afero.WriteFile(c, name, []byte(res.Token+"\n"), 0o644)
		case err == nil:
			seen := string(data)
			res.Seen[lockNames[i]] = &seen
			if r.IntN(2) == 0 {
				err = afero.WriteFile(c, name, append(data, res.Token+"\n"...), 0o644)
			} else {
				var f afero.File
				f, err = c.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
				if err == nil {
					_, err = f.WriteString(res.Token + "\n")
					f.Close()
				}
			}
		}
		if err != nil {
			res.Err = err.Error()
			return res
		}
	}
	time.Sleep(time.Duration(r.IntN(2000)) * time.Microsecond)
	err = c.Commit()
	var ce *overlayfs.CommitError
	switch {
	case err == nil:
		res.OK = true
	case errors.As(err, &ce) && errors.Is(err, overlayfs.ErrConflict) && !errors.Is(err, overlayfs.ErrInterruptedCommit):
		res.Conflicts = ce.Conflicts
		// Each named path must really differ from what the layer saw
		// (files only grow, so a change stays visible).
		for _, p := range ce.Conflicts {
			seen, touched := res.Seen[p]
			data, rerr := os.ReadFile(filepath.Join(s.Root, p))
			same := !touched || (seen == nil && errors.Is(rerr, fs.ErrNotExist)) || (seen != nil && rerr == nil && string(data) == *seen)
			if same {
				res.Err += fmt.Sprintf("conflict on %s, which is as the layer saw it; ", p)
			}
		}
	default:
		res.Err = err.Error()
	}
	return res
}

// TestCommitLockTwoProcesses runs two processes that each commit one root
// over and over, each round a layer appending a line to one to three
// shared files (creating the absent ones): the commit lock must serialize
// them. Checked against the files on disk: every successful commit's line
// is in every file it touched, right after exactly what it saw there
// (nothing lost, nothing applied to a tree it did not check), the
// successful commits have one serial order across all files, no refused
// commit left a line, every refusal names a path that really changed,
// and no commit saw ErrInterruptedCommit. 30 rounds each by default, 200
// with COWFS_LONG=1.
func TestCommitLockTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	rounds := 30
	if os.Getenv("COWFS_LONG") == "1" {
		rounds = 200
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{}
	for _, n := range lockNames {
		if strings.HasPrefix(n, "f") {
			base[n] = "base " + n + "\n"
			if err := os.WriteFile(filepath.Join(root, n), []byte(base[n]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	logs := make([]string, 2)
	for id := range logs {
		logs[id] = filepath.Join(dir, fmt.Sprintf("log%d", id))
		spec, _ := json.Marshal(lockSpec{Root: root, ID: id, Rounds: rounds, Seed: uint64(time.Now().UnixNano()), Log: logs[id]})
		cmd := exec.Command(os.Args[0], "-test.run=^TestCommitLockChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), lockChildEnv+"="+string(spec))
		wg.Go(func() {
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("child %d: %v\n%s", id, err, out)
			}
		})
	}
	wg.Wait()
	var all []lockRound
	for _, l := range logs {
		f, err := os.Open(l)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r lockRound
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			all = append(all, r)
		}
		f.Close()
	}
	if len(all) != 2*rounds {
		t.Fatalf("%d rounds logged, want %d", len(all), 2*rounds)
	}
	for _, err := range checkLockRounds(root, base, all) {
		t.Error(err)
	}
	ok := 0
	for _, r := range all {
		if r.OK {
			ok++
		}
	}
	t.Logf("%d rounds: %d commits, %d refused with a conflict", len(all), ok, len(all)-ok)
}

// checkLockRounds checks the files under root against the rounds.
func checkLockRounds(root string, base map[string]string, all []lockRound) []error {
	var errs []error
	byToken := map[string]lockRound{}
	for _, r := range all {
		byToken[r.Token] = r
		if r.Err != "" {
			errs = append(errs, fmt.Errorf("%s: %s", r.Token, r.Err))
		}
	}
	after := map[string][]string{} // a token -> the tokens right before it in some file
	for _, n := range lockNames {
		data, err := os.ReadFile(filepath.Join(root, n))
		if errors.Is(err, fs.ErrNotExist) {
			data = nil
		} else if err != nil {
			return append(errs, err)
		}
		content := string(data)
		rest, ok := strings.CutPrefix(content, base[n])
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %q lost its base %q", n, content, base[n]))
			continue
		}
		lines := strings.Split(strings.TrimSuffix(rest, "\n"), "\n")
		if rest == "" {
			lines = nil
		}
		prefix := base[n]
		for i, tok := range lines {
			r, known := byToken[tok]
			seen, touched := r.Seen[n]
			switch {
			case !known || !r.OK:
				errs = append(errs, fmt.Errorf("%s: line %q of a refused or unknown commit", n, tok))
			case !touched:
				errs = append(errs, fmt.Errorf("%s: line %q of a commit that did not touch it", n, tok))
			case (seen == nil) != (prefix == "" && base[n] == "") || seen != nil && *seen != prefix:
				errs = append(errs, fmt.Errorf("%s: commit %s applied over %q, it saw %v", n, tok, prefix, show(seen)))
			}
			if i > 0 {
				after[tok] = append(after[tok], lines[i-1])
			}
			prefix += tok + "\n"
		}
		for _, r := range all {
			if _, touched := r.Seen[n]; touched && r.OK && !slices.Contains(lines, r.Token) {
				errs = append(errs, fmt.Errorf("%s: the line of commit %s is lost", n, r.Token))
			}
		}
	}
	// One serial order: the "comes after" relation has no cycle.
	state := map[string]int{}
	var visit func(string) bool
	visit = func(tok string) bool {
		switch state[tok] {
		case 1:
			return false
		case 2:
			return true
		}
		state[tok] = 1
		for _, b := range after[tok] {
			if !visit(b) {
				return false
			}
		}
		state[tok] = 2
		return true
	}
	for tok := range after {
		if !visit(tok) {
			errs = append(errs, fmt.Errorf("the commits have no serial order (a cycle through %s)", tok))
			break
		}
	}
	return errs
}

func show(s *string) string {
	if s == nil {
		return "absent"
	}
	return fmt.Sprintf("%q", *s)
}

// TestCommitLockLiveJournal: while a Commit holds its root's lock (paused
// in staging, its journal on disk), Recover refuses with
// ErrCommitInProgress and changes nothing, New waits for the commit
// instead of calling its journal interrupted, and a journal left behind
// by a commit stopped after its commit point is interrupted once the lock
// is free.
func TestCommitLockLiveJournal(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := afero.WriteFile(c, filepath.Join(root, "a"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	staging, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		var once sync.Once
		done <- overlayfs.CommitWithFaults(c, func(op, rel string) error {
			if op == "stage" {
				once.Do(func() { close(staging); <-release })
			}
			return nil
		})
	}()
	<-staging
	if _, err := os.Lstat(filepath.Join(root, ".cowfs-commit")); err != nil {
		t.Fatalf("no journal while staging: %v", err)
	}
	err = overlayfs.Recover(root)
	if !errors.Is(err, overlayfs.ErrCommitInProgress) {
		t.Errorf("Recover during a commit: %v, want ErrCommitInProgress", err)
	}
	if _, err := os.Lstat(filepath.Join(root, ".cowfs-commit")); err != nil {
		t.Errorf("Recover during a commit removed the journal: %v", err)
	}
	newDone := make(chan error)
	go func() {
		_, err := overlayfs.New(root)
		newDone <- err
	}()
	select {
	case err := <-newDone:
		t.Fatalf("New returned during a commit: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-newDone; err != nil {
		t.Errorf("New after the commit it waited for: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "a")); string(data) != "new" {
		t.Errorf("a = %q after the commit", data)
	}

	// A commit stopped after its commit point: its journal is dead.
	c2, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := afero.WriteFile(c2, filepath.Join(root, "a"), []byte("newer"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	if err := overlayfs.CommitWithFaults(c2, func(op, rel string) error {
		if op == "place" {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) {
		t.Fatalf("commit stopped at place: %v", err)
	}
	if _, err := overlayfs.New(root); !errors.Is(err, overlayfs.ErrInterruptedCommit) {
		t.Errorf("New over a dead journal: %v, want ErrInterruptedCommit", err)
	}
	if err := overlayfs.Recover(root); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "a")); string(data) != "newer" {
		t.Errorf("a = %q after Recover", data)
	}
}

// TestFailedCommitKeepsRootMtime: a commit refused while staging (here
// by a fault before its first staged file) leaves the root's modification
// time as it was, as os leaves it for a program that wrote nothing.
func TestFailedCommitKeepsRootMtime(t *testing.T) {
	root := t.TempDir()
	old := time.Unix(1_600_000_000, 0)
	if err := os.Chtimes(root, old, old); err != nil {
		t.Fatal(err)
	}
	c, err := overlayfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := afero.WriteFile(c, filepath.Join(root, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("disk full")
	if err := overlayfs.CommitWithFaults(c, func(op, rel string) error {
		if op == "stage" {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) {
		t.Fatalf("commit: %v", err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.ModTime().Equal(old) {
		t.Errorf("root mtime after a failed commit: %v, want %v", fi.ModTime(), old)
	}
	if _, err := os.Lstat(filepath.Join(root, "x")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("x after a failed commit: %v", err)
	}
}
