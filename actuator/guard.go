package actuator

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// guard is one fence scope as the bank keeps it: the scope's lock, the
// actuators it orders, and the rules that act on all of them (the
// dead-man, a trip). A scope is a name; its record is the store's; its
// guard is this.
type guard struct {
	name    string
	rules   fence.Rules
	sem     chan struct{} // the scope's lock; a Handle waiting for it gives up when its ctx ends
	members []*output     // in configuration order
	// waiting, if set, is called when a caller finds the lock taken,
	// before it waits: the tests' hook to force the interleavings a
	// broken lock would allow (see export_test.go). Set before use.
	waiting func()
	// moved is when the lock's holder last made progress (took the lock,
	// or went on to its batch's next command), as 1 + ns since epoch on
	// clock (the bank's); 0 while the lock is free. See Bank.Stalled.
	moved atomic.Int64
	clock Clock
	epoch time.Time

	// The dead-man, guarded by the lock: safe is the rule (After 0:
	// none), alive when a command last raised the fence (or Start ran),
	// deadman the timer that checks it.
	safe    Safe
	alive   time.Time
	deadman Timer
	tripped bool // the dead-man fired, and no command raised the fence since

	trip *InputLevel // the input level that trips the scope; nil if none
}

func (s *guard) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err // a free lock must not win over an ended context
	}
	select {
	case s.sem <- struct{}{}:
		s.progress()
		return nil
	default:
	}
	if s.waiting != nil {
		s.waiting()
	}
	select {
	case s.sem <- struct{}{}:
		s.progress()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *guard) unlock() {
	s.moved.Store(0)
	<-s.sem
}

// progress notes that the lock's holder moved on. The lock must be held.
func (s *guard) progress() { s.moved.Store(int64(s.clock.Now().Sub(s.epoch)) + 1) }

type output struct {
	Spec
	guard *guard
	lock  *interlock // nil outside any interlock
	start start      // the boot rule's decision
	pin   Pin        // set by Start
	dev   Setpoint   // a set-point output's device; set by AttachSetpoints
	// onSince is when the output was driven on (monotonic; zero while
	// off), and maxOn the timer that switches it off after MaxOn; both
	// guarded by the scope's lock.
	onSince time.Time
	maxOn   Timer
	// setAt is when a set-point output was last driven (monotonic; the
	// bank's clock), from which its max_rate counts; guarded by the
	// scope's lock.
	setAt  time.Time
	health health // a watched output's (Spec.Poll); see watch.go
}

func (o *output) level(s fence.State) bool { return (s == fence.StateOn) != o.ActiveLow }

// interlock is an Interlock and the time its last member went off.
type interlock struct {
	fence.Interlock
	lastOff time.Time // guarded by the scope's lock
}

// drive drives o to s, waiting out o's interlock's dead time before an on
// and noting when an interlocked output went off. The scope's lock must be
// held.
func (b *Bank) drive(o *output, s fence.State) error {
	if s == fence.StateOn && o.lock != nil {
		// Until the dead time has passed on the monotonic clock, however
		// early a sleep returns (a timer on an emulated or loaded core
		// may wake a little before its time).
		until := o.lock.lastOff.Add(o.lock.DeadTime)
		for wait := until.Sub(b.clock.Now()); wait > 0; wait = until.Sub(b.clock.Now()) {
			b.clock.Sleep(wait)
		}
	}
	start := time.Now()
	if o.Kind == KindSetpoint {
		o.setAt = b.clock.Now()
	}
	err := o.pin.Out(o.level(s))
	if ob := b.opts.Observer; ob != nil && ob.Driven != nil {
		ob.Driven(o.Name, time.Since(start), err)
	}
	if err == nil {
		b.onFor(o, s, 0)
		b.markUp(o)
	} else {
		b.markDown(o, err)
	}
	if s == fence.StateOff && o.lock != nil {
		// Even a failed off may have moved the line: the dead time counts
		// from now either way.
		o.lock.lastOff = b.clock.Now()
	}
	return err
}

// Stalled names the scope whose lock has been held for longer than limit
// without progress (a drive that never returns, a commit that never
// does, a deadlock), and for how long; "" if none. A batch makes progress
// with each command an interlock takes one at a time, so only one
// command's work counts: its record, its dead time, its drives.
func (b *Bank) Stalled(limit time.Duration) (scope string, held time.Duration) {
	for _, sc := range b.scopes {
		now := b.clock.Now().Sub(sc.epoch)
		if moved := sc.moved.Load(); moved != 0 {
			if d := now - time.Duration(moved-1); d > limit && d > held {
				scope, held = sc.name, d
			}
		}
	}
	return scope, held
}

// toSafe lists what sending sc to its safe state changes, by rec: every
// output not at it (a pulse output rests off anyway).
func (sc *guard) toSafe(rec fencelog.ScopeRecord) []fence.Set {
	var sets []fence.Set
	for _, o := range sc.members {
		if set := sc.safeSet(o); o.Kind != KindPulse && !isAt(rec.Output(o.Name), set) {
			sets = append(sets, set)
		}
	}
	return sets
}

// changesOf are sets as the store records them, set by the gateway's rule
// outcome for why, the outcome as their holder; with trip, sc is recorded
// tripped too, why.
func changesOf(sc *guard, sets []fence.Set, outcome fence.Outcome, why string, trip bool) fencelog.Changes {
	var w fencelog.Changes
	for _, set := range sets {
		w.States = append(w.States, fencelog.StateChange{Scope: sc.name, Actuator: set.Actuator, State: set.State, Duty: set.Duty, Frequency: set.Frequency,
			Holder: string(outcome), Outcome: outcome, Why: why})
	}
	if trip {
		w.Trip = &fencelog.Trip{Scope: sc.name, Why: why}
	}
	return w
}

// setStates records sets (without touching the fence; with trip, the
// scope tripped too, why), then drives them, and publishes the scope's
// states. The scope's lock must be held.
func (b *Bank) setStates(sc *guard, sets []fence.Set, outcome fence.Outcome, why string, trip bool) {
	if _, err := b.store.Write(changesOf(sc, sets, outcome, why, trip)); err != nil {
		b.opts.Logger.Error("record states", "scope", sc.name, "why", why, "err", err)
		return
	}
	b.driveSets(sets, why)
	b.changed(sc)
}

// driveSets drives sets, offs first. The scope's lock must be held.
func (b *Bank) driveSets(sets []fence.Set, why string) {
	for _, pass := range []fence.State{fence.StateOff, fence.StateOn} {
		for _, set := range sets {
			if set.State != pass {
				continue
			}
			if err := b.drive(b.outs[set.Actuator], set.State); err != nil {
				b.opts.Logger.Error("drive failed", "actuator", set.Actuator, "state", set.State.String(), "why", why, "err", err)
			}
		}
	}
}
