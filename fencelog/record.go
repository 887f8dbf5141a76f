package fencelog

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
)

type record struct {
	Fence   fence.Fence             `json:"fence"`
	Recent  []fence.AppliedCommand  `json:"recent,omitempty"`
	Outputs map[string]outputRecord `json:"outputs,omitempty"`
	// Trip, if set, says why the scope is held at its safe state by an
	// input's trip, until a reset command releases it.
	Trip string `json:"trip,omitempty"`
}

type outputRecord struct {
	State     fence.State  `json:"state"`
	Holder    string       `json:"holder,omitempty"`
	ChangedAt time.Time    `json:"changed_at"`
	Pulse     *fence.Pulse `json:"pulse,omitempty"`
	Duty      fence.Duty   `json:"duty,omitempty"` // a set-point output's
	Frequency uint32       `json:"frequency,omitempty"`
	// Why is set when the gateway set State itself, not a command: the
	// boot rule, a dead-man, max_on.
	Why string `json:"why,omitempty"`
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// readScope reads a scope's record. A fence below the store's floor (a
// scope never commanded since the store was created) reads as the floor.
func readScope(tx *bolt.Tx, scope string) (record, error) {
	var rec record
	if v := tx.Bucket(bucketScopes).Get([]byte(scope)); v != nil {
		if err := json.Unmarshal(v, &rec); err != nil {
			return rec, fmt.Errorf("corrupt record for scope %q: %w", scope, err)
		}
	}
	rec.Fence = atLeastFloor(tx, rec.Fence)
	return rec, nil
}

// floor returns the store's floor (0 for a store from before floors).
func floor(tx *bolt.Tx) uint64 {
	if v := tx.Bucket(bucketMeta).Get(keyFloor); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func atLeastFloor(tx *bolt.Tx, f fence.Fence) fence.Fence {
	if fl := floor(tx); f.Token < fl {
		return fence.Fence{Token: fl}
	}
	return f
}

// txScope returns scope's record in the write transaction tx, for a
// change: as this transaction wrote it, else as the last commit left it
// (the cache: only commits change it, one at a time, so it is what tx
// started from), else from the store. Its Outputs are a copy, to change.
func (l *Store) txScope(tx *bolt.Tx, scope string) (record, error) {
	rec, ok := l.staged[scope]
	if !ok {
		l.cmu.RLock()
		rec, ok = l.cache[scope]
		l.cmu.RUnlock()
	}
	if !ok {
		return readScope(tx, scope)
	}
	rec.Outputs = maps.Clone(rec.Outputs)
	return rec, nil
}

// writeScope writes scope's record in tx, and stages it for the cache,
// which takes it once tx committed.
func (l *Store) writeScope(tx *bolt.Tx, scope string, rec record) error {
	v, err := encodeScope(rec)
	if err != nil {
		return err
	}
	if l.staged != nil {
		l.staged[scope] = rec
	}
	return tx.Bucket(bucketScopes).Put([]byte(scope), v)
}

func (rec record) output(scope, actuator string) fence.Output {
	o := rec.Outputs[actuator]
	return fence.Output{Actuator: actuator, Scope: scope, State: o.State, Fence: rec.Fence, Holder: o.Holder, ChangedAt: o.ChangedAt, Pulse: o.Pulse, Duty: o.Duty, Frequency: o.Frequency, Why: o.Why}
}
