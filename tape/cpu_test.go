//go:build unix

package tape

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user+system) the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds a cpu-ns/op metric: on a machine shared with other work,
// wall time per op swings with the load; the CPU time this process spent
// swings much less, so ratios are read from it.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
