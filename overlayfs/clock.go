package overlayfs

import (
	"sync/atomic"
	"time"
)

// clockRebase is how long the clock runs on the monotonic clock alone
// before it reads the wall clock again.
const clockRebase = time.Millisecond

// clock gives the times of changes (mtimes): the wall clock as time.Now
// gives it, at less than half the cost. time.Now reads two clocks, the
// wall clock and the monotonic one; clock reads the monotonic one only and
// adds what it says has passed to a wall-clock reading taken at most
// clockRebase ago, then read again. So a time is the wall clock's to
// within what the wall clock was stepped by in that last millisecond,
// finer than the kernel's own file times (taken from a clock that moves
// once a tick, 1 to 10 ms). Its times have no monotonic reading, as a
// FileInfo's from os. Safe for concurrent use.
type clock struct {
	base atomic.Pointer[clockBase]
}

// clockBase is a time.Now reading, with its wall clock in nanoseconds.
type clockBase struct {
	t    time.Time // with its monotonic reading
	wall int64     // t.UnixNano()
}

func (c *clock) now() time.Time {
	if b := c.base.Load(); b != nil {
		if d := time.Since(b.t); d >= 0 && d < clockRebase {
			return time.Unix(0, b.wall+int64(d))
		}
	}
	t := time.Now()
	c.base.Store(&clockBase{t: t, wall: t.UnixNano()})
	return time.Unix(0, t.UnixNano())
}
