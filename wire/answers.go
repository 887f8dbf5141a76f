package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/fence"
)

type wireResult struct {
	ID       string        `json:"id"`
	Actuator string        `json:"actuator"`
	Outcome  fence.Outcome `json:"outcome"`
	Reason   string        `json:"reason,omitempty"`
	Token    uint64        `json:"token"`
	Seq      uint64        `json:"seq"`
	Fence    fence.Fence   `json:"fence"`
	State    string        `json:"state,omitempty"`
	Actual   string        `json:"actual,omitempty"`
	// Duty and ActualDuty are a set-point output's recorded set-point and,
	// when it differs, the one it reads back as.
	Duty       *fence.Duty `json:"duty,omitempty"`
	ActualDuty *fence.Duty `json:"actual_duty,omitempty"`
	Frequency  uint32      `json:"frequency,omitempty"`
	Error      string      `json:"error,omitempty"`
	Blocking   *wireState  `json:"blocking,omitempty"`
	Pulse      *wirePulse  `json:"pulse,omitempty"`
}

// wirePulse is a fence.Pulse on the wire: its width in milliseconds.
type wirePulse struct {
	ID      string      `json:"id,omitempty"`
	Fence   fence.Fence `json:"fence"`
	WidthMs int64       `json:"width_ms"`
	Status  string      `json:"status"`
}

func pulseOf(p *fence.Pulse) *wirePulse {
	if p == nil {
		return nil
	}
	return &wirePulse{ID: p.ID, Fence: p.Fence, WidthMs: p.Width.Milliseconds(), Status: p.Status}
}

func (w *wirePulse) pulse() *fence.Pulse {
	if w == nil {
		return nil
	}
	return &fence.Pulse{ID: w.ID, Fence: w.Fence, Width: time.Duration(w.WidthMs) * time.Millisecond, Status: w.Status}
}

// EncodeResult formats an answer.
func EncodeResult(r fence.Result) []byte {
	w := wireResult{ID: r.ID, Actuator: r.Actuator, Outcome: r.Outcome, Reason: r.Reason,
		Token: r.Command.Token, Seq: r.Command.Seq, Fence: r.Fence, State: r.State.String(), Actual: r.Actual, Error: r.Error,
		Pulse: pulseOf(r.Pulse), Duty: r.Duty, ActualDuty: r.ActualDuty, Frequency: r.Frequency}
	if r.Blocking != nil {
		b := stateOf(*r.Blocking)
		w.Blocking = &b
	}
	b, _ := json.Marshal(w)
	return b
}

// DecodeResult parses an answer, for controllers and tests.
func DecodeResult(payload []byte) (fence.Result, error) {
	var w wireResult
	if err := json.Unmarshal(payload, &w); err != nil {
		return fence.Result{}, fmt.Errorf("wire: decode result: %w", err)
	}
	r := fence.Result{ID: w.ID, Actuator: w.Actuator, Outcome: w.Outcome, Reason: w.Reason,
		Command: fence.Fence{Token: w.Token, Seq: w.Seq}, Fence: w.Fence, Actual: w.Actual, Error: w.Error, Pulse: w.Pulse.pulse(),
		Duty: w.Duty, ActualDuty: w.ActualDuty, Frequency: w.Frequency}
	if w.State != "" {
		s, err := fence.ParseState(w.State)
		if err != nil {
			return fence.Result{}, fmt.Errorf("wire: decode result: %w", err)
		}
		r.State = s
	}
	if w.Blocking != nil {
		o, err := w.Blocking.output()
		if err != nil {
			return fence.Result{}, fmt.Errorf("wire: decode result: %w", err)
		}
		r.Blocking = &o
	}
	return r, nil
}

type wireState struct {
	Actuator string `json:"actuator"`
	// Scope is the actuator's fence scope: the name a controller locks in
	// its lease service to command this actuator.
	Scope     string      `json:"scope,omitempty"`
	State     string      `json:"state,omitempty"`
	Fence     fence.Fence `json:"fence"`
	Holder    string      `json:"holder,omitempty"`
	ChangedAt *time.Time  `json:"changed_at"`
	Pulse     *wirePulse  `json:"pulse,omitempty"`
	// Duty is a set-point output's set-point while it is on (above 0);
	// Frequency a PWM output's when a command set one.
	Duty      fence.Duty `json:"duty,omitempty"`
	Frequency uint32     `json:"frequency,omitempty"`
	// Why says why the gateway itself set the state (boot rule, safe
	// state, max_on); omitted after a command.
	Why string `json:"why,omitempty"`
}

// EncodeState formats an actuator's retained state message.
func EncodeState(o fence.Output) []byte {
	b, _ := json.Marshal(stateOf(o))
	return b
}

func stateOf(o fence.Output) wireState {
	w := wireState{Actuator: o.Actuator, Scope: o.Scope, State: o.State.String(), Fence: o.Fence, Holder: o.Holder, Pulse: pulseOf(o.Pulse), Duty: o.Duty, Frequency: o.Frequency, Why: o.Why}
	if !o.ChangedAt.IsZero() {
		t := o.ChangedAt
		w.ChangedAt = &t
	}
	return w
}

func (w wireState) output() (fence.Output, error) {
	o := fence.Output{Actuator: w.Actuator, Scope: w.Scope, Fence: w.Fence, Holder: w.Holder, Pulse: w.Pulse.pulse(), Duty: w.Duty, Frequency: w.Frequency, Why: w.Why}
	if err := o.State.UnmarshalText([]byte(w.State)); err != nil {
		return fence.Output{}, err
	}
	if w.ChangedAt != nil {
		o.ChangedAt = *w.ChangedAt
	}
	return o, nil
}

// DecodeState parses a retained state message.
func DecodeState(payload []byte) (fence.Output, error) {
	var w wireState
	if err := json.Unmarshal(payload, &w); err != nil {
		return fence.Output{}, fmt.Errorf("wire: decode state: %w", err)
	}
	o, err := w.output()
	if err != nil {
		return fence.Output{}, fmt.Errorf("wire: decode state: %w", err)
	}
	return o, nil
}

// InputState is a digital input's level, as the gateway publishes it,
// retained, on Topics.Input: High, and Seq, which counts the input's
// changes (recorded in the store, so it never goes back, across
// restarts), so that a reader can order two messages.
type InputState struct {
	Input     string    `json:"input"`
	Level     string    `json:"level"` // high or low
	Seq       uint64    `json:"seq"`
	ChangedAt time.Time `json:"changed_at"`
}

// EncodeInputState formats an input's retained level message.
func EncodeInputState(s InputState) []byte {
	b, _ := json.Marshal(s)
	return b
}

// DecodeInputState parses an input's retained level message.
func DecodeInputState(payload []byte) (InputState, error) {
	var s InputState
	if err := json.Unmarshal(payload, &s); err != nil {
		return InputState{}, fmt.Errorf("wire: decode input: %w", err)
	}
	if s.Level != "high" && s.Level != "low" {
		return InputState{}, fmt.Errorf("wire: decode input: level %q", s.Level)
	}
	return s, nil
}

// Claim is what the process serving a gateway id publishes, retained, on
// Topics.Instance each time it connects, before it takes commands. Two
// processes that answer for one gateway id (a copied configuration, a
// second installation, a test left running) would each fence commands
// against a store of its own; by their claims they find each other, and
// both refuse commands until one of them is gone.
type Claim struct {
	// Instance is random, new at every start of the process.
	Instance string `json:"instance"`
	// Store is the identity of the fence store the process uses.
	Store string `json:"store"`
	Host  string `json:"host"`
	// Machine identifies the machine's installation (a hash of its
	// machine id), where known: host names repeat (raspberrypi).
	Machine string    `json:"machine,omitempty"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Boot is the kernel's id of the boot the process runs in, and Ticks
	// when it started, in clock ticks since that boot (Linux): together
	// they tell a process from a later one with the same pid, whatever the
	// wall clock did meanwhile (Started moves with it). Empty and 0 where
	// unknown, and in claims of versions before them.
	Boot    string `json:"boot,omitempty"`
	Ticks   int64  `json:"start_ticks,omitempty"`
	Version string `json:"version,omitempty"`
	// Connection counts the process's connections: a process knows its
	// own claim of this connection when the broker delivers it back.
	Connection int `json:"connection"`
	// Conflict is set by a process that found another one serving its
	// gateway id; it says which.
	Conflict string `json:"conflict,omitempty"`
}

// String describes the claiming process for people.
func (c Claim) String() string {
	return fmt.Sprintf("pid %d on %s (store %s, started %s)", c.PID, c.Host, c.Store, c.Started.Format(time.RFC3339))
}

// EncodeClaim formats a claim.
func EncodeClaim(c Claim) []byte {
	b, _ := json.Marshal(c)
	return b
}

// DecodeClaim parses a claim.
func DecodeClaim(payload []byte) (Claim, error) {
	var c Claim
	if err := json.Unmarshal(payload, &c); err != nil {
		return Claim{}, fmt.Errorf("wire: decode claim: %w", err)
	}
	if c.Instance == "" {
		return Claim{}, errors.New("wire: decode claim: no instance")
	}
	return c, nil
}
