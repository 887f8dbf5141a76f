//go:build unix

package bench

import (
	"os"
	"runtime"
	"syscall"
)

// exitPeakRSS returns the peak resident memory of an ended process in
// bytes, from its rusage: ru_maxrss is in bytes on macOS and in KiB on the
// other Unix systems.
func exitPeakRSS(ps *os.ProcessState) (int64, bool) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil || ru.Maxrss <= 0 {
		return 0, false
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss), true
	}
	return int64(ru.Maxrss) << 10, true
}
