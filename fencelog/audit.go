package fencelog

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
)

// Entry is one audit record.
type Entry struct {
	// Seq numbers entries in the order they were written, which is the
	// order of decisions except that a buffered entry (a stale, duplicate
	// or rejected decision, or a failed drive's) may land after entries
	// decided later: after an applied entry of another scope, or of the
	// commands committed with its own in one batch.
	// Set when read back.
	Seq      uint64      `json:"seq,omitempty"`
	At       time.Time   `json:"at"`
	Scope    string      `json:"scope,omitempty"`
	Actuator string      `json:"actuator"`
	ID       string      `json:"id,omitempty"`
	Holder   string      `json:"holder,omitempty"`
	Command  fence.Fence `json:"command"`
	State    fence.State `json:"state,omitempty"`
	// Duty is a set-point output's set-point, when State is set on one.
	Duty    fence.Duty    `json:"duty,omitempty"`
	Outcome fence.Outcome `json:"outcome"`
	// Reason is why a command was rejected (a fence.Reason* code).
	Reason string `json:"reason,omitempty"`
	// Fence is the scope's fence after the decision.
	Fence fence.Fence `json:"fence"`
	// Error says why a command was stale, rejected or failed.
	Error string `json:"error,omitempty"`
	// Why says why the gateway itself changed something (the outcomes of
	// its own actions: fence.OutcomeBoot, ...), for people. It is not an
	// error.
	Why string `json:"why,omitempty"`

	// Signer is the controller that signed the command, if it was signed
	// (for a rejected command: the one it claimed).
	Signer string `json:"signer,omitempty"`
}

// Record adds e to the audit trail without a write of its own: it is
// buffered and written with the next fence transaction or background flush.
// Entry.At is set if zero. After Close it records nothing and returns
// ErrClosed; on a read-only store, ErrReadOnly.
func (l *Store) Record(e Entry) error {
	if e.At.IsZero() {
		e.At = l.opts.Now().UTC()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closing:
		return ErrClosed
	case l.opts.ReadOnly:
		return ErrReadOnly
	}
	if len(l.pending) >= l.opts.AuditLimit {
		// Drop the oldest by slicing, not copying: a stale flood beyond
		// the limit would otherwise move the whole buffer for each entry.
		// Appending reallocates once the array's end is reached, which
		// lets the dropped entries go.
		n := len(l.pending) - l.opts.AuditLimit + 1
		clear(l.pending[:n])
		l.pending = l.pending[n:]
		l.dropped += uint64(n)
	}
	l.pending = append(l.pending, e)
	return nil
}

// Audit returns up to n of the newest audit entries, oldest first,
// including buffered ones not yet written.
func (l *Store) Audit(n int) ([]Entry, error) { return l.FindAudit(AuditQuery{Limit: n}) }

// AuditQuery selects audit entries. Empty fields select everything.
type AuditQuery struct {
	// Actuator, Outcome (one of fence.Outcomes) and Holder must equal the
	// entry's.
	Actuator string
	Outcome  fence.Outcome
	Holder   string
	// Since and Until bound the entry's time: Since <= At < Until.
	Since, Until time.Time
	// Limit is the most entries returned, the newest that match.
	Limit int
}

// Match reports whether q selects e (Limit aside).
func (q AuditQuery) Match(e Entry) bool {
	return (q.Actuator == "" || e.Actuator == q.Actuator) && (q.Outcome == "" || e.Outcome == q.Outcome) &&
		(q.Holder == "" || e.Holder == q.Holder) && (q.Since.IsZero() || !e.At.Before(q.Since)) &&
		(q.Until.IsZero() || e.At.Before(q.Until))
}

// FindAudit returns up to q.Limit of the newest audit entries that q
// selects, oldest first (in the order they were written), including
// buffered ones not yet written. It reads the trail from its newest entry
// back, all of it if need be: times are the wall clock's, which a clock
// step can make go backwards, so an entry older than Since does not end
// the search.
func (l *Store) FindAudit(q AuditQuery) ([]Entry, error) {
	l.mu.Lock()
	var out []Entry
	for i := len(l.pending) - 1; i >= 0 && len(out) < q.Limit; i-- {
		if q.Match(l.pending[i]) {
			out = append(out, l.pending[i])
		}
	}
	l.mu.Unlock()
	err := l.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		for k, v := c.Last(); k != nil && len(out) < q.Limit; k, v = c.Prev() {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			e.Seq = binary.BigEndian.Uint64(k)
			if q.Match(e) {
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fencelog: read audit: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

// Flush writes buffered audit entries now.
func (l *Store) Flush() error {
	if err := l.writable(); err != nil {
		return err
	}
	return l.flush()
}

func (l *Store) flush() error {
	pending := l.takePending()
	if len(pending) == 0 {
		return nil
	}
	if err := l.update(func(tx *bolt.Tx) error { return l.appendAudit(tx, pending) }); err != nil {
		return l.fail("flush audit", err)
	}
	return nil
}

func (l *Store) flusher() {
	defer close(l.done)
	t := time.NewTicker(l.opts.AuditFlush)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if err := l.Flush(); err != nil && !errors.Is(err, ErrBroken) && !errors.Is(err, ErrClosed) {
				l.opts.Logger.Error("audit flush failed", "err", err)
			}
			// Between commits too: a store deleted while the gateway is
			// idle stops it within a tick, not at the next command.
			if err := l.sameFile(); err != nil && l.usable() == nil {
				l.fail("watch store", err)
			}
		}
	}
}

func (l *Store) takePending() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pending
	l.pending = nil
	return p
}

func (l *Store) entry(scope string, c fence.Command, adm Admission) Entry {
	e := Entry{At: l.opts.Now().UTC(), Scope: scope, Actuator: c.Actuator, ID: c.ID, Holder: c.Holder, Signer: c.Signer,
		Command: c.Fence, State: c.State, Outcome: adm.Outcome, Reason: adm.Reason, Fence: adm.Output.Fence, Error: adm.Error}
	if c.Setpoint {
		e.Duty = c.Duty
	}
	r := adm.Effect.Refusal
	if adm.Outcome == fence.Duplicate && adm.Original != nil {
		r = adm.Original.Refused
	}
	if r != nil {
		// Refused: its pair raised the fence (or, for a redelivery, had),
		// but it changed no output; the answer is rejected.
		e.Outcome, e.Reason, e.Error = fence.Rejected, r.Reason, r.Error
	}
	return e
}

// appendAudit writes entries and trims the trail to AuditLimit.
func (l *Store) appendAudit(tx *bolt.Tx, entries []Entry) error {
	b := tx.Bucket(bucketAudit)
	var last uint64
	for _, e := range entries {
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		e.Seq = 0
		v, err := encodeEntry(e)
		if err != nil {
			return err
		}
		if err := b.Put(u64(seq), v); err != nil {
			return err
		}
		last = seq
	}
	if last <= uint64(l.opts.AuditLimit) {
		return nil
	}
	cutoff := last - uint64(l.opts.AuditLimit)
	var old [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= cutoff; k, _ = c.Next() {
		old = append(old, append([]byte(nil), k...))
	}
	for _, k := range old {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
