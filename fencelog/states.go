package fencelog

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
)

// StateChange is one state that SetStates records.
type StateChange struct {
	Scope, Actuator string
	State           fence.State
	// Holder is recorded as the state's holder ("boot" for a boot policy).
	Holder string
	// Why goes into the audit entry's error field, and into the output's
	// record (fence.Output.Why), for people.
	Why string
	// Outcome is the audit entry's outcome: OutcomeBoot if empty.
	Outcome fence.Outcome
}

// SetStates records states without touching any fence, in one fsynced
// transaction; it is how the boot rule records what it decided.
func (l *Store) SetStates(changes []StateChange) error { return l.setStates(changes, "", "") }

// SetTrip records that scope is held at its safe state by a trip, why,
// together with the states the trip sets, in one fsynced transaction; the
// fence is not touched. A command with fence.Effect.Reset releases it.
func (l *Store) SetTrip(scope, why string, changes []StateChange) error {
	return l.setStates(changes, scope, why)
}

func (l *Store) setStates(changes []StateChange, tripScope, trip string) error {
	if err := l.writable(); err != nil {
		return err
	}
	if len(changes) == 0 && trip == "" {
		return nil
	}
	pending := l.takePending()
	err := l.update(func(tx *bolt.Tx) error {
		now := l.opts.Now().UTC()
		recs := map[string]record{}
		var audit []Entry
		if trip != "" {
			rec, err := l.txScope(tx, tripScope)
			if err != nil {
				return err
			}
			rec.Trip = trip
			recs[tripScope] = rec
		}
		for _, ch := range changes {
			rec, ok := recs[ch.Scope]
			if !ok {
				var err error
				if rec, err = l.txScope(tx, ch.Scope); err != nil {
					return err
				}
			}
			if rec.Outputs == nil {
				rec.Outputs = make(map[string]outputRecord)
			}
			rec.Outputs[ch.Actuator] = outputRecord{State: ch.State, Holder: ch.Holder, ChangedAt: now, Why: ch.Why, Pulse: rec.Outputs[ch.Actuator].Pulse}
			recs[ch.Scope] = rec
			outcome := ch.Outcome
			if outcome == "" {
				outcome = OutcomeBoot
			}
			audit = append(audit, Entry{At: now, Scope: ch.Scope, Actuator: ch.Actuator, Holder: ch.Holder,
				State: ch.State, Outcome: outcome, Fence: rec.Fence, Error: ch.Why})
		}
		for scope, rec := range recs {
			if err := l.writeScope(tx, scope, rec); err != nil {
				return err
			}
		}
		return l.appendAudit(tx, append(pending, audit...))
	})
	if err != nil {
		return l.fail("set states", err)
	}
	return nil
}

// EndPulse records, in one fsynced transaction, that the pulse p of
// actuator in scope ended, status saying how (fence.PulseDone, or
// fence.PulseInterrupted): the output at rest (off), the pulse's status
// in the output's record and in the scope's window of recent commands (a
// redelivery is answered with it), and an audit entry with why. The fence
// is not touched. If the output's record is not p running (it ended
// already), nothing is written and ok is false.
func (l *Store) EndPulse(scope, actuator string, p fence.Pulse, status, why string) (_ ScopeRecord, ok bool, _ error) {
	if err := l.writable(); err != nil {
		return ScopeRecord{}, false, err
	}
	var out ScopeRecord
	pending := l.takePending()
	err := l.update(func(tx *bolt.Tx) error {
		ok = false
		rec, err := l.txScope(tx, scope)
		if err != nil {
			return err
		}
		o, has := rec.Outputs[actuator]
		if !has || o.Pulse == nil || o.Pulse.Status != fence.PulseRunning || o.Pulse.Fence != p.Fence || o.Pulse.ID != p.ID {
			out = ScopeRecord{scope, rec.Fence, rec}
			return l.appendAudit(tx, pending)
		}
		now := l.opts.Now().UTC()
		rec.Outputs = maps.Clone(rec.Outputs)
		ended := *o.Pulse
		ended.Status = status
		rec.Outputs[actuator] = outputRecord{State: fence.StateOff, Holder: o.Holder, ChangedAt: now, Pulse: &ended}
		rec.Recent = slices.Clone(rec.Recent)
		for i, a := range rec.Recent {
			if a.Actuator == actuator && a.Fence == p.Fence && a.ID == p.ID && a.Pulse > 0 {
				rec.Recent[i].PulseStatus = status
			}
		}
		if err := l.writeScope(tx, scope, rec); err != nil {
			return err
		}
		ok = true
		out = ScopeRecord{scope, rec.Fence, rec}
		return l.appendAudit(tx, append(pending, Entry{At: now, Scope: scope, Actuator: actuator, ID: p.ID, Holder: o.Holder,
			Command: p.Fence, State: fence.StateOff, Outcome: OutcomePulse, Fence: rec.Fence, Error: why}))
	})
	if err != nil {
		return ScopeRecord{}, false, l.fail("end pulse", err)
	}
	return out, ok, nil
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
// in one fsynced write; else it changes nothing. It returns the record.
func (l *Store) RecordInput(name string, high bool) (InputRecord, error) {
	if err := l.writable(); err != nil {
		return InputRecord{}, err
	}
	var cur InputRecord
	found := false
	if err := l.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketInputs); b != nil {
			if v := b.Get([]byte(name)); v != nil {
				found = true
				return json.Unmarshal(v, &cur)
			}
		}
		return nil
	}); err != nil {
		return InputRecord{}, fmt.Errorf("fencelog: read input %s: %w", name, err)
	}
	if found && cur.High == high {
		return cur, nil
	}
	next := InputRecord{High: high, Seq: cur.Seq + 1, ChangedAt: l.opts.Now().UTC()}
	v, err := json.Marshal(next)
	if err != nil {
		return InputRecord{}, err
	}
	pending := l.takePending()
	err = l.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketInputs)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(name), v); err != nil {
			return err
		}
		return l.appendAudit(tx, pending)
	})
	if err != nil {
		return InputRecord{}, l.fail("record input", err)
	}
	return next, nil
}
