//go:build failpoints

package main

import (
	"os"
	"strconv"
	"sync/atomic"

	"github.com/fencegate/fencegate/fence"
)

// failpoint, in builds with the failpoints tag (crash tests only), kills the
// process with SIGKILL after the Nth durable commit and before its drive,
// where N is FENCEGATE_CRASH_AFTER_COMMIT. This is the window between the
// fsync and the output that reconciliation at the next start must close.
func failpoint() func(fence.Command) {
	n, err := strconv.ParseInt(os.Getenv("FENCEGATE_CRASH_AFTER_COMMIT"), 10, 64)
	if err != nil || n <= 0 {
		return nil
	}
	var count atomic.Int64
	return func(fence.Command) {
		if count.Add(1) == n {
			killSelf() // never drives
		}
	}
}
