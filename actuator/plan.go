package actuator

import (
	"fmt"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// planner returns the effect rule of c: a tripped scope refuses ons and
// is released by a reset once its trip input left its trip level; an
// output that requires an input's level refuses an on without it; a pulse
// output refuses a pulse while it pulses; an interlock refuses (or breaks
// before it makes) an on next to a member that is on, by its record or by
// its pin (a failed drive left the record behind, or it cannot be read).
// Inputs and pins are read here, under the scope's lock, before the
// record's transaction. The scope's lock must be held.
func (b *Bank) planner(o *output, c fence.Command) fencelog.Planner {
	var veto *fence.Refusal
	if c.State == fence.StateOn && o.Requires != nil {
		veto = b.vetoOf(o)
	}
	var stillTripped string
	if c.Reset {
		stillTripped = b.tripping(o.guard)
	}
	inner := b.stateRule(o, c)
	return func(rec fencelog.ScopeRecord) fence.Effect {
		if trip := rec.Trip(); trip != "" {
			switch {
			case c.State != fence.StateNone && !isAt(fence.Output{State: c.State, Duty: c.Duty, Frequency: c.Frequency}, o.guard.safeSet(o)) && o.Kind != KindPulse, c.Pulse > 0:
				return fence.Effect{Refusal: &fence.Refusal{Reason: fence.ReasonTrip, Error: fmt.Sprintf(
					"scope %s is held at its safe state (%s): %s; send a fence-only command with reset once that is cleared", o.Scope, o.guard.safeText(o), trip)}}
			case c.Reset && stillTripped != "":
				return fence.Effect{Refusal: &fence.Refusal{Reason: fence.ReasonTrip, Error: fmt.Sprintf(
					"scope %s cannot be reset: %s", o.Scope, stillTripped)}}
			case c.Reset:
				e := fence.Plain(c)
				e.Reset = true
				return e
			}
		}
		if veto != nil {
			return fence.Effect{Refusal: veto}
		}
		if inner != nil {
			return inner(rec)
		}
		return fence.Plain(c)
	}
}

// stateRule is the effect rule of a pulse or an interlocked output's on;
// nil for anything else. The scope's lock must be held.
func (b *Bank) stateRule(o *output, c fence.Command) fencelog.Planner {
	if o.Kind == KindSetpoint && o.MaxRate > 0 && c.Setpoint {
		// On the monotonic clock, from the set-point's last drive by this
		// process (at the latest, its start): a wall clock that jumps (a
		// Pi without a real-time clock, set by NTP after boot) must not
		// let a step through.
		elapsed := b.clock.Now().Sub(o.setAt)
		return func(rec fencelog.ScopeRecord) fence.Effect {
			return fence.RampEffect(c, rec.Output(o.Name), elapsed, o.MaxRate)
		}
	}
	if o.Kind == KindPulse && c.Pulse > 0 {
		// A pulse output is on only while it pulses.
		return func(rec fencelog.ScopeRecord) fence.Effect {
			return fence.PulseEffect(c, rec.Output(o.Name).State == fence.StateOn)
		}
	}
	if o.lock == nil || c.State != fence.StateOn {
		return nil
	}
	pinOn := map[string]bool{}
	for _, m := range o.lock.Members {
		if m == o.Name {
			continue
		}
		mo := b.outs[m]
		high, err := mo.pin.Level()
		pinOn[m] = err != nil || high == mo.level(fence.StateOn)
	}
	g := &o.lock.Interlock
	return func(rec fencelog.ScopeRecord) fence.Effect {
		return g.Effect(c, func(a string) bool { return rec.Output(a).State == fence.StateOn || pinOn[a] })
	}
}
