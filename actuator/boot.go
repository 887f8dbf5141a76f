package actuator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// start is the boot rule's decision for one actuator.
type start struct {
	state fence.State // the recorded state it is driven to
	// deferred: an interlocked output recorded on starts off and is
	// switched on after its interlock's dead time.
	deferred bool
}

// Line is where a board takes over one actuator's line: at the level the
// boot rule decided.
type Line struct {
	Actuator string
	Pin      string
	High     bool
}

// boot binds the actuators to their scopes and applies the boot rule (see New).
func (b *Bank) boot() error {
	scopes := make(map[string]string, len(b.outs))
	for name, o := range b.outs {
		scopes[name] = o.Scope
	}
	moved, err := b.store.Bind(scopes)
	if err != nil {
		return fmt.Errorf("actuator: %w", err)
	}
	for _, name := range moved {
		b.opts.Logger.Warn("actuator moved to another scope; its old fence came along", "actuator", name, "scope", b.outs[name].Scope)
	}
	var changes []fencelog.StateChange
	set := func(o *output, s fence.Set, why string) {
		o.start.state = s.State
		changes = append(changes, fencelog.StateChange{Scope: o.Scope, Actuator: o.Name, State: s.State, Duty: s.Duty, Frequency: s.Frequency, Holder: "boot", Outcome: fence.OutcomeBoot, Why: why})
	}
	for _, sc := range b.scopes {
		rec, err := b.store.ScopeRecord(sc.name)
		if err != nil {
			return fmt.Errorf("actuator: %w", err)
		}
		for _, o := range sc.members {
			if p := rec.Output(o.Name).Pulse; p != nil && p.Status == fence.PulseRunning {
				// A crash (or a stop) while it ran: a pulse is never resumed.
				why := fmt.Sprintf("interrupted: the gateway stopped while this pulse of %v ran; it is not resumed", p.Width)
				if _, err := b.store.Write(endOf(o, *p, rec.Output(o.Name).Holder, fence.PulseInterrupted, why)); err != nil {
					return fmt.Errorf("actuator: %w", err)
				}
				if rec, err = b.store.ScopeRecord(sc.name); err != nil {
					return fmt.Errorf("actuator: %w", err)
				}
				b.opts.Logger.Warn("pulse interrupted by a stop of the gateway; the output rests off", "actuator", o.Name, "fence", p.Fence.String(), "width", p.Width.String())
			}
			o.start.state = rec.Output(o.Name).State
			if s, why := sc.bootState(o, rec); !isAt(rec.Output(o.Name), s) {
				set(o, s, why)
			}
		}
		for _, o := range sc.members {
			if o.lock == nil || o != b.outs[o.lock.Members[0]] {
				continue
			}
			var ons []string
			for _, m := range o.lock.Members {
				if b.outs[m].start.state == fence.StateOn {
					ons = append(ons, m)
				}
			}
			if len(ons) > 1 {
				why := fmt.Sprintf("interlock %s: %s were all on; at most one may be: all switched off", o.lock.Name, strings.Join(ons, ", "))
				b.opts.Logger.Warn(why)
				for _, m := range ons {
					set(b.outs[m], fence.Set{Actuator: m, State: fence.StateOff}, why)
				}
			}
		}
	}
	if _, err := b.store.Write(fencelog.Changes{States: changes}); err != nil {
		return fmt.Errorf("actuator: %w", err)
	}
	for _, o := range b.outs {
		o.start.deferred = o.lock != nil && o.lock.DeadTime > 0 && o.start.state == fence.StateOn
	}
	return nil
}

// Lines returns, in configuration order, the level at which a board must
// take over each actuator's line: the boot rule's decision (an interlocked
// output that will come on after its dead time is taken over off).
func (b *Bank) Lines() []Line {
	lines := make([]Line, 0, len(b.order))
	for _, name := range b.order {
		o := b.outs[name]
		lines = append(lines, Line{Actuator: name, Pin: o.PinName, High: o.level(o.initial())})
	}
	return lines
}

func (o *output) initial() fence.State {
	if o.start.deferred {
		return fence.StateOff
	}
	return o.start.state
}

// Start attaches every actuator's pin (pin returns it by its Spec.PinName)
// and drives the outputs as the boot rule decided: each scope's outputs to
// their initial levels, offs before ons; then, once their interlock's dead
// time has passed, the interlocked outputs that were taken over off. Call
// it once, before handling commands. It stops at the first failure.
func (b *Bank) Start(pin func(name string) (Pin, error)) error {
	b.startMu.Lock()
	defer b.startMu.Unlock()
	if b.started {
		return errors.New("actuator: Start called twice")
	}
	for _, name := range b.order {
		o := b.outs[name]
		var p Pin
		var err error
		if o.Kind == KindSetpoint {
			p, err = b.pinOf(o)
		} else {
			p, err = pin(o.PinName)
		}
		if err != nil {
			return fmt.Errorf("actuator: %s: %w", name, err)
		}
		o.pin = p
	}
	b.attached.Store(true)
	ctx := context.Background()
	var deferred []*output
	for _, sc := range b.scopes {
		sc.lock(ctx)
		err := b.startScope(sc)
		sc.unlock()
		if err != nil {
			return err
		}
		for _, o := range sc.members {
			if o.start.deferred {
				deferred = append(deferred, o)
			}
		}
	}
	for _, o := range deferred {
		o.guard.lock(ctx)
		err := b.drive(o, fence.StateOn)
		if err == nil {
			b.changed(o.guard)
		}
		o.guard.unlock()
		if err != nil && o.Poll == 0 {
			return fmt.Errorf("actuator: %s: drive on after the dead time of interlock %s: %w", o.Name, o.lock.Name, err)
		}
	}
	for _, sc := range b.scopes {
		sc.lock(ctx)
		b.alive(sc)         // a holder has the dead-man's time from the start
		b.tripScope(sc, "") // an input at its trip level since TripAtStart
		sc.unlock()
	}
	b.startWatching()
	b.started = true
	return nil
}

func (b *Bank) startScope(sc *guard) error {
	now := b.clock.Now()
	rec, err := b.store.ScopeRecord(sc.name)
	if err != nil {
		return fmt.Errorf("actuator: %w", err)
	}
	initial := func(o *output) fence.State {
		if rec.Trip() != "" && o.Kind != KindPulse {
			return sc.safeSet(o).State // tripped since the boot rule decided
		}
		return o.initial()
	}
	for _, pass := range []fence.State{fence.StateOff, fence.StateOn} {
		for _, o := range sc.members {
			if initial(o) != pass {
				continue
			}
			o.setAt = now // a set-point's max_rate counts from its start at the latest
			if err := o.pin.Out(o.level(pass)); err != nil {
				if o.Poll > 0 {
					b.markDown(o, err) // retried by its watch
					continue
				}
				return fmt.Errorf("actuator: %s: drive %s at start: %w", o.Name, pass, err)
			}
			// max_on counts from when the record says it went on, as far
			// as the wall clock can tell (never from the future).
			b.onFor(o, pass, b.since(rec.Output(o.Name).ChangedAt))
			b.readWatched(o)
		}
	}
	for _, o := range sc.members {
		if o.lock != nil {
			o.lock.lastOff = now // at start every member may just have gone off
		}
	}
	b.changed(sc)
	return nil
}
