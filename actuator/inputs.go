package actuator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// TripAtStart trips the scopes whose trip input is at its trip level now
// (level reads an input; one that cannot be read trips its scope too):
// recorded tripped, their outputs at the safe state, before Lines decides
// the level at which each line is taken over, so that no output of a
// tripped scope is on for a moment at start. Call it after New and before
// Lines, with the inputs read before the outputs are taken over.
func (b *Bank) TripAtStart(level func(input string) (bool, error)) error {
	for _, sc := range b.scopes {
		if sc.trip == nil {
			continue
		}
		high, err := level(sc.trip.Input)
		why := "trip: " + sc.trip.String()
		switch {
		case err != nil:
			why = fmt.Sprintf("trip input %s cannot be read: %v", sc.trip.Input, err)
		case high != sc.trip.High:
			continue
		}
		rec, err := b.store.ScopeRecord(sc.name)
		if err != nil {
			return fmt.Errorf("actuator: %w", err)
		}
		if rec.Trip() != "" {
			continue // the boot rule holds it already
		}
		for _, o := range sc.members {
			if o.Kind != KindPulse {
				o.start = start{state: sc.safeSet(o).State}
			}
		}
		b.opts.Logger.Warn("scope tripped at start: its outputs are taken over at the safe state; a reset command releases it once the input is cleared", "scope", sc.name, "why", why)
		if _, err := b.store.Write(changesOf(sc, sc.toSafe(rec), fence.OutcomeTrip, why, true)); err != nil {
			return fmt.Errorf("actuator: %w", err)
		}
	}
	return nil
}

// inputNames returns the inputs the bank's rules read.
func (b *Bank) inputNames() []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, name := range b.order {
		if r := b.outs[name].Requires; r != nil {
			add(r.Input)
		}
	}
	for _, sc := range b.scopes {
		if sc.trip != nil {
			add(sc.trip.Input)
		}
	}
	return names
}

// AttachInputs gets every input the bank's rules read (input returns it
// by name). Call it before Start.
func (b *Bank) AttachInputs(input func(name string) (Input, error)) error {
	b.inputs = map[string]Input{}
	for _, name := range b.inputNames() {
		in, err := input(name)
		if err != nil {
			return fmt.Errorf("actuator: input %s: %w", name, err)
		}
		b.inputs[name] = in
	}
	return nil
}

// level reads input name; an input that cannot be read is an error.
func (b *Bank) level(name string) (bool, error) {
	in := b.inputs[name]
	if in == nil {
		return false, errors.New("not attached")
	}
	return in.Level()
}

// vetoOf returns the refusal of an on for o, whose Requires is set, if
// its input is not at the level (or cannot be read); nil if it is.
func (b *Bank) vetoOf(o *output) *fence.Refusal {
	r := o.Requires
	high, err := b.level(r.Input)
	switch {
	case err != nil:
		return &fence.Refusal{Reason: fence.ReasonInterlock, Error: fmt.Sprintf("interlock: %s cannot be read (%v); %s needs %s to come on", r.Input, err, o.Name, r)}
	case high != r.High:
		return &fence.Refusal{Reason: fence.ReasonInterlock, Error: fmt.Sprintf("interlock: %s; %s needs %s to come on", InputLevel{r.Input, high}, o.Name, r)}
	}
	return nil
}

// tripping says why sc's trip holds it now ("" if its input is not at
// its trip level, or sc has no trip): an input that cannot be read holds
// it too.
func (b *Bank) tripping(sc *guard) string {
	if sc.trip == nil {
		return ""
	}
	high, err := b.level(sc.trip.Input)
	switch {
	case err != nil:
		return fmt.Sprintf("trip input %s cannot be read: %v", sc.trip.Input, err)
	case high == sc.trip.High:
		return "trip: " + sc.trip.String()
	}
	return ""
}

// InputChanged tells the bank that input name is now at level high: a
// scope it trips goes to its safe state and is held there; then the
// level is recorded (its change count one higher if it changed), and its
// record returned. The board calls it (through the service) for every
// change, and for every input's level at start.
//
// The trip is the event's: a contact that is back by the time the scope's
// lock is free (a command held it through a dead time) still trips it.
// Events before Start attached the pins are left to Start, which reads
// the trip inputs itself; their levels are recorded all the same.
func (b *Bank) InputChanged(name string, high bool) (fencelog.InputRecord, error) {
	if b.attached.Load() {
		for _, sc := range b.scopes {
			if sc.trip != nil && sc.trip.Input == name && sc.trip.High == high {
				sc.lock(context.Background())
				b.tripScope(sc, "trip: "+sc.trip.String())
				sc.unlock()
			}
		}
	}
	return b.store.RecordInput(name, high)
}

// tripScope records sc tripped (why; "" reads the trip input now and
// does nothing if it is not at its trip level), with its outputs at the
// safe state, drives them, and publishes the scope, unless it is tripped
// already. The scope's lock must be held.
func (b *Bank) tripScope(sc *guard, why string) {
	if why == "" {
		why = b.tripping(sc)
	}
	if why == "" {
		return
	}
	rec, err := b.store.ScopeRecord(sc.name)
	if err != nil {
		b.opts.Logger.Error("trip: read scope", "scope", sc.name, "err", err)
		return
	}
	if rec.Trip() != "" {
		return
	}
	b.opts.Logger.Warn("scope tripped to its safe state; a reset command releases it once the input is cleared", "scope", sc.name, "why", why)
	b.setStates(sc, sc.toSafe(rec), fence.OutcomeTrip, why, true)
}
