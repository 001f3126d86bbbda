package longtest_test

import (
	"testing"

	"github.com/cowfs/cowfs/internal/longtest"
)

func TestN(t *testing.T) {
	for _, c := range []struct {
		env  string
		want int
	}{{"", 1}, {"0", 1}, {"false", 1}, {"1", 9}, {"yes", 9}} {
		t.Setenv(longtest.Env, c.env)
		if got := longtest.N(1, 9); got != c.want {
			t.Errorf("COWFS_LONG=%q: N(1, 9) = %d, want %d", c.env, got, c.want)
		}
	}
}
