package main

import (
	"context"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cowfs/cowfs/helpers"
)

// Each variation changes its setting away from what the runs inherit, the
// same way for one seed whether it runs alone or with the others (what
// makes "replay check -vary=NAME -seed S" reproduce a run of -vary), and
// another way for most other seeds.
func TestPerturbValues(t *testing.T) {
	inherited := map[string]string{"TZ": "Europe/Paris", "LANG": "de_DE.UTF-8", "GOCACHE": "/c", "GOMODCACHE": "/m", "GOPATH": "/p", "GOENV": "/e"}
	getenv := func(k string) string { return inherited[k] }
	setting := func(p *perturbation, key string) string {
		for _, kv := range p.env {
			if k, v, _ := strings.Cut(kv, "="); k == key {
				return v
			}
		}
		return ""
	}
	seen := map[string]map[string]bool{}
	for seed := range uint64(40) {
		all, err := perturb(variations, seed, getenv, t.TempDir(), true)
		if err != nil {
			t.Fatal(err)
		}
		if got := setting(all, "TZ"); got == "" || got == inherited["TZ"] {
			t.Errorf("seed %d: TZ=%q, inherited %q", seed, got, inherited["TZ"])
		}
		if got := setting(all, "LC_ALL"); got == "" || got == inherited["LANG"] || setting(all, "LANG") != got {
			t.Errorf("seed %d: LC_ALL=%q LANG=%q, inherited LANG %q", seed, got, setting(all, "LANG"), inherited["LANG"])
		}
		if got := setting(all, "GOMAXPROCS"); got == "" || got == strconv.Itoa(runtime.GOMAXPROCS(0)) {
			t.Errorf("seed %d: GOMAXPROCS=%q, now %d", seed, got, runtime.GOMAXPROCS(0))
		}
		if u := currentUmask(); u >= 0 && (all.umask < 0 || all.umask == u) {
			t.Errorf("seed %d: umask %03o, now %03o", seed, all.umask, u)
		}
		if got := setting(all, "GOCACHE"); got != "/c" {
			t.Errorf("seed %d: HOME moved but GOCACHE=%q, not pinned to /c", seed, got)
		}
		if !slices.Contains(all.args, "-shuffle="+strconv.FormatUint(seed, 10)) {
			t.Errorf("seed %d: go test args %q lack -shuffle", seed, all.args)
		}
		for _, key := range []string{"TZ", "LC_ALL", "GOMAXPROCS"} {
			name := map[string]string{"TZ": "tz", "LC_ALL": "locale", "GOMAXPROCS": "procs"}[key]
			alone, err := perturb([]string{name}, seed, getenv, t.TempDir(), true)
			if err != nil {
				t.Fatal(err)
			}
			if setting(alone, key) != setting(all, key) {
				t.Errorf("seed %d: %s=%q alone, %q with every variation", seed, key, setting(alone, key), setting(all, key))
			}
			if seen[key] == nil {
				seen[key] = map[string]bool{}
			}
			seen[key][setting(all, key)] = true
		}
	}
	for key, vals := range seen {
		if len(vals) < 3 {
			t.Errorf("%s takes %d values over 40 seeds, want 3 or more", key, len(vals))
		}
	}
}

func TestVaryFlag(t *testing.T) {
	parse := func(args ...string) (*varyFlag, error) {
		var v varyFlag
		fs := flag.NewFlagSet("check", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Var(&v, "vary", "")
		return &v, fs.Parse(args)
	}
	if v, err := parse("-vary", "./pkg"); err != nil || !v.set || !slices.Equal(v.names, variations) {
		t.Errorf("-vary: %+v, %v; want every variation, ./pkg left as an argument", v, err)
	}
	if v, err := parse("-vary=tz,listing,tz"); err != nil || v.String() != "listing,tz" {
		t.Errorf("-vary=tz,listing,tz: %q, %v; want listing,tz", v.String(), err)
	}
	for _, bad := range []string{"-vary=", "-vary=sideways", "-vary=tz,,nope"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if v, _ := parse(); v.set {
		t.Error("-vary is on without the flag")
	}
}

// TestPerturbSeenByChild: what each environment variation sets is what
// the command sees, observed from a child shell (the oracle): TZ, LANG and
// LC_ALL, GOMAXPROCS, HOME and TMPDIR as the perturbation says and unlike
// this process's, the umask it was started with, and the list of
// variations for the helpers.
func TestPerturbSeenByChild(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	if currentUmask() < 0 {
		t.Skip("no umask here")
	}
	out := filepath.Join(t.TempDir(), "seen")
	script := `for v in TZ LANG LC_ALL GOMAXPROCS HOME TMPDIR ` + helpers.EnvVary + `; do eval "echo $v=\$$v"; done > "$0"; echo UMASK=$(umask) >> "$0"`
	for seed := range uint64(3) {
		p, err := perturb(variations, seed, os.Getenv, t.TempDir(), false)
		if err != nil {
			t.Fatal(err)
		}
		e := &env{ctx: context.Background(), stdout: io.Discard, stderr: io.Discard, getenv: os.Getenv}
		if _, err := runOnce(e, []string{"sh", "-c", script, out}, t.TempDir(), 2, p); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{}
		for l := range strings.Lines(string(b)) {
			k, v, _ := strings.Cut(strings.TrimSpace(l), "=")
			seen[k] = v
		}
		for _, kv := range p.env {
			k, v, _ := strings.Cut(kv, "=")
			if k == "GOCACHE" || k == "GOMODCACHE" || k == "GOPATH" || k == "GOENV" || k == helpers.EnvVarySeed {
				continue
			}
			if seen[k] != v {
				t.Errorf("seed %d: the child sees %s=%q, the perturbation sets %q", seed, k, seen[k], v)
			}
			if k != helpers.EnvVary && seen[k] == os.Getenv(k) {
				t.Errorf("seed %d: %s=%q is what this process has: not varied", seed, k, seen[k])
			}
		}
		for _, k := range []string{"TZ", "LANG", "LC_ALL", "GOMAXPROCS", "HOME", "TMPDIR"} {
			if _, ok := seen[k]; !ok || seen[k] == "" {
				t.Errorf("seed %d: the child sees no %s", seed, k)
			}
		}
		u, err := strconv.ParseInt(seen["UMASK"], 8, 32)
		if err != nil || int(u) != p.umask || int(u) == currentUmask() {
			t.Errorf("seed %d: the child's umask %q, the perturbation's %03o, this process's %03o", seed, seen["UMASK"], p.umask, currentUmask())
		}
		if seen[helpers.EnvVary] != strings.Join(variations, ",") {
			t.Errorf("seed %d: the child sees %s=%q", seed, helpers.EnvVary, seen[helpers.EnvVary])
		}
	}
}
