package fencelog

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
)

// StateChange is one state that the gateway sets by a rule of its own,
// not as an admitted command's effect. Which rule, and why, are the
// caller's: the store records them as they are.
type StateChange struct {
	Scope, Actuator string
	State           fence.State
	Duty            fence.Duty // a set-point output's set-point (State is on above 0)
	Frequency       uint32     // a PWM output's, set by a command; 0: its configured one
	// Holder is recorded as the state's holder.
	Holder string
	// Outcome (required) and Why are the change's audit entry's: which
	// rule set the state, and why, for people.
	Outcome fence.Outcome
	Why     string
	// ID and Command name the command whose action the change completes
	// (a pulse's end), if any, for the audit entry. A change without a
	// Command also records Why on the output (fence.Output.Why: why the
	// gateway set a state that no command asked for).
	ID      string
	Command fence.Fence
}

// Trip sets or releases a scope's trip: the scope held at its safe state
// until a command with fence.Effect.Reset releases it.
type Trip struct {
	Scope string
	// Why says why the scope is held; "" releases it.
	Why string
}

// PulseEnd is the end of a pulse that an admitted command started.
type PulseEnd struct {
	Scope, Actuator string
	// Pulse is the pulse as it was recorded running: its ID and Fence name
	// it.
	Pulse fence.Pulse
	// Status is how it ended (fence.PulseDone, fence.PulseInterrupted).
	Status string
}

// Changes are states the gateway sets itself, written at once.
type Changes struct {
	// States are recorded in their order, each with its audit entry.
	States []StateChange
	// Trip, if not nil, sets or releases a scope's trip.
	Trip *Trip
	// Pulse, if not nil, makes the write conditional: it is made only if
	// the output's record is that pulse, running (its end was not recorded
	// already). The pulse is then recorded with its Status, on the output
	// and in the window entry of the command that asked for it, so that a
	// redelivery is answered with it.
	Pulse *PulseEnd
}

// check says what is wrong with w, before anything is written.
func (w Changes) check() error {
	for _, ch := range w.States {
		if ch.Outcome == "" {
			return fmt.Errorf("fencelog: write: the state change of %s in scope %s has no outcome: say which rule set it", ch.Actuator, ch.Scope)
		}
	}
	if p := w.Pulse; p != nil && (p.Status == "" || p.Status == fence.PulseRunning) {
		return fmt.Errorf("fencelog: write: the end of %s's pulse %s has status %q: say how it ended", p.Actuator, p.Pulse.Fence, p.Status)
	}
	return nil
}

// Write records w in one fsynced transaction before it returns, without
// touching any fence. ok is false if w.Pulse was not running: then
// nothing of w is written. An error means nothing of w was recorded.
func (l *Store) Write(w Changes) (ok bool, err error) {
	if err := l.writable(); err != nil {
		return false, err
	}
	if err := w.check(); err != nil {
		return false, err
	}
	if len(w.States) == 0 && w.Trip == nil && w.Pulse == nil {
		return true, nil
	}
	pending := l.takePending()
	err = l.update(func(tx *bolt.Tx) error {
		ok = false // fn may run twice: set, never accumulate
		now := l.opts.Now().UTC()
		recs := map[string]record{}
		scope := func(name string) (record, error) {
			if rec, ok := recs[name]; ok {
				return rec, nil
			}
			return l.txScope(tx, name)
		}
		if p := w.Pulse; p != nil {
			rec, err := scope(p.Scope)
			if err != nil {
				return err
			}
			if o := rec.Outputs[p.Actuator]; !runs(o.Pulse, p.Pulse) {
				return l.appendAudit(tx, pending)
			}
		}
		audit := slices.Clone(pending)
		for _, ch := range w.States {
			rec, err := scope(ch.Scope)
			if err != nil {
				return err
			}
			if rec.Outputs == nil {
				rec.Outputs = make(map[string]outputRecord)
			}
			o := outputRecord{State: ch.State, Duty: ch.Duty, Frequency: ch.Frequency, Holder: ch.Holder, ChangedAt: now, Pulse: rec.Outputs[ch.Actuator].Pulse}
			if ch.Command == (fence.Fence{}) {
				o.Why = ch.Why
			}
			rec.Outputs[ch.Actuator] = o
			recs[ch.Scope] = rec
			audit = append(audit, Entry{At: now, Scope: ch.Scope, Actuator: ch.Actuator, ID: ch.ID, Holder: ch.Holder,
				Command: ch.Command, State: ch.State, Duty: ch.Duty, Outcome: ch.Outcome, Fence: rec.Fence, Why: ch.Why})
		}
		if t := w.Trip; t != nil {
			rec, err := scope(t.Scope)
			if err != nil {
				return err
			}
			rec.Trip = t.Why
			recs[t.Scope] = rec
		}
		if p := w.Pulse; p != nil {
			rec, err := scope(p.Scope)
			if err != nil {
				return err
			}
			endPulse(&rec, p)
			recs[p.Scope] = rec
		}
		for name, rec := range recs {
			if err := l.writeScope(tx, name, rec); err != nil {
				return err
			}
		}
		ok = true
		return l.appendAudit(tx, audit)
	})
	if err != nil {
		return false, l.fail("write", err)
	}
	return ok, nil
}

// runs reports whether rec is the pulse p, running.
func runs(rec *fence.Pulse, p fence.Pulse) bool {
	return rec != nil && rec.Status == fence.PulseRunning && rec.Fence == p.Fence && rec.ID == p.ID
}

// endPulse records in rec, whose Outputs the caller may change, the end
// of a pulse: on its output and in the window entry of its command.
func endPulse(rec *record, p *PulseEnd) {
	o := rec.Outputs[p.Actuator]
	ended := *o.Pulse
	ended.Status = p.Status
	o.Pulse = &ended
	rec.Outputs[p.Actuator] = o
	rec.Recent = slices.Clone(rec.Recent) // shared with the cache
	for i, a := range rec.Recent {
		if a.Actuator == p.Actuator && a.Fence == p.Pulse.Fence && a.ID == p.Pulse.ID && a.Pulse > 0 {
			rec.Recent[i].PulseStatus = p.Status
		}
	}
}

// InputRecord is a digital input's last recorded level and how many
// times it changed.
type InputRecord struct {
	High      bool      `json:"high"`
	Seq       uint64    `json:"seq"`
	ChangedAt time.Time `json:"changed_at"`
}

// RecordInput records that input name is at level high: if that is not
// its recorded level (or it has none), with its change count one higher,
// in one fsynced transaction, which decides it; else it changes nothing.
// It returns the record.
func (l *Store) RecordInput(name string, high bool) (InputRecord, error) {
	if err := l.writable(); err != nil {
		return InputRecord{}, err
	}
	// Fast path: a level that is recorded already needs no write.
	var cur InputRecord
	found := false
	if err := l.db.View(func(tx *bolt.Tx) error {
		var err error
		cur, found, err = readInput(tx.Bucket(bucketInputs), name)
		return err
	}); err != nil {
		return InputRecord{}, fmt.Errorf("fencelog: read input %s: %w", name, err)
	}
	if found && cur.High == high {
		return cur, nil
	}
	if testHookInputBetween != nil {
		testHookInputBetween()
	}
	pending := l.takePending()
	var out InputRecord
	err := l.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketInputs)
		if err != nil {
			return err
		}
		// Decide again: another write may have recorded a level since.
		cur, found, err := readInput(b, name)
		if err != nil {
			return err
		}
		out = cur
		if !found || cur.High != high {
			out = InputRecord{High: high, Seq: cur.Seq + 1, ChangedAt: l.opts.Now().UTC()}
			v, err := json.Marshal(out)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(name), v); err != nil {
				return err
			}
		}
		return l.appendAudit(tx, pending)
	})
	if err != nil {
		return InputRecord{}, l.fail("record input", err)
	}
	return out, nil
}

// testHookInputBetween, if set (by tests), runs in RecordInput between
// the read-only look and the write transaction, where another write may
// record the input.
var testHookInputBetween func()

// readInput reads input name's record from b (nil: no input recorded
// yet).
func readInput(b *bolt.Bucket, name string) (rec InputRecord, found bool, err error) {
	if b == nil {
		return rec, false, nil
	}
	v := b.Get([]byte(name))
	if v == nil {
		return rec, false, nil
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return rec, true, fmt.Errorf("corrupt record for input %q: %w", name, err)
	}
	return rec, true, nil
}
