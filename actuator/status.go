package actuator

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// Event is one decision, as Observer.Decided gets it.
type Event struct {
	At     time.Time // wall clock, for people only
	Scope  string
	Holder string
	State  fence.State // the state the command asked for
	Result fence.Result
}

// Status is an actuator's recorded state together with its read-back level.
type Status struct {
	fence.Output
	PinName   string
	ActiveLow bool
	// Interlock names the actuator's interlock, if any.
	Interlock string
	// Kind is the output's kind.
	Kind Kind
	// Deadman is the scope's dead-man, if it has one with a time.
	Deadman *DeadmanStatus
	// Trip says why the scope is held at its safe state by its trip
	// input, until a reset; "" if it is not.
	Trip string
	// High is the level read back from the pin; valid if LevelErr is nil.
	High     bool
	LevelErr error
	// Drives counts the drives of the pin by this process, for boards that
	// count them (the sim board); nil otherwise.
	Drives *uint64
	// Health is a watched output's (Spec.Poll); nil for others.
	Health *Health
}

// DeadmanStatus is where a scope's dead-man stands.
type DeadmanStatus struct {
	Safe
	// Left is the time until it fires unless a command raises the fence;
	// 0 once it fired (Tripped).
	Left    time.Duration
	Tripped bool
}

// changed reports the scope's recorded states to Options.Changed. The
// scope's lock must be held.
func (b *Bank) changed(sc *guard) {
	if b.opts.Changed == nil {
		return
	}
	rec, err := b.store.ScopeRecord(sc.name)
	if err != nil {
		b.opts.Logger.Error("read scope", "scope", sc.name, "err", err)
		return
	}
	b.changedFrom(sc, rec)
}

func (b *Bank) changedFrom(sc *guard, rec fencelog.ScopeRecord) {
	if b.opts.Changed == nil {
		return
	}
	outs := make([]fence.Output, 0, len(sc.members))
	for _, o := range sc.members {
		outs = append(outs, rec.Output(o.Name))
	}
	b.opts.Changed(outs)
}

// Republish reports every scope's recorded states to Options.Changed, each
// under its scope's lock.
func (b *Bank) Republish() {
	for _, sc := range b.scopes {
		sc.lock(context.Background())
		b.changed(sc)
		sc.unlock()
	}
}

// Statuses returns every actuator's recorded state and read-back level, in
// configuration order. Each scope is read under its lock, so it never shows
// a command between its record and its drive.
func (b *Bank) Statuses() ([]Status, error) {
	out := make([]Status, 0, len(b.order))
	for _, sc := range b.scopes {
		sc.lock(context.Background())
		rec, err := b.store.ScopeRecord(sc.name)
		if err != nil {
			sc.unlock()
			return nil, err
		}
		for _, o := range sc.members {
			st := Status{Output: rec.Output(o.Name), PinName: o.PinName, ActiveLow: o.ActiveLow, Kind: o.Kind}
			st.Trip = rec.Trip()
			if sc.safe.After > 0 && !sc.alive.IsZero() {
				d := &DeadmanStatus{Safe: sc.safe, Tripped: sc.tripped}
				if !sc.tripped {
					d.Left = max(sc.safe.After-b.since(sc.alive), 0)
				}
				st.Deadman = d
			}
			if o.lock != nil {
				st.Interlock = o.lock.Name
			}
			if h, ok := b.Health(o.Name); ok {
				st.Health = &h
			}
			switch {
			case o.pin == nil:
				st.LevelErr = errors.New("not started")
			case o.Poll > 0:
				st.High, st.LevelErr = b.lastLevel(o) // never a device's timeout under the lock
			default:
				st.High, st.LevelErr = o.pin.Level()
				if c, ok := o.pin.(interface{ Drives() uint64 }); ok {
					n := c.Drives()
					st.Drives = &n
				}
			}
			out = append(out, st)
		}
		sc.unlock()
	}
	index := make(map[string]int, len(b.order))
	for i, name := range b.order {
		index[name] = i
	}
	slices.SortFunc(out, func(x, y Status) int { return index[x.Actuator] - index[y.Actuator] })
	return out, nil
}

func (b *Bank) emit(c fence.Command, scope string, res fence.Result) {
	e := Event{At: time.Now(), Scope: scope, Holder: c.Holder, State: c.State, Result: res}
	if ob := b.opts.Observer; ob != nil && ob.Decided != nil {
		ob.Decided(e)
	}
}
