package fencelog

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
)

// ScopeRecord is a scope's record as one transaction read it.
type ScopeRecord struct {
	Name  string
	Fence fence.Fence
	rec   record
}

// Output returns actuator's recorded state in the scope (State is
// fence.StateNone if it was never recorded).
func (s ScopeRecord) Output(actuator string) fence.Output { return s.rec.output(s.Name, actuator) }

// States returns the recorded state of every actuator with a record.
func (s ScopeRecord) States() map[string]fence.State {
	m := make(map[string]fence.State, len(s.rec.Outputs))
	for a, o := range s.rec.Outputs {
		m[a] = o.State
	}
	return m
}

// Trip returns why the scope is held at its safe state by a trip; "" if
// it is not.
func (s ScopeRecord) Trip() string { return s.rec.Trip }

// ScopeRecord reads a scope's record.
func (l *Store) ScopeRecord(name string) (ScopeRecord, error) {
	rec, err := l.committed(name)
	if err != nil {
		return ScopeRecord{}, err
	}
	return ScopeRecord{name, rec.Fence, rec}, nil
}

// committed returns scope's record as the last commit left it. The record
// shares its slices and maps with the cache: read it, never change it.
func (l *Store) committed(scope string) (record, error) {
	l.cmu.RLock()
	rec, ok := l.cache[scope]
	l.cmu.RUnlock()
	if ok {
		return rec, nil
	}
	if err := l.db.View(func(tx *bolt.Tx) error {
		var err error
		rec, err = readScope(tx, scope)
		return err
	}); err != nil {
		return record{}, fmt.Errorf("fencelog: read scope %q: %w", scope, err)
	}
	return rec, nil
}

// loadScopes reads every scope record that decodes, for the cache.
func loadScopes(db *bolt.DB) map[string]record {
	m := make(map[string]record)
	db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketScopes).ForEach(func(k, _ []byte) error {
			if rec, err := readScope(tx, string(k)); err == nil {
				m[string(k)] = rec
			}
			return nil
		})
	})
	return m
}

// Output returns the recorded state of actuator in scope. An actuator never
// set has State fence.StateNone.
func (l *Store) Output(scope, actuator string) (fence.Output, error) {
	rec, err := l.committed(scope)
	if err != nil {
		return fence.Output{}, err
	}
	return rec.output(scope, actuator), nil
}

// Fences returns every scope's fence.
func (l *Store) Fences() (map[string]fence.Fence, error) {
	m := make(map[string]fence.Fence)
	err := l.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketScopes).ForEach(func(k, v []byte) error {
			var rec record
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("scope %q: %w", k, err)
			}
			m[string(k)] = atLeastFloor(tx, rec.Fence)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("fencelog: read fences: %w", err)
	}
	return m, nil
}
