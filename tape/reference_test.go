package tape

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"
)

// TestOnlineCheck: a recorder given a reference tape calls back once, at
// the first divergent call, with both records and that call's stack.
func TestOnlineCheck(t *testing.T) {
	ref := runProgram(t, afero.NewOsFs(), progOpts{sortListing: true})
	for _, mode := range []Mode{ModePath, ModeGlobal} {
		t.Run(mode.String(), func(t *testing.T) {
			root := t.TempDir()
			fixture(t, root)
			var got []*Divergence
			opts := []Option{WithReference(ref, func(d *Divergence) { got = append(got, d) }), WithReferenceMode(mode)}
			tapeOf(t, afero.NewOsFs(), root, func(w afero.Fs) {
				program(t, w, root, progOpts{sortListing: true, extraStat: true})
			}, opts...)
			if len(got) != 1 {
				t.Fatalf("%d callbacks, want 1", len(got))
			}
			d := got[0]
			if len(d.B) != 1 || d.B[0].Op != OpStat || d.B[0].Path != "in/item-3.txt.bak" {
				t.Fatalf("divergent record: %v", d)
			}
			if mode == ModePath && (len(d.A) != 0 || d.Path != "in/item-3.txt.bak") {
				t.Errorf("path mode: the reference has no record for that path, got %v", d)
			}
			if mode == ModeGlobal && (len(d.A) != 1 || d.A[0].Path != "in/item-3.txt") {
				t.Errorf("global mode: want the reference's record in that place, got %v", d)
			}
			// The stack names the program's call, not only the recorder.
			if !strings.Contains(d.Stack, "tape.program(") || !strings.Contains(d.Stack, "(*Fs).Stat") {
				t.Errorf("stack does not show the offending call:\n%s", d.Stack)
			}
			if !strings.Contains(d.String(), "stack of the offending call") {
				t.Errorf("report: %s", d.String())
			}
		})
	}

	t.Run("identical run: no callback", func(t *testing.T) {
		root := t.TempDir()
		fixture(t, root)
		called := false
		tapeOf(t, afero.NewOsFs(), root, func(w afero.Fs) {
			program(t, w, root, progOpts{sortListing: true})
		}, WithReference(ref, func(*Divergence) { called = true }))
		if called {
			t.Error("callback on an identical run")
		}
	})

	t.Run("missing records reported at Close", func(t *testing.T) {
		root := t.TempDir()
		fixture(t, root)
		var got []*Divergence
		tapeOf(t, afero.NewOsFs(), root, func(w afero.Fs) {
			afero.ReadFile(w, filepath.Join(root, "config.txt"))
		}, WithReference(ref, func(d *Divergence) { got = append(got, d) }))
		if len(got) != 1 || len(got[0].A) != 1 || len(got[0].B) != 0 || got[0].A[0].Path != "in" {
			t.Fatalf("want the reference's listing of in reported missing, got %v", got)
		}
	})

	for _, mode := range []Mode{ModeSet, ModeFinal} {
		t.Run(mode.String()+" at Close", func(t *testing.T) {
			root := t.TempDir()
			fixture(t, root)
			var got []*Divergence
			tapeOf(t, afero.NewOsFs(), root, func(w afero.Fs) {
				program(t, w, root, progOpts{sortListing: true})
				afero.WriteFile(w, filepath.Join(root, "out/extra"), []byte("x"), 0o644)
			}, WithReference(ref, func(d *Divergence) { got = append(got, d) }), WithReferenceMode(mode))
			if len(got) != 1 || got[0].Mode != mode {
				t.Fatalf("got %v", got)
			}
			if mode == ModeFinal && got[0].Path != "out/extra" {
				t.Errorf("final: %v", got[0])
			}
		})
	}
}
