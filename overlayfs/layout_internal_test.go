package overlayfs

import (
	"testing"
	"unsafe"
)

// TestLayoutWholeMoves keeps loc and node sizes multiples of 16 bytes on
// 64-bit platforms (see node): a field added or moved that breaks it
// costs Stat about 3%.
func TestLayoutWholeMoves(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is tuned for 64-bit platforms")
	}
	for name, size := range map[string]uintptr{"loc": unsafe.Sizeof(loc{}), "node": unsafe.Sizeof(node{})} {
		if size%16 != 0 {
			t.Errorf("%s is %d bytes, not a multiple of 16: reorder its fields", name, size)
		}
	}
}
