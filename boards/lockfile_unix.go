//go:build unix

package boards

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFile waits for an exclusive lock (flock) on the file at path,
// creating it if need be; unlock releases it. The kernel releases it too
// when the process ends, however it ends.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, err
	}
	for {
		if err = unix.Flock(int(f.Fd()), unix.LOCK_EX); err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
