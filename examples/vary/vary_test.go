package vary

import (
	"testing"

	"github.com/cowfs/cowfs/helpers"
)

// Each test passes, and records the same tape, in every plain run:
// replay check -n 5 finds them identical. replay check -vary makes each
// hazard test diverge and names the variation it depends on.

func fixture(t *testing.T) *helpers.Env {
	t.Helper()
	Register(t.Name())
	return helpers.NewTxtar(t, "testdata/shop.txtar")
}

func TestListing(t *testing.T) {
	env := fixture(t)
	if err := Index(env.Fs(), env.Root()); err != nil {
		t.Fatal(err)
	}
}

func TestFullRead(t *testing.T) {
	env := fixture(t)
	if err := Checksum(env.Fs(), env.Root()); err != nil {
		t.Fatal(err)
	}
}

func TestAbsRoot(t *testing.T) {
	Register(t.Name())
	// A real directory of the module: the same absolute path every run.
	env := helpers.New(t, "testdata/site")
	if err := Config(env.Fs(), env.Root()); err != nil {
		t.Fatal(err)
	}
}

func TestTZ(t *testing.T) {
	env := fixture(t)
	if err := Stamp(env.Fs(), env.Root()); err != nil {
		t.Fatal(err)
	}
}

func TestLocale(t *testing.T) {
	env := fixture(t)
	if err := Receipt(env.Fs(), env.Root()); err != nil {
		t.Fatal(err)
	}
}

func TestUmask(t *testing.T) {
	env := fixture(t)
	if err := Bundle(env.Fs(), env.Root()); err != nil {
		t.Fatal(err)
	}
}

func TestOrder(t *testing.T) {
	env := fixture(t)
	if err := Plugins(env.Fs(), env.Root()); err != nil {
		t.Fatal(err)
	}
}

func TestProcs(t *testing.T) {
	env := fixture(t)
	if err := Shard(env.Fs(), env.Root(), []string{"apple", "pear", "fig", "kiwi", "plum", "plum"}); err != nil {
		t.Fatal(err)
	}
}

func TestHome(t *testing.T) {
	env := fixture(t)
	if err := Profile(env.Fs(), env.Root()); err != nil {
		t.Fatal(err)
	}
}

// TestClean is identical under every variation.
func TestClean(t *testing.T) {
	env := helpers.NewTxtar(t, "testdata/shop.txtar")
	if err := Clean(env.Fs(), env.Root()); err != nil {
		t.Fatal(err)
	}
	env.Changed("A out", "A out/clean.txt")
}
