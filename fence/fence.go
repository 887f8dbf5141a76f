// Package fence holds fencegate's domain types and its rules: the pure
// decision whether a tokenized command may pass a scope's fence, and what
// an admitted command may change when its actuator is interlocked.
//
// # Concepts
//
// A fence scope is one actuator, or a group of actuators, that a single
// lease protects. Its fence is the highest (token, seq) pair admitted so
// far. A [Command] names an actuator, carries the pair its controller was
// granted and, usually, the state to set. [Decide] compares the pair with the
// fence and with the scope's window of recently applied commands and returns
// one [Outcome].
//
// An [Interlock] is something else: a group of actuators of one scope of
// which at most one may be on (the two relays of a motor's directions).
// [Interlock.Effect] decides what an admitted command changes: everything
// it asked for, the other members switched off first (break-before-make),
// or nothing at all (a [Refusal]), though its pair still raises the fence.
//
// # Safety
//
// Decide and Effect are pure functions of their arguments: they read no
// clock, no disk and no network. Durability (recording the new fence before any output moves) is
// the job of package fencelog; ordering per scope is the job of package
// actuator. This package imports only the standard library.
package fence

import (
	"bytes"
	"fmt"
	"strings"
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
	// Signer names the controller whose key made Sig; empty if unsigned.
	Signer string
	// Sig is the Ed25519 signature of the command (package sign); nil if
	// unsigned.
	Sig []byte
	// Pulse, if not zero, asks a pulse output for one pulse of this
	// width: on, then back to rest (State is then StateOn). A pulse is an
	// action, not a state: it is carried out once, never again for a
	// redelivery, and never resumed after a restart.
	Pulse time.Duration
	// Reset, on a fence-only command, asks the gateway to release its
	// scope from a trip (an input that sent it to its safe state), if the
	// input is no longer at its trip level.
	Reset bool
	// Setpoint marks a command that sets a set-point output to Duty (0 is
	// off); its State is then Duty.State().
	Setpoint bool
	Duty     Duty
	// Frequency, on a set-point command to a PWM output, is the frequency
	// in hertz to run it at; 0 keeps the output's configured one.
	Frequency uint32
}

// MaxPulse is the longest pulse a command may ask for, and the longest
// max_pulse a pulse output may have: a pulse is a short action (a door
// strike, a gate's push button), and a longer one is a state.
const MaxPulse = 10 * time.Minute

// Asks returns the state c asks for: a pulse is on, then back at rest by
// itself, so a command with a Pulse sets StateOn whether or not it said
// so; any other command sets its State. A pulse that says StateOff
// contradicts itself; whoever takes c refuses it before asking.
func (c Command) Asks() State {
	if c.Pulse > 0 {
		return StateOn
	}
	if c.Setpoint {
		return c.Duty.State()
	}
	return c.State
}

// Equal reports whether c and d are the same command, signature included.
func (c Command) Equal(d Command) bool {
	return c.ID == d.ID && c.Holder == d.Holder && c.Actuator == d.Actuator && c.Fence == d.Fence &&
		c.State == d.State && c.Pulse == d.Pulse && c.Reset == d.Reset && c.Setpoint == d.Setpoint && c.Duty == d.Duty && c.Frequency == d.Frequency && c.Signer == d.Signer && bytes.Equal(c.Sig, d.Sig) && (c.Sig == nil) == (d.Sig == nil)
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
	// Refused is set when the command raised the fence but changed no
	// output (an interlock refused it); a redelivery is answered the same.
	Refused *Refusal `json:"refused,omitempty"`
	// Pulse is the width of the pulse the command asked for (0: none).
	Pulse time.Duration `json:"pulse,omitempty"`
	// PulseStatus is, for a pulse that has ended, how: PulseDone or
	// PulseInterrupted; empty while it runs.
	PulseStatus string `json:"pulse_status,omitempty"`
	// Setpoint, Duty and Frequency are a set-point command's.
	Setpoint  bool   `json:"setpoint,omitempty"`
	Duty      Duty   `json:"duty,omitempty"`
	Frequency uint32 `json:"frequency,omitempty"`
}

// Window is the number of applied commands per scope that are remembered for
// duplicate detection. The window only changes the answer a redelivery gets
// (duplicate instead of stale); it never affects what is driven.
const Window = 32

// Decision is the result of [Decide].
type Decision struct {
	Outcome Outcome
	// Reason is, for a Rejected decision, why (a Reason* code); empty
	// otherwise.
	Reason string
	// Error says, for people, why a command is stale or rejected; empty
	// otherwise.
	Error string
	// Original is the earlier applied command a duplicate repeats.
	Original *AppliedCommand
}

// Rules are what a scope admits beyond its fence.
type Rules struct {
	// Floor: every token at or below it is stale, whatever the scope's
	// fence. A store is created with one (see package fencelog): the
	// tokens that may have been spent before it existed.
	Floor uint64
	// MaxJump, if not zero, rejects a token more than MaxJump above the
	// scope's fence (or the floor, if that is higher), so that one buggy
	// or hostile command cannot move the fence to the end of the range
	// and lock every controller out for good.
	MaxJump uint64
}

// Decide applies the admission rule to command c against a scope whose fence
// is current and whose recently applied commands are recent (oldest first),
// under rules:
//
//   - a token at or below rules.Floor is Stale;
//   - a pair strictly greater than the fence is Applied, unless its token
//     jumps more than rules.MaxJump above the fence (or the floor): that is
//     Rejected with ReasonTokenJump, and the fence does not move;
//   - the same id, pair, actuator and state as a recent applied command is a
//     Duplicate of it;
//   - anything else is Stale.
//
// Decide never returns Failed, and Rejected only for a token jump:
// validating a command and recording it are done elsewhere.
func Decide(current Fence, recent []AppliedCommand, c Command, rules Rules) Decision {
	if c.Fence.Token <= rules.Floor && current.Token <= rules.Floor {
		return Decision{Outcome: Stale, Error: fmt.Sprintf(
			"token %d is not above the store's floor %d: every token up to %d may have been spent before this gateway's store was created; get a new token from the lease service",
			c.Fence.Token, rules.Floor, rules.Floor)}
	}
	if current.Less(c.Fence) {
		base := max(current.Token, rules.Floor)
		if rules.MaxJump > 0 && c.Fence.Token-base > rules.MaxJump {
			return Decision{Outcome: Rejected, Reason: ReasonTokenJump, Error: fmt.Sprintf(
				"token %d is %d above the fence %d, and this scope's max_token_jump is %d; a token that far ahead would lock out every controller. If the lease service really issued it, raise max_token_jump or send a fence-only command within the limit first",
				c.Fence.Token, c.Fence.Token-base, base, rules.MaxJump)}
		}
		return Decision{Outcome: Applied}
	}
	for i := len(recent) - 1; i >= 0; i-- {
		a := recent[i]
		if a.ID != c.ID || a.Fence != c.Fence {
			continue
		}
		if a.Actuator != c.Actuator || a.State != c.State || a.Pulse != c.Pulse || a.Setpoint != c.Setpoint || a.Duty != c.Duty || a.Frequency != c.Frequency {
			return Decision{Outcome: Stale, Error: fmt.Sprintf(
				"token %d seq %d with id %q was already applied to %s %s; this command differs",
				c.Fence.Token, c.Fence.Seq, c.ID, a.Actuator, a.what())}
		}
		orig := a
		return Decision{Outcome: Duplicate, Original: &orig}
	}
	if c.Fence == current {
		return Decision{Outcome: Stale, Error: fmt.Sprintf(
			"token %d seq %d equals the fence; use a higher seq or a new token", c.Fence.Token, c.Fence.Seq)}
	}
	return Decision{Outcome: Stale, Error: fmt.Sprintf(
		"token %d seq %d is below the fence %d/%d; reread state", c.Fence.Token, c.Fence.Seq, current.Token, current.Seq)}
}

// Newest returns the newest Window entries of window: the window a scope
// keeps after remembering the last of them. Its capacity is its length,
// so that whoever appends to it next copies it: a batch that remembers
// several commands appends each to one array with room for all of them,
// and each admission's view of it (Newest of the array then) keeps what it
// saw.
func Newest(window []AppliedCommand) []AppliedCommand {
	return window[max(0, len(window)-Window):len(window):len(window)]
}

// Remembered is the entry of the window that remembers c; refused is c's
// refusal, if its effect was one.
func Remembered(c Command, refused *Refusal) AppliedCommand {
	return AppliedCommand{ID: c.ID, Actuator: c.Actuator, Fence: c.Fence, State: c.State, Refused: refused, Pulse: c.Pulse, Setpoint: c.Setpoint, Duty: c.Duty, Frequency: c.Frequency}
}

// what says what a remembered command asked for, for messages.
func (a AppliedCommand) what() string {
	switch {
	case a.Pulse > 0:
		return fmt.Sprintf("(a pulse of %v)", a.Pulse)
	case a.Setpoint:
		return fmt.Sprintf("(duty %s%%)", a.Duty)
	case a.State == StateNone:
		return "(fence only)"
	}
	return a.State.String()
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
	// people; no admission reads it (only the liveness rules that switch
	// an output off: max_on). Zero if never set.
	ChangedAt time.Time `json:"changed_at"`
	// Pulse is a pulse output's last pulse; nil if it never pulsed.
	Pulse *Pulse `json:"pulse,omitempty"`
	// Duty is a set-point output's recorded set-point (State is on above
	// 0); 0 for any other output. Frequency is a PWM output's, when a
	// command set one; 0: its configured frequency.
	Duty      Duty   `json:"duty,omitempty"`
	Frequency uint32 `json:"frequency,omitempty"`
	// Why says why the gateway itself set State, when no command did: the
	// boot rule, a dead-man's safe state, max_on. Empty after a command.
	Why string `json:"why,omitempty"`
}

// Pulse is a pulse output's last pulse, as recorded.
type Pulse struct {
	ID    string        `json:"id,omitempty"`
	Fence Fence         `json:"fence"` // the pair of the command that asked for it
	Width time.Duration `json:"width"`
	// Status is PulseRunning from the record that admits it (before the
	// output moves) until the record that ends it (after the output is
	// back at rest): PulseDone, or PulseInterrupted if the gateway
	// stopped or crashed while it ran.
	Status string `json:"status"`
}

// Pulse statuses.
const (
	PulseRunning     = "running"
	PulseDone        = "done"
	PulseInterrupted = "interrupted"
)

// Reasons a command is rejected, as they appear on the wire: a controller
// reacts to the reason, a person reads the error text.
const (
	ReasonInvalid         = "invalid"          // the payload is malformed
	ReasonUnknownActuator = "unknown-actuator" // no such actuator on this gateway
	ReasonRetained        = "retained"         // delivered with the retain flag
	ReasonInterlock       = "interlock"        // another member of its interlock is on
	ReasonTokenJump       = "token-jump"       // the token is more than the scope's max_token_jump above its fence
	ReasonBusy            = "busy"             // a pulse output is pulsing
	ReasonTrip            = "trip"             // the scope is held at its safe state by an input's trip
	ReasonReplyTopic      = "reply-topic"      // the command names a reply topic the gateway does not answer on
	ReasonRange           = "range"            // a set-point outside its output's min and max
	ReasonRate            = "rate"             // a set-point further from the recorded one than the output's max_rate allows yet
	// Signed commands (package sign).
	ReasonUnsigned      = "unsigned"       // the actuator takes signed commands only
	ReasonUnknownSigner = "unknown-signer" // the signer is not a configured controller
	ReasonBadSignature  = "bad-signature"  // the signature does not verify for this command, actuator and gateway
	ReasonOutOfScope    = "out-of-scope"   // the signer may not command the actuator's scope
)

// Result is the answer to one command.
type Result struct {
	ID       string
	Actuator string
	Outcome  Outcome
	// Reason is why a command was rejected (a Reason* code); empty otherwise.
	Reason string
	// Command is the (token, seq) the command carried; zero if it could not be parsed.
	Command Fence
	// Fence is the scope's fence after the decision, or, for a duplicate, the
	// fence of the original decision.
	Fence Fence
	// State is the actuator's recorded state after the decision: for a
	// duplicate too, the state now, not the one the original command set
	// (a later command, or the boot rule at a restart, may have changed
	// it since).
	State State
	// Actual is the state the actuator's output reads back as, when that
	// is not State (a drive that failed, a line someone else moved):
	// "on", "off", or "unknown" if it could not be read. It is empty when
	// the output agrees, and in answers decided without the actuator's
	// scope (malformed, unknown actuator, refused signatures), which do
	// not read it.
	Actual string
	// Error explains rejected, failed and stale outcomes.
	Error string
	// Blocking is, for a command an interlock refused, the recorded state
	// of the member that is on.
	Blocking *Output
	// Pulse is, for a pulse command that was applied (or a redelivery of
	// one), its pulse as recorded now: running, done or interrupted.
	Pulse *Pulse
	// Duty is, for a set-point output, its recorded set-point after the
	// decision (as State is its state); nil for other outputs.
	Duty *Duty
	// ActualDuty is what a set-point output reads back as, when that is
	// not Duty; nil when it agrees or could not be read (Actual says
	// "unknown" then).
	ActualDuty *Duty
	// Frequency is a PWM output's recorded frequency when a command set
	// one; 0: its configured frequency.
	Frequency uint32
}

// Interlock is a group of actuators of one scope of which at most one may
// be on: the relays of a motor's two directions, a heater and the cooler
// it must never run against. It is mutual exclusion, not a lease: the
// scope's one fence still orders the controllers.
type Interlock struct {
	Name    string
	Members []string
	// BreakBeforeMake, if set, lets a command that turns a member on switch
	// the member that is on off first; otherwise such a command is refused.
	BreakBeforeMake bool
	// DeadTime is the least time every member stays off between one going
	// off and another coming on. It decides when an output moves, never
	// whether a command is admitted.
	DeadTime time.Duration
}

// Has reports whether actuator is a member of g.
func (g *Interlock) Has(actuator string) bool {
	for _, m := range g.Members {
		if m == actuator {
			return true
		}
	}
	return false
}

// Set is one recorded state change of an admitted command.
type Set struct {
	Actuator string
	State    State
	// Duty is a set-point output's set-point (State is on above 0), at
	// Frequency (0: the output's configured one).
	Duty      Duty
	Frequency uint32
}

// Refusal says why an admitted command changes no output. Its pair still
// raises the fence: a displaced holder must not keep acting with its
// older token.
type Refusal struct {
	Reason string `json:"reason"` // a Reason* code
	Error  string `json:"error"`  // for people
	// Blocker is the actuator whose state refused the command.
	Blocker string `json:"blocker,omitempty"`
}

// Effect is what an admitted command changes in its scope: the states to
// record, in the order their outputs must be driven, or a refusal.
type Effect struct {
	Sets    []Set
	Refusal *Refusal
	// Pulse is the width of the pulse the one Set starts; 0 if none.
	Pulse time.Duration
	// Reset releases the scope from its trip.
	Reset bool
	// Others is, for the Sets of actuators other than the command's own
	// (the members an interlock's break-before-make switches off), their
	// audit entries' outcome and why.
	Others Note
}

// Plain is the effect of a command outside any interlock: it sets its own
// actuator (nothing, for a fence-only command).
func Plain(c Command) Effect {
	if c.State == StateNone {
		return Effect{}
	}
	return Effect{Sets: []Set{{Actuator: c.Actuator, State: c.State, Duty: c.Duty, Frequency: c.Frequency}}, Pulse: c.Pulse}
}

// PulseEffect is the effect of command c, a pulse, on a pulse output that
// running says is pulsing or not: a pulse that arrives while one runs is
// refused (ReasonBusy; its pair still raises the fence), never queued or
// merged. Anything else is Plain.
func PulseEffect(c Command, running bool) Effect {
	if c.Pulse > 0 && running {
		return Effect{Refusal: &Refusal{Reason: ReasonBusy, Blocker: c.Actuator, Error: fmt.Sprintf(
			"%s is pulsing; a pulse is never queued: send it again once the running one is done", c.Actuator)}}
	}
	return Plain(c)
}

// Effect decides what admitting c changes, c's actuator being a member of
// g. on reports whether another member is on; the caller decides what
// counts (the record, and the level read back from the pin).
//
//   - A command that does not turn its actuator on is Plain.
//   - If no other member is on, it is Plain.
//   - Otherwise, with BreakBeforeMake, every member that is on is switched
//     off first, then the actuator on: Sets lists the offs before the on.
//   - Otherwise it is refused (ReasonInterlock), naming the first member
//     that is on.
func (g *Interlock) Effect(c Command, on func(actuator string) bool) Effect {
	if c.State != StateOn {
		return Plain(c)
	}
	var others []string
	for _, m := range g.Members {
		if m != c.Actuator && on(m) {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return Plain(c)
	}
	if !g.BreakBeforeMake {
		return Effect{Refusal: &Refusal{Reason: ReasonInterlock, Blocker: others[0], Error: fmt.Sprintf(
			"interlock %s: %s is on, and at most one of %s may be on; switch %s off first",
			g.Name, others[0], strings.Join(g.Members, ", "), others[0])}}
	}
	sets := make([]Set, 0, len(others)+1)
	for _, m := range others {
		sets = append(sets, Set{Actuator: m, State: StateOff})
	}
	return Effect{Sets: append(sets, Set{Actuator: c.Actuator, State: StateOn, Duty: c.Duty}),
		Others: Note{OutcomeInterlock, fmt.Sprintf("switched off by %s's command (break-before-make)", c.Actuator)}}
}
