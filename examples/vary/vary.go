// Package vary is the example module of `replay check -vary`: each
// function writes files through an afero.Fs and depends, by mistake, on
// one thing a test must not depend on. Every test of it passes and is
// identical run after run on one machine; `replay check -vary` perturbs
// what differs between machines and names what each one depends on.
package vary

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/afero"
)

// Index writes dir/out/index.txt: the names of dir/items in the order
// the directory listing gives them. os promises no order (overlayfs
// sorts): hazard "listing".
func Index(fsys afero.Fs, dir string) error {
	f, err := fsys.Open(filepath.Join(dir, "items"))
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	return write(fsys, filepath.Join(dir, "out", "index.txt"), strings.Join(names, "\n")+"\n")
}

// Checksum writes dir/out/sum.txt: the SHA-256 of dir/data/log.txt, read
// with one Read call, as if Read filled the buffer: hazard "shortread"
// (io.ReadFull or io.ReadAll is the fix).
func Checksum(fsys afero.Fs, dir string) error {
	f, err := fsys.Open(filepath.Join(dir, "data", "log.txt"))
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, err := f.Read(buf)
	if err != nil {
		return err
	}
	return write(fsys, filepath.Join(dir, "out", "sum.txt"), fmt.Sprintf("%d %x\n", n, sha256.Sum256(buf[:n])))
}

// Config writes dir/config.txt with the absolute path of the static
// files: output that depends on where the tree is checked out, hazard
// "rootpath".
func Config(fsys afero.Fs, dir string) error {
	return write(fsys, filepath.Join(dir, "config.txt"), "static = "+filepath.Join(dir, "static")+"\n")
}

// Stamp writes dir/out/stamp.txt with a fixed instant in the local time
// zone: hazard "tz" (format in UTC, or a zone of your choosing).
func Stamp(fsys afero.Fs, dir string) error {
	t := time.Unix(1700000000, 0)
	return write(fsys, filepath.Join(dir, "out", "stamp.txt"), t.Format("2006-01-02 15:04 MST")+"\n")
}

// Receipt writes dir/out/receipt.txt in the language of the locale
// (LC_ALL, else LANG): hazard "locale".
func Receipt(fsys afero.Fs, dir string) error {
	loc := os.Getenv("LC_ALL")
	if loc == "" {
		loc = os.Getenv("LANG")
	}
	total := map[string]string{"de": "Summe", "fr": "Total TTC", "tr": "Toplam", "ja": "合計"}
	lang, _, _ := strings.Cut(loc, "_")
	word, ok := total[lang]
	if !ok {
		word = "Total"
	}
	return write(fsys, filepath.Join(dir, "out", "receipt.txt"), word+": 12\n")
}

// Bundle writes dir/out/data.bin and a manifest of the modes of what is
// in dir/out, as archivers do: the mode of a new file is what the umask
// leaves of 0666, hazard "umask" (Chmod to the mode you mean).
func Bundle(fsys afero.Fs, dir string) error {
	out := filepath.Join(dir, "out")
	if err := fsys.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := afero.WriteFile(fsys, filepath.Join(out, "data.bin"), []byte("data"), 0o666); err != nil {
		return err
	}
	fi, err := fsys.Stat(filepath.Join(out, "data.bin"))
	if err != nil {
		return err
	}
	return write(fsys, filepath.Join(dir, "out", "MANIFEST"), fmt.Sprintf("%v data.bin\n", fi.Mode()))
}

var (
	registryMu sync.Mutex
	registry   []string // package state that outlives a test
)

// Register adds a plugin to the package's registry, as init-time plugin
// registries do; tests register the plugins they need.
func Register(name string) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if !slices.Contains(registry, name) {
		registry = append(registry, name)
	}
}

// Plugins writes dir/out/plugins.txt: the registered plugins, sorted.
// What is registered depends on which tests ran before: hazard "order".
func Plugins(fsys afero.Fs, dir string) error {
	registryMu.Lock()
	names := slices.Sorted(slices.Values(registry))
	registryMu.Unlock()
	return write(fsys, filepath.Join(dir, "out", "plugins.txt"), strings.Join(names, "\n")+"\n")
}

// Shard splits the items into one file per processor, as a parallel
// exporter does: how many files there are depends on GOMAXPROCS, hazard
// "procs" (fix the number of shards).
func Shard(fsys afero.Fs, dir string, items []string) error {
	n := runtime.GOMAXPROCS(0)
	shards := make([][]string, n)
	for i, it := range items {
		shards[i%n] = append(shards[i%n], it)
	}
	for i, s := range shards {
		if err := write(fsys, filepath.Join(dir, "out", fmt.Sprintf("shard-%d.txt", i)), strings.Join(s, "\n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// Profile writes dir/out/profile.txt with the user's cache directory:
// hazard "home".
func Profile(fsys afero.Fs, dir string) error {
	home, err := os.UserHomeDir()
	if err != nil {
		return err
	}
	return write(fsys, filepath.Join(dir, "out", "profile.txt"), "cache = "+filepath.Join(home, ".cache", "shop")+"\n")
}

// Clean does all of the above right: listing sorted, whole reads, paths
// relative to the root, UTC, no locale, explicit modes, a fixed number of
// shards. It is identical under every variation.
func Clean(fsys afero.Fs, dir string) error {
	f, err := fsys.Open(filepath.Join(dir, "items"))
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		data, err := afero.ReadFile(fsys, filepath.Join(dir, "items", n))
		if err != nil {
			return err
		}
		b.Write(data)
	}
	log, err := afero.ReadFile(fsys, filepath.Join(dir, "data", "log.txt"))
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "log %x\n", sha256.Sum256(log))
	fmt.Fprintf(&b, "at %s\n", time.Unix(1700000000, 0).UTC().Format(time.RFC3339))
	out := filepath.Join(dir, "out")
	if err := write(fsys, filepath.Join(out, "clean.txt"), b.String()); err != nil {
		return err
	}
	if err := fsys.Chmod(filepath.Join(out, "clean.txt"), 0o644); err != nil {
		return err
	}
	fi, err := fsys.Stat(filepath.Join(out, "clean.txt"))
	if err != nil {
		return err
	}
	if fi.Mode() != fs.FileMode(0o644) {
		return fmt.Errorf("clean.txt has mode %v after Chmod 0644", fi.Mode())
	}
	return nil
}

func write(fsys afero.Fs, name, s string) error {
	if err := fsys.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return afero.WriteFile(fsys, name, []byte(s), 0o644)
}
