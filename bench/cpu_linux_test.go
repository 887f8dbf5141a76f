package bench

import (
	"syscall"
	"testing"
	"time"
)

// cpuUsed is this process's CPU time, as getrusage counts it.
func cpuUsed(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
