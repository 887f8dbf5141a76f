package actuator

import "time"

// Clock is the time the bank's timing rules read: the dead-man, max_on,
// pulse widths, an interlock's dead time and Stalled's progress. Tests
// give a manual clock that they advance; the zero Options use the real
// one. No admission reads it.
type Clock interface {
	// Now returns the current time; the bank measures every duration as
	// a difference of two Nows (with the real clock, on its monotonic
	// reading, which no step of the wall clock moves).
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
	// Sleep waits for d. It may return early: the dead time's wait reads
	// Now again and sleeps again until the time has passed.
	Sleep(d time.Duration)
}

// Timer is a timer of a Clock, as *time.Timer is of the real one.
type Timer interface {
	// Stop keeps the timer's func from running; false if it already ran
	// or was stopped.
	Stop() bool
	// Reset has the func run d from now instead.
	Reset(d time.Duration) bool
}

// realClock is the real time.
type realClock struct{}

func (realClock) Now() time.Time        { return time.Now() }
func (realClock) Sleep(d time.Duration) { time.Sleep(d) }
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc(d, f)
}

// since is how long ago t was on b's clock.
func (b *Bank) since(t time.Time) time.Duration { return b.clock.Now().Sub(t) }
