//go:build linux

package overlayfs

import "testing"

// TestMountTable reads mount tables in the format proc(5) documents for
// /proc/pid/mountinfo, its own example line among them.
func TestMountTable(t *testing.T) {
	table := []byte("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" +
		"36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n" +
		"361 22 8:1 /home/u/my\\040dir /mnt/with\\040space\\134x rw shared:1 - ext4 /dev/sda1 rw\n")
	for _, c := range []struct {
		mnt         uint64
		root, point string
		ok          bool
	}{
		{22, "/", "/", true},
		{36, "/mnt1", "/mnt/parent", true},
		{361, "/home/u/my dir", `/mnt/with space\x`, true},
		{3, "", "", false}, // no such mount (and not a prefix of 36 or 361)
	} {
		root, point, ok := mountOf(table, c.mnt)
		if root != c.root || point != c.point || ok != c.ok {
			t.Errorf("mountOf(%d) = %q, %q, %v; want %q, %q, %v", c.mnt, root, point, ok, c.root, c.point, c.ok)
		}
	}
	for _, c := range []struct {
		p    string
		mnt  uint64
		want string
		ok   bool
	}{
		{"/mnt/parent", 36, "/mnt1", true},
		{"/mnt/parent/a/b", 36, "/mnt1/a/b", true},
		{"/mnt/parentx", 36, "", false}, // not under the mount point
		{`/mnt/with space\x/r`, 361, "/home/u/my dir/r", true},
		{"/etc", 22, "/etc", true},
	} {
		got, ok := fsPath(table, c.p, c.mnt)
		if got != c.want || ok != c.ok {
			t.Errorf("fsPath(%s, %d) = %q, %v; want %q, %v", c.p, c.mnt, got, ok, c.want, c.ok)
		}
	}
	// /mnt/with space\x/r is /home/u/my dir/r on the file system of
	// mount 22, whose root /home/u is there at /home/u.
	if rel, ok := aliasRel(table, `/mnt/with space\x/r`, 361, "/home/u", 22); rel != "my dir/r" || !ok {
		t.Errorf("aliasRel = %q, %v; want %q, true", rel, ok, "my dir/r")
	}
	if _, ok := aliasRel(table, `/mnt/with space\x`, 361, "/home/u/my dir/r", 22); ok {
		t.Error("aliasRel: a directory above the root is in it")
	}
}
