//go:build !unix

package testenv

import "sync"

var (
	heldMu sync.Mutex
	held   = map[string]bool{}
)

// locksAcrossProcesses: a lock that lockPort takes holds within this
// process only.
const locksAcrossProcesses = false

// lockPort reserves path within this process only: there is no flock here.
func lockPort(path string) (unlock func(), ok bool, err error) {
	heldMu.Lock()
	defer heldMu.Unlock()
	if held[path] {
		return nil, false, nil
	}
	held[path] = true
	return func() { heldMu.Lock(); delete(held, path); heldMu.Unlock() }, true, nil
}

var dirMu sync.Mutex

// lockDir holds dir within this process only: there is no flock here.
func lockDir(dir string) (unlock func(), err error) {
	dirMu.Lock()
	return dirMu.Unlock, nil
}
