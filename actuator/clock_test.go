package actuator_test

import (
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
)

// manualClock is an actuator.Clock that moves only when a test advances
// it: the dead-man, max_on, pulse widths and dead times are then tested
// without waiting for them, and exactly.
type manualClock struct {
	mu       sync.Mutex
	now      time.Time
	timers   []*manualTimer
	sleepers []chan struct{} // closed when the clock reaches their deadline
	wakeAt   []time.Time
	asleep   chan struct{} // one value per Sleep that began
	// auto makes a Sleep advance the clock itself, for tests in which
	// the sleeper is the only thing that moves (a dead time, no timers).
	auto bool
}

// newManualClock starts at the real time: the store's records carry
// real times (ChangedAt), which the boot rule compares with Now.
func newManualClock() *manualClock {
	return &manualClock{now: time.Now(), asleep: make(chan struct{}, 100)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d on: the timers due run (each in a goroutine
// of its own, as time.AfterFunc's), and the sleeps due return. The
// channel it returns is closed once those timers' functions returned; it
// is nil if none was due.
func (c *manualClock) Advance(d time.Duration) <-chan struct{} {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	for _, t := range c.timers {
		if t.armed && !t.at.After(c.now) {
			t.armed = false
			due = append(due, t.f)
		}
	}
	for i := 0; i < len(c.sleepers); i++ {
		if !c.wakeAt[i].After(c.now) {
			close(c.sleepers[i])
			c.sleepers = append(c.sleepers[:i], c.sleepers[i+1:]...)
			c.wakeAt = append(c.wakeAt[:i], c.wakeAt[i+1:]...)
			i--
		}
	}
	c.mu.Unlock()
	if len(due) == 0 {
		return nil
	}
	var wg sync.WaitGroup
	for _, f := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	ran := make(chan struct{})
	go func() {
		wg.Wait()
		close(ran)
	}()
	return ran
}

// Sleep returns once a test advanced the clock by d; with auto, it
// advances it.
func (c *manualClock) Sleep(d time.Duration) {
	if c.auto {
		c.Advance(d)
		return
	}
	c.mu.Lock()
	wake := make(chan struct{})
	c.sleepers = append(c.sleepers, wake)
	c.wakeAt = append(c.wakeAt, c.now.Add(d))
	c.mu.Unlock()
	c.asleep <- struct{}{}
	<-wake
}

// WaitSleep waits until a goroutine sleeps on the clock (a dead time).
func (c *manualClock) WaitSleep(t *testing.T) {
	t.Helper()
	select {
	case <-c.asleep:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing sleeps on the manual clock")
	}
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) actuator.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), f: f, armed: true}
	c.timers = append(c.timers, t)
	return t
}

type manualTimer struct {
	c     *manualClock
	at    time.Time
	f     func()
	armed bool
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed = false
	return was
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed, t.at = true, t.c.now.Add(d)
	return was
}
