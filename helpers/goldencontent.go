package helpers

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cowfs/cowfs/tape"
)

// goldenContentDir is where the versions of files a golden tape records
// are kept: beside it, <name>.content, where replay diff looks too.
func (r *recording) goldenContentDir() string {
	return strings.TrimSuffix(r.golden, ".tape") + ".content"
}

// versionOf returns the content hash a record shows (what it wrote, else
// what it read) and the path it belongs to, or "".
func versionOf(rec *tape.Record) (hash, path string) {
	switch rec.Op {
	case tape.OpCmdWrite:
		return rec.Hash, rec.Path
	case tape.OpOpen:
		path = rec.Path
		if rec.To != "" {
			path = rec.To
		}
		if rec.Hash != "" {
			return rec.Hash, path
		}
		return rec.RHash, path
	}
	return "", ""
}

// keepGoldenContent replaces the content directory of the golden tape by
// the versions of this run that tp records and that were captured, so
// that a later mismatch shows a text diff. Without any, the directory is
// removed.
func (r *recording) keepGoldenContent(tp *tape.Tape) error {
	dst := r.goldenContentDir()
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if r.contentDir == "" {
		return nil
	}
	for i := range tp.Records {
		h, _ := versionOf(&tp.Records[i])
		if h == "" {
			continue
		}
		b, err := tape.ReadContent(r.contentDir, h)
		if errors.Is(err, fs.ErrNotExist) {
			continue // too big, or not captured
		}
		if err != nil {
			return err
		}
		p := tape.ContentPath(dst, h)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// goldenContentDiffs returns a text diff of each file whose version
// differs between the golden (A) and this run (B) in d, where both were
// kept; "" when none.
func (r *recording) goldenContentDiffs(d *tape.Divergence) string {
	if r.contentDir == "" {
		return ""
	}
	var b strings.Builder
	done := map[string]bool{}
	for i := range d.A {
		ha, pa := versionOf(&d.A[i])
		if ha == "" || done[pa] {
			continue
		}
		for j := range d.B {
			hb, pb := versionOf(&d.B[j])
			if hb == "" || pb != pa || hb == ha {
				continue
			}
			want, err1 := tape.ReadContent(r.goldenContentDir(), ha)
			got, err2 := tape.ReadContent(r.contentDir, hb)
			if err1 == nil && err2 == nil {
				done[pa] = true
				fmt.Fprintf(&b, "%s", textDiff(pa, want, got))
			}
			break
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "the contents (a: golden, b: this run):\n" + b.String()
}
