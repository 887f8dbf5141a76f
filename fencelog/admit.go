package fencelog

import (
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
)

// Admission is what Admit decided and the scope's record afterwards.
type Admission struct {
	fence.Decision
	// Effect is, for an applied command, what it changed: the states
	// recorded (in the order to drive them), or the refusal that changed
	// nothing but the fence.
	Effect fence.Effect
	// Output is the commanded actuator's recorded state after the
	// decision; its Fence is the scope's fence.
	Output fence.Output
	// Record is the scope's record after the decision.
	Record ScopeRecord
}

// Planner decides the effect of an admitted command from its scope's
// record. Admit calls it inside the transaction that records the effect,
// so the record it sees is the one the effect is recorded over. It must
// be a pure function of its argument and what it captured.
type Planner func(rec ScopeRecord) fence.Effect

// rules returns r with its floor raised to the store's.
func (l *Store) rules(r fence.Rules) fence.Rules {
	r.Floor = max(r.Floor, l.birth.Floor)
	return r
}

// testHookAdmitBetween, if set (by tests), runs in Admit between the
// read-only decision and the write transaction, where another command may
// change the fence.
var testHookAdmitBetween func()

// Admit decides command c for scope under rules (whose floor is raised to
// the store's) and, if its pair passes the fence, records the new fence, the effect plan decides (nil means fence.Plain:
// c sets its own actuator) and the audit entry in one fsynced transaction
// before returning. A refused effect records only the fence and the
// refusal, so that a redelivery is answered the same.
//
// A non-nil error means nothing was recorded and nothing may be driven; the
// caller answers failed. Stale and duplicate decisions write nothing
// synchronously.
func (l *Store) Admit(scope string, c fence.Command, rules fence.Rules, plan Planner) (Admission, error) {
	adms, err := l.AdmitBatch(scope, rules, []Request{{c, plan}})
	if err != nil {
		return Admission{}, err
	}
	return adms[0], nil
}

// Request is one command for AdmitBatch, with its effect rule (nil:
// fence.Plain, the command sets its own actuator).
type Request struct {
	Command fence.Command
	Plan    Planner
}

// AdmitBatch decides the commands of reqs for scope in their order, each
// as Admit would after the ones before it, and returns an admission for
// each: a command is decided against the record the commands before it
// left, so a redelivery in the same batch is a duplicate and a command
// behind a higher one is stale. Those that pass are all recorded, with
// every command's audit entry, in one fsynced transaction before it
// returns; a batch in which none passes writes nothing synchronously. A
// non-nil error means nothing of the batch was recorded and nothing may be
// driven.
func (l *Store) AdmitBatch(scope string, rules fence.Rules, reqs []Request) ([]Admission, error) {
	if err := l.writable(); err != nil {
		return nil, err
	}
	rules = l.rules(rules)
	// Fast path: read-only decisions answer stale and duplicate commands
	// without a write. They can never admit: only the transaction below
	// can. Until one passes, the record does not change, so each of these
	// is the decision in sequence too.
	rec, err := l.committed(scope)
	if err != nil {
		return nil, err
	}
	first := make([]fence.Decision, len(reqs))
	passes := false
	for i, r := range reqs {
		first[i] = fence.Decide(rec.Fence, rec.Recent, r.Command, rules)
		passes = passes || first[i].Outcome == fence.Applied
	}
	if !passes {
		adms := make([]Admission, len(reqs))
		for i, r := range reqs {
			adms[i] = Admission{Decision: first[i], Output: rec.output(scope, r.Command.Actuator), Record: ScopeRecord{scope, rec.Fence, rec}}
			l.Record(l.entry(scope, r.Command, adms[i]))
		}
		return adms, nil
	}

	if testHookAdmitBetween != nil {
		testHookAdmitBetween()
	}
	pending := l.takePending()
	var adms []Admission
	err = l.update(func(tx *bolt.Tx) error {
		adms = make([]Admission, 0, len(reqs)) // fn may run twice: set, never accumulate
		rec, err := l.txScope(tx, scope)
		if err != nil {
			return err
		}
		entries := slices.Clone(pending)
		wrote := false
		// window is the scope's window and then every command this run
		// remembers, in one array (see fence.Newest): each admission's
		// view of it keeps what it saw, and remembering a command does not
		// copy the whole window again.
		var window []fence.AppliedCommand
		for i := range reqs {
			c := reqs[i].Command
			// Decide again inside the transaction: this is the decision that counts.
			d := fence.Decide(rec.Fence, rec.Recent, c, rules)
			var eff fence.Effect
			if d.Outcome == fence.Applied {
				plan := reqs[i].Plan
				if plan == nil {
					plan = func(ScopeRecord) fence.Effect { return fence.Plain(c) }
				}
				eff = plan(ScopeRecord{scope, rec.Fence, rec})
				if i > 0 {
					// The admissions before this one keep the outputs they saw.
					rec.Outputs = maps.Clone(rec.Outputs)
				}
				rec.Fence = c.Fence
				if window == nil {
					window = append(make([]fence.AppliedCommand, 0, len(rec.Recent)+len(reqs)-i), rec.Recent...)
				}
				window = append(window, fence.Remembered(c, eff.Refusal))
				rec.Recent = fence.Newest(window)
				if eff.Reset {
					rec.Trip = ""
				}
				if eff.Refusal == nil {
					now := l.opts.Now().UTC()
					for _, set := range eff.Sets {
						if rec.Outputs == nil {
							rec.Outputs = make(map[string]outputRecord)
						}
						o := outputRecord{State: set.State, Duty: set.Duty, Frequency: set.Frequency, Holder: c.Holder, ChangedAt: now}
						if eff.Pulse > 0 {
							// The pulse's intent, recorded before the output moves.
							o.Pulse = &fence.Pulse{ID: c.ID, Fence: c.Fence, Width: eff.Pulse, Status: fence.PulseRunning}
						}
						rec.Outputs[set.Actuator] = o
					}
				}
				wrote = true
			}
			adm := Admission{Decision: d, Effect: eff, Output: rec.output(scope, c.Actuator), Record: ScopeRecord{scope, rec.Fence, rec}}
			adms = append(adms, adm)
			entries = append(entries, l.entry(scope, c, adm))
			for _, set := range eff.Sets {
				if set.Actuator != c.Actuator {
					entries = append(entries, Entry{At: l.opts.Now().UTC(), Scope: scope, Actuator: set.Actuator, ID: c.ID, Holder: c.Holder, Signer: c.Signer,
						Command: c.Fence, State: set.State, Duty: set.Duty, Outcome: eff.Others.Outcome, Fence: rec.Fence, Why: eff.Others.Why})
				}
			}
		}
		if wrote {
			if err := l.writeScope(tx, scope, rec); err != nil {
				return err
			}
		}
		return l.appendAudit(tx, entries)
	})
	if err != nil {
		return nil, l.fail("admit", err)
	}
	return adms, nil
}
