package overlayfs

import (
	"reflect"
	"testing"
)

// TestFaultFileForwardsEveryMethod guards faultFile's hand-written list:
// a method added to the overlay's handles must be added to it too, or
// callers reaching it by a type assertion would not see it when faults
// are on.
func TestFaultFileForwardsEveryMethod(t *testing.T) {
	ff := reflect.TypeFor[*faultFile]()
	for _, h := range []reflect.Type{reflect.TypeFor[*file](), reflect.TypeFor[*dir]()} {
		for m := range h.Methods() {
			if _, ok := ff.MethodByName(m.Name); !ok {
				t.Errorf("%v has %s; faultFile does not forward it", h, m.Name)
			}
		}
	}
}
