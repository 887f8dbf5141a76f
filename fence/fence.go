// Package fence holds fencegate's domain types and its admission rule: the
// pure decision whether a tokenized command may pass a scope's fence.
//
// # Concepts
//
// A fence scope is one actuator, or a group of interlocked actuators, that a
// single lease protects. Its fence is the highest (token, seq) pair admitted so
// far. A [Command] names an actuator, carries the pair its controller was
// granted and, usually, the state to set. [Decide] compares the pair with the
// fence and with the scope's window of recently applied commands and returns
// one [Outcome].
//
// # Safety
//
// Decide is a pure function of its arguments: it reads no clock, no disk and
// no network. Durability (recording the new fence before any output moves) is
// the job of package fencelog; ordering per scope is the job of package
// actuator. This package imports only the standard library.
package fence

import (
	"fmt"
	"time"
)

// MaxToken is the largest token a command may carry (2^63-1). etcd revisions
// and other int64 counters fit; anything above is refused rather than wrapped.
const MaxToken = 1<<63 - 1

// MaxSeq is the largest sequence number a command may carry.
const MaxSeq = 1<<63 - 1

// Fence is a (token, seq) pair. Pairs compare token first, then seq.
type Fence struct {
	Token uint64 `json:"token"`
	Seq   uint64 `json:"seq"`
}

// Less reports whether f orders strictly before g.
func (f Fence) Less(g Fence) bool {
	if f.Token != g.Token {
		return f.Token < g.Token
	}
	return f.Seq < g.Seq
}

// String formats f as "token/seq".
func (f Fence) String() string { return fmt.Sprintf("%d/%d", f.Token, f.Seq) }

// State is the logical state a command sets an output to.
type State uint8

// States. StateNone marks a fence-only command: it raises the scope's fence
// without driving anything.
const (
	StateNone State = iota
	StateOff
	StateOn
)

// ParseState parses "on" or "off".
func ParseState(s string) (State, error) {
	switch s {
	case "on":
		return StateOn, nil
	case "off":
		return StateOff, nil
	}
	return StateNone, fmt.Errorf("fence: unknown state %q (want \"on\" or \"off\")", s)
}

// String returns "on", "off" or "" for StateNone.
func (s State) String() string {
	switch s {
	case StateOn:
		return "on"
	case StateOff:
		return "off"
	}
	return ""
}

// MarshalText implements encoding.TextMarshaler.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; the empty string is StateNone.
func (s *State) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*s = StateNone
		return nil
	}
	v, err := ParseState(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Command is one tokenized request from a controller.
type Command struct {
	ID       string // controller's correlation id, echoed back; may be empty
	Holder   string // who holds the lease, for the audit trail; may be empty
	Actuator string // target actuator name
	Fence    Fence  // the controller's (token, seq)
	State    State  // StateNone for a fence-only command
}

// Outcome is the answer class of a command.
type Outcome string

// Outcomes, as they appear on the wire.
const (
	Applied   Outcome = "applied"   // pair above the fence; recorded durably, then driven
	Duplicate Outcome = "duplicate" // redelivery of a recently applied command; nothing driven again
	Stale     Outcome = "stale"     // pair not above the fence; nothing recorded, nothing driven
	Rejected  Outcome = "rejected"  // malformed or not addressable; nothing changes
	Failed    Outcome = "failed"    // could not record durably, or could not drive
)

// AppliedCommand records one admitted command in a scope's window of recent
// commands, which is what lets a redelivery be recognised.
type AppliedCommand struct {
	ID       string `json:"id"`
	Actuator string `json:"actuator"`
	Fence    Fence  `json:"fence"`
	State    State  `json:"state"`
}

// Window is the number of applied commands per scope that are remembered for
// duplicate detection. The window only changes the answer a redelivery gets
// (duplicate instead of stale); it never affects what is driven.
const Window = 32

// Decision is the result of [Decide].
type Decision struct {
	Outcome Outcome
	// Reason says why a command is stale; empty otherwise.
	Reason string
	// Original is the earlier applied command a duplicate repeats.
	Original *AppliedCommand
}

// Decide applies the admission rule to command c against a scope whose fence
// is current and whose recently applied commands are recent (oldest first).
//
//   - a pair strictly greater than the fence is Applied;
//   - the same id, pair, actuator and state as a recent applied command is a
//     Duplicate of it;
//   - anything else is Stale.
//
// Decide never returns Rejected or Failed: validating a command and recording
// it are done elsewhere.
func Decide(current Fence, recent []AppliedCommand, c Command) Decision {
	if current.Less(c.Fence) {
		return Decision{Outcome: Applied}
	}
	for i := len(recent) - 1; i >= 0; i-- {
		a := recent[i]
		if a.ID != c.ID || a.Fence != c.Fence {
			continue
		}
		if a.Actuator != c.Actuator || a.State != c.State {
			return Decision{Outcome: Stale, Reason: fmt.Sprintf(
				"token %d seq %d with id %q was already applied to %s %s; this command differs",
				c.Fence.Token, c.Fence.Seq, c.ID, a.Actuator, stateWord(a.State))}
		}
		orig := a
		return Decision{Outcome: Duplicate, Original: &orig}
	}
	if c.Fence == current {
		return Decision{Outcome: Stale, Reason: fmt.Sprintf(
			"token %d seq %d equals the fence; use a higher seq or a new token", c.Fence.Token, c.Fence.Seq)}
	}
	return Decision{Outcome: Stale, Reason: fmt.Sprintf(
		"token %d seq %d is below the fence %d/%d; reread state", c.Fence.Token, c.Fence.Seq, current.Token, current.Seq)}
}

// Remember returns recent with c appended, keeping at most Window entries.
// It does not modify recent.
func Remember(recent []AppliedCommand, c Command) []AppliedCommand {
	start := 0
	if len(recent) >= Window {
		start = len(recent) - Window + 1
	}
	out := make([]AppliedCommand, 0, len(recent)-start+1)
	out = append(out, recent[start:]...)
	return append(out, AppliedCommand{ID: c.ID, Actuator: c.Actuator, Fence: c.Fence, State: c.State})
}

func stateWord(s State) string {
	if s == StateNone {
		return "(fence only)"
	}
	return s.String()
}

// Output is the recorded state of one actuator.
type Output struct {
	Actuator string `json:"actuator"`
	Scope    string `json:"scope"`
	// State is the intended state, as last recorded; StateNone if never set.
	State State `json:"state"`
	// Fence is the scope's current fence.
	Fence Fence `json:"fence"`
	// Holder is the holder of the command that last set State.
	Holder string `json:"holder"`
	// ChangedAt is when State was last recorded. It is an annotation for
	// people; no decision reads it. Zero if never set.
	ChangedAt time.Time `json:"changed_at"`
}

// Result is the answer to one command.
type Result struct {
	ID       string
	Actuator string
	Outcome  Outcome
	// Command is the (token, seq) the command carried; zero if it could not be parsed.
	Command Fence
	// Fence is the scope's fence after the decision, or, for a duplicate, the
	// fence of the original decision.
	Fence Fence
	// State is the actuator's recorded state after the decision, or, for a
	// duplicate, the state the original command set.
	State State
	// Error explains rejected, failed and stale outcomes.
	Error string
}
