package tape

import (
	"os"
	"time"
)

// versionKey identifies one content version of a file on a real file
// system: while the device, inode, size, mtime and ctime are unchanged, so
// are the bytes (the kernel sets ctime on every change and no call sets it
// back), and the recorder reuses the hash it computed for them instead of
// hashing them again. File systems that report no inode (in-memory ones,
// overlay layer entries) give no key and are always hashed.
type versionKey struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // ns since the epoch
}

// racy reports whether a change made after taken could leave k unchanged:
// a timestamp too close to the clock of the moment the key was taken could
// be given again to a write made in the same clock tick. File systems that
// store whole seconds (no nanoseconds seen) get a two-second window, others
// a tenth of a second, far above the kernel's timestamp tick.
func (k versionKey) racy(taken time.Time) bool {
	window := 100 * time.Millisecond
	if k.mtime%1e9 == 0 || k.ctime%1e9 == 0 {
		window = 2 * time.Second
	}
	limit := taken.Add(-window).UnixNano()
	return k.mtime >= limit || k.ctime >= limit
}

// maxVersions bounds the hashes a recorder keeps; when full it starts over.
const maxVersions = 1 << 16

// versionCache maps content versions to their hashes, for one recorder.
// The Recorder's mu guards it: a handle's Stat looks its version up under
// the lock that writes the fstat record, one lock where two were taken.
type versionCache struct {
	m map[versionKey]string
}

func (c *versionCache) get(k versionKey) (string, bool) {
	h, ok := c.m[k]
	return h, ok
}

func (c *versionCache) put(k versionKey, hash string) {
	if c.m == nil || len(c.m) >= maxVersions {
		c.m = make(map[versionKey]string)
	}
	c.m[k] = hash
}

// versionState is a read-only handle's content version: the key taken
// before its first byte was read, and the hash found for it.
type versionState struct {
	tried  bool // a key was looked for; it is not looked for again
	ok     bool // key holds a key
	key    versionKey
	taken  int64  // the clock (ns since the epoch) when key was taken, for a version not found
	cached string // hash reused from the cache: the stream is not fed
	epoch  int64  // the Recorder's writes counter read before the Stat that gave key
}

// take looks up fi's version (fi from a Stat of the handle before any byte
// was read) with lookup, which reads the cache under the Recorder's mu.
// epoch is the Recorder's writes counter read before that Stat.
func (v *versionState) take(fi os.FileInfo, epoch int64, lookup func(versionKey) string) {
	v.tried, v.epoch = true, epoch
	k, ok := keyOf(fi)
	if !ok {
		return
	}
	v.ok, v.key = true, k
	v.cached = lookup(k)
	if v.cached == "" {
		// Only keep, after hashing, reads the clock: a version whose hash
		// was found needs no racy check.
		v.taken = time.Now().UnixNano()
	}
}

// keep stores hash for the version when the handle's file still has the
// key (fi from a Stat after the whole version was hashed) and the key is
// not racy. The caller holds the Recorder's mu.
func (v *versionState) keep(c *versionCache, fi os.FileInfo, hash string, size int64) {
	if !v.ok || v.cached != "" || size != v.key.size || v.key.racy(time.Unix(0, v.taken)) {
		return
	}
	if k, ok := keyOf(fi); ok && k == v.key {
		c.put(k, hash)
	}
}
