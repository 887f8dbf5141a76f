package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/gofrs/flock"
)

// The simulator's directory lock: sim.lock is locked (flock on Unix,
// LockFileEx on Windows) for as long as a simulator uses the directory;
// the kernel releases it when the process ends, however it ends. The owner
// file next to it names the simulator that holds the lock, for the message
// to the next one; the lock, not that file, decides.
const (
	lockName  = "sim.lock"
	ownerName = "sim.owner.json"
)

// Owner is what the owner file records about the simulator that holds a
// directory's lock.
type Owner struct {
	PID int `json:"pid"`
	// Dashboard is the owner's dashboard address (host:port); empty until
	// it listens.
	Dashboard string `json:"dashboard,omitempty"`
}

// ErrDirInUse is returned (wrapped in a *DirInUseError) by Start when
// another simulator uses the directory.
var ErrDirInUse = errors.New("sim: another simulator uses the directory")

// DirInUseError is returned by Start when another simulator holds the
// directory's lock. Nothing in the directory was written.
type DirInUseError struct {
	Dir string
	// Owner is what the other simulator recorded; zero if it recorded
	// nothing yet (it is starting) or the record cannot be read.
	Owner Owner
}

func (e *DirInUseError) Error() string {
	return "sim: " + e.Describe()
}

// Describe says which simulator uses the directory, without the package
// prefix: "another simulator uses DIR (pid N, dashboard http://ADDR)".
func (e *DirInUseError) Describe() string {
	switch {
	case e.Owner.PID == 0:
		return fmt.Sprintf("another simulator uses %s (it has not recorded its pid and dashboard yet: it is starting)", e.Dir)
	case e.Owner.Dashboard == "":
		return fmt.Sprintf("another simulator uses %s (pid %d, starting: no dashboard yet)", e.Dir, e.Owner.PID)
	}
	return fmt.Sprintf("another simulator uses %s (pid %d, dashboard http://%s)", e.Dir, e.Owner.PID, e.Owner.Dashboard)
}

func (e *DirInUseError) Unwrap() error { return ErrDirInUse }

// Dashboard returns the dashboard address (host:port) that the simulator
// using dir recorded, "" if none did: none runs there, or it is starting.
func Dashboard(dir string) string { return readOwner(dir).Dashboard }

// readOwner returns what the owner file in dir records; the zero Owner if
// there is none, or it is torn or foreign.
func readOwner(dir string) Owner {
	var o Owner
	if b, err := os.ReadFile(filepath.Join(dir, ownerName)); err == nil {
		json.Unmarshal(b, &o)
	}
	return o
}

// dirLock is a held directory lock.
type dirLock struct {
	dir    string
	lock   *flock.Flock
	unlock func() // releases it, once
}

// lockDir takes dir's lock without waiting, creating dir and the lock file
// if they do not exist. If another simulator holds it, it returns a
// *DirInUseError and has written nothing.
func lockDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	l := flock.New(filepath.Join(dir, lockName), flock.SetPermissions(0o640))
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("sim: lock %s: %w", l.Path(), err)
	}
	if !ok {
		return nil, &DirInUseError{Dir: dir, Owner: readOwner(dir)}
	}
	d := &dirLock{dir: dir, lock: l}
	d.unlock = sync.OnceFunc(func() {
		// The owner file first: the next owner writes its own only once it
		// has the lock.
		os.Remove(filepath.Join(dir, ownerName))
		l.Unlock()
	})
	if err := d.record(Owner{PID: os.Getpid()}); err != nil {
		d.unlock()
		return nil, err
	}
	return d, nil
}

// record writes the owner file (a new file renamed into place, so that a
// reader never sees half of it).
func (d *dirLock) record(o Owner) error {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	path := filepath.Join(d.dir, ownerName)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o640); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}
