//go:build unix

package testenv

import (
	"errors"
	"os"
	"syscall"
)

// locksAcrossProcesses: a lock that lockPort takes holds against every
// process.
const locksAcrossProcesses = true

// lockPort takes an exclusive flock on path without waiting. ok is false
// if another open file (in any process) holds it. The file is kept: removing
// it would let two processes lock two different files of the same name.
func lockPort(path string) (unlock func(), ok bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return func() { f.Close() }, true, nil // closing the last descriptor releases the lock
}

// lockDir takes an exclusive flock on the directory dir, waiting for it.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
