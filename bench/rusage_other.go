//go:build !unix

package bench

import "os"

// exitPeakRSS is unknown here (Windows reports no peak memory in the exit
// status): the report says n/a.
func exitPeakRSS(*os.ProcessState) (int64, bool) { return 0, false }
