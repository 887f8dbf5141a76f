package actuator

import (
	"context"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// safeState is the state sc's dead-man and trip send it to: off unless
// its Safe says on.
func (sc *guard) safeState() fence.State {
	if sc.safe.State == fence.StateOn {
		return fence.StateOn
	}
	return fence.StateOff
}

// onFor notes that o was driven to s, on for elapsed already (0: from
// now), and has max_on switch it off in time. The scope's lock must be
// held.
func (b *Bank) onFor(o *output, s fence.State, elapsed time.Duration) {
	if o.MaxOn <= 0 {
		return // nothing to count (and a pulse's end drives without the lock)
	}
	if s != fence.StateOn {
		o.onSince = time.Time{}
		if o.maxOn != nil {
			o.maxOn.Stop()
		}
		return
	}
	if !o.onSince.IsZero() {
		return // on already: it counts from the first on
	}
	elapsed = min(max(elapsed, 0), o.MaxOn)
	o.onSince = time.Now().Add(-elapsed)
	b.timer(&o.maxOn, o.MaxOn-elapsed, func() { b.maxOnFired(o) })
}

// timer (re)arms *t to run f after d, unless the bank is stopping.
func (b *Bank) timer(t **time.Timer, d time.Duration, f func()) {
	b.pulseMu.Lock()
	defer b.pulseMu.Unlock()
	if b.stopped {
		return
	}
	if *t == nil {
		*t = time.AfterFunc(d, f)
		return
	}
	(*t).Reset(d)
}

// maxOnFired switches o off if it has been on for its max_on.
func (b *Bank) maxOnFired(o *output) {
	sc := o.guard
	sc.lock(context.Background())
	defer sc.unlock()
	if o.onSince.IsZero() {
		return // switched off meanwhile
	}
	if left := o.MaxOn - time.Since(o.onSince); left > 0 {
		b.timer(&o.maxOn, left, func() { b.maxOnFired(o) })
		return
	}
	why := fmt.Sprintf("max_on: on for %v, the longest it may be", o.MaxOn)
	b.opts.Logger.Warn("output switched off: on for its max_on", "actuator", o.Name, "max_on", o.MaxOn.String())
	b.setStates(sc, []fence.Set{{Actuator: o.Name, State: fence.StateOff}}, fencelog.OutcomeMaxOn, why, false)
}

// alive notes a sign of life from sc's holder and arms its dead-man. The
// scope's lock must be held.
func (b *Bank) alive(sc *guard) {
	if sc.safe.After <= 0 {
		return
	}
	sc.alive, sc.tripped = time.Now(), false
	b.timer(&sc.deadman, sc.safe.After, func() { b.deadmanFired(sc) })
}

// deadmanFired sends sc to its safe state if no command raised its fence
// for its dead-man's time.
func (b *Bank) deadmanFired(sc *guard) {
	sc.lock(context.Background())
	defer sc.unlock()
	if left := sc.safe.After - time.Since(sc.alive); left > 0 {
		b.timer(&sc.deadman, left, func() { b.deadmanFired(sc) })
		return
	}
	sc.tripped = true
	b.goSafe(sc, fmt.Sprintf("dead-man: no command raised scope %s's fence for %v", sc.name, sc.safe.After))
}

// Disconnected sends every scope whose dead-man says on_disconnect to
// its safe state: the broker connection was lost.
func (b *Bank) Disconnected(err error) {
	for _, sc := range b.scopes {
		if !sc.safe.OnDisconnect {
			continue
		}
		sc.lock(context.Background())
		b.goSafe(sc, fmt.Sprintf("dead-man: the broker connection was lost (%v)", err))
		sc.unlock()
	}
}

// goSafe drives sc's outputs to its safe state, offs first, recording
// each that changes (the fence does not move). The scope's lock must be
// held.
func (b *Bank) goSafe(sc *guard, why string) {
	b.pulseMu.Lock()
	stopped := b.stopped
	b.pulseMu.Unlock()
	if stopped {
		return
	}
	rec, err := b.store.ScopeRecord(sc.name)
	if err != nil {
		b.opts.Logger.Error("dead-man: read scope", "scope", sc.name, "err", err)
		return
	}
	sets := sc.toSafe(rec)
	b.opts.Logger.Warn("scope goes to its safe state", "scope", sc.name, "state", sc.safeState().String(), "changed", len(sets), "why", why)
	if len(sets) > 0 {
		b.setStates(sc, sets, fencelog.OutcomeSafe, why, false)
	}
}
