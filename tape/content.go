package tape

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ContentPath returns where a content sidecar directory keeps the bytes
// whose hash is hash: dir/<first two hex digits>/<hash>.
func ContentPath(dir, hash string) string {
	if len(hash) < 2 {
		return filepath.Join(dir, hash)
	}
	return filepath.Join(dir, hash[:2], hash)
}

// ReadContent returns the captured bytes of hash from a sidecar directory,
// with an error wrapping fs.ErrNotExist when they were not captured.
func ReadContent(dir, hash string) ([]byte, error) {
	return os.ReadFile(ContentPath(dir, hash))
}

type contentStore struct {
	dir string
	max int64

	mu   sync.Mutex
	seen map[string]bool
	err  error
}

// capture stores b under hash once. b is nil when the content was not
// captured (capture off or too large).
func (r *Recorder) capture(hash string, b []byte) {
	c := r.content
	if c == nil || b == nil || hash == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[hash] {
		return
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[hash] = true
	p := ContentPath(c.dir, hash)
	if _, err := os.Stat(p); err == nil {
		return
	}
	err := os.MkdirAll(filepath.Dir(p), 0o755)
	if err == nil {
		// Temp file + rename: a reader never sees half a content file.
		var tmp *os.File
		tmp, err = os.CreateTemp(filepath.Dir(p), ".tmp-*")
		if err == nil {
			_, err = tmp.Write(b)
			err = errors.Join(err, tmp.Close())
			if err == nil {
				err = os.Rename(tmp.Name(), p)
			}
			if err != nil {
				os.Remove(tmp.Name())
			}
		}
	}
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("tape: content capture: %w", err)
	}
}

func (c *contentStore) error() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
