package fencelog

import (
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// Bind records the scope of each actuator (actuator name → scope). An
// actuator whose recorded scope differs, because the configuration moved it,
// brings its old scope's fence and its recorded state along: the new scope's
// fence is raised to at least the old one, so that regrouping actuators can
// never let a token pass that the old fence had already refused. Bind
// returns the actuators that moved, and writes (with fsync) only if
// something changed.
func (l *Store) Bind(scopes map[string]string) ([]string, error) {
	if err := l.writable(); err != nil {
		return nil, err
	}
	changed := false
	if err := l.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBind)
		for act, scope := range scopes {
			if string(b.Get([]byte(act))) != scope {
				changed = true
			}
		}
		return nil
	}); err != nil || !changed {
		return nil, err
	}
	var moved []string
	pending := l.takePending()
	err := l.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBind)
		var audit []Entry
		for act, scope := range scopes {
			prev := string(b.Get([]byte(act)))
			if prev != "" && prev != scope {
				from, err := l.txScope(tx, prev)
				if err != nil {
					return err
				}
				to, err := l.txScope(tx, scope)
				if err != nil {
					return err
				}
				if to.Fence.Less(from.Fence) {
					to.Fence = from.Fence
				}
				if o, ok := from.Outputs[act]; ok {
					if to.Outputs == nil {
						to.Outputs = make(map[string]outputRecord)
					}
					to.Outputs[act] = o
					delete(from.Outputs, act)
				}
				if err := l.writeScope(tx, prev, from); err != nil {
					return err
				}
				if err := l.writeScope(tx, scope, to); err != nil {
					return err
				}
				moved = append(moved, act)
				audit = append(audit, Entry{At: l.opts.Now().UTC(), Scope: scope, Actuator: act, Outcome: OutcomeMoved,
					Fence: to.Fence, Error: fmt.Sprintf("moved from scope %q (fence %s)", prev, from.Fence)})
			}
			if err := b.Put([]byte(act), []byte(scope)); err != nil {
				return err
			}
		}
		return l.appendAudit(tx, append(pending, audit...))
	})
	if err != nil {
		return nil, l.fail("bind", err)
	}
	sort.Strings(moved)
	return moved, nil
}
