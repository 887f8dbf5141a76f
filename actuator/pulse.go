package actuator

import (
	"context"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// pulseEnds has the pulse p of o, just started, end after its width;
// false if the bank is stopping, and it does not. The scope's lock must be
// held.
func (b *Bank) pulseEnds(o *output, p fence.Pulse) bool {
	b.pulseMu.Lock()
	defer b.pulseMu.Unlock()
	if b.stopped {
		return false
	}
	if b.pulses == nil {
		b.pulses = make(map[string]*time.Timer)
	}
	b.pulseWG.Add(1) // done by the end, or by Stop if it stops the timer first
	b.pulses[o.Name] = time.AfterFunc(p.Width, func() {
		defer b.pulseWG.Done()
		// Back to rest at the width, whoever holds the scope's lock (a
		// command waiting out a dead time, a slow commit): the pin of a
		// pulse output moves only for its pulses, and a pulse that
		// arrives before the end is recorded is refused busy, so the
		// drive needs no lock; the record of the end, next, does.
		why := fmt.Sprintf("done: on for %v, then back at rest", p.Width) + b.toRest(o)
		o.guard.lock(context.Background())
		defer o.guard.unlock()
		b.pulseMu.Lock()
		delete(b.pulses, o.Name)
		b.pulseMu.Unlock()
		if rec, ok := b.recordPulseEnd(o, p, fence.PulseDone, why); ok {
			b.changedFrom(o.guard, rec)
		}
	})
	return true
}

// endPulse drives o, whose pulse p runs, back to rest and records how the
// pulse ended; ok is false if the record was not p running. The scope's
// lock must be held.
func (b *Bank) endPulse(o *output, p fence.Pulse, status, why string) (fencelog.ScopeRecord, bool) {
	return b.recordPulseEnd(o, p, status, why+b.toRest(o))
}

// pulseStopped is why a pulse the stopping gateway cut short ended.
const pulseStopped = "interrupted: the gateway stopped while it ran"

// toRest drives the pulse output o back to rest; it returns "", or what
// to add to the pulse's end if the drive failed.
func (b *Bank) toRest(o *output) string {
	err := b.drive(o, fence.StateOff)
	if err == nil {
		return ""
	}
	b.opts.Logger.Error("drive failed at the end of a pulse", "actuator", o.Name, "pin", o.PinName, "err", err)
	return fmt.Sprintf("; but the output could not be driven off: %v", err)
}

// recordPulseEnd records how the pulse p of o ended; ok is false if the
// record was not p running. The scope's lock must be held.
func (b *Bank) recordPulseEnd(o *output, p fence.Pulse, status, why string) (fencelog.ScopeRecord, bool) {
	rec, ok, err := b.store.EndPulse(o.Scope, o.Name, p, status, why)
	if err != nil {
		b.opts.Logger.Error("record the end of a pulse", "actuator", o.Name, "err", err)
		return rec, false
	}
	return rec, ok
}
