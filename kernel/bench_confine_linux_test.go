package kernel

import (
	"context"
	"os/exec"
	"testing"

	"github.com/cowfs/cowfs/overlayfs"
)

// BenchmarkRunConfinement measures what Landlock confinement adds to a
// Run of /bin/true, against the same Run unconfined and a plain exec, in
// one run:
//
//	go test -run '^$' -bench RunConfinement -count 6 ./kernel | benchstat -col /impl -
func BenchmarkRunConfinement(b *testing.B) {
	if _, err := landlockABI(runConfig{}); err != nil {
		b.Skip("Landlock is not available: ", err)
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true(1)")
	}
	root := b.TempDir()
	writeTree(b, root)
	for _, mode := range []struct {
		name string
		opts []RunOption
	}{{"overlay", nil}, {"copy", []RunOption{WithCopyFallback()}}} {
		if mode.name == "overlay" && canMount(b) != "" {
			continue
		}
		for _, impl := range []struct {
			name string
			opts []RunOption
		}{{"confined", nil}, {"unconfined", []RunOption{Unconfined()}}} {
			b.Run("mode="+mode.name+"/impl="+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				f, err := overlayfs.New(root)
				if err != nil {
					b.Fatal(err)
				}
				opts := append(append([]RunOption{}, mode.opts...), impl.opts...)
				for b.Loop() {
					if err := Run(context.Background(), f, exec.Command(truePath), opts...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	b.Run("mode=plain/impl=exec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := exec.Command(truePath).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
