// Package wire is fencegate's MQTT wire protocol: the topic layout of a
// gateway, and the JSON payloads of commands, answers, states and the
// gateway's status. It is the one place that knows them: the gateway's
// MQTT link, the controller client, the simulator and the tests all build
// topics and payloads here. docs/protocol.md specifies the same protocol
// for people and for controllers in other languages.
//
// It imports only the standard library and package fence.
package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fencegate/fencegate/fence"
)

// DefaultPrefix is the first topic level when a gateway's configuration
// sets no mqtt.topic_prefix.
const DefaultPrefix = "fencegate"

// Status payloads, retained on Topics.Status.
const (
	// StatusOnline means the gateway is subscribed and takes commands.
	StatusOnline = "online"
	// StatusOffline means it does not (stopped, crashed, or disconnected:
	// the broker publishes it as the gateway's last will).
	StatusOffline = "offline"
)

// Topics names the topics of one gateway:
//
//	<prefix>/<gateway>/<actuator>/set      commands (controllers publish, QoS 1, never retained)
//	<prefix>/<gateway>/<actuator>/result   answers (the gateway publishes, QoS 1)
//	<prefix>/<gateway>/<actuator>/state    each actuator's recorded state (retained)
//	<prefix>/<gateway>/<input>/input       each input's level (retained)
//	<prefix>/<gateway>/status              online or offline (retained; the last will says offline)
//	<prefix>/<gateway>/instance            which process serves the gateway id (retained)
//	<prefix>/<gateway>/$probe/set          the gateway's own test that commands reach it
type Topics struct {
	Prefix    string // the first level(s); empty means DefaultPrefix
	GatewayID string
}

// Set returns the command topic of actuator.
func (t Topics) Set(actuator string) string { return t.base() + actuator + "/set" }

// Result returns the answer topic of actuator.
func (t Topics) Result(actuator string) string { return t.base() + actuator + "/result" }

// State returns the retained state topic of actuator.
func (t Topics) State(actuator string) string { return t.base() + actuator + "/state" }

// Input returns the retained level topic of a digital input.
func (t Topics) Input(name string) string { return t.base() + name + "/input" }

// InputFilter is the subscription filter for every input topic.
func (t Topics) InputFilter() string { return t.base() + "+/input" }

// Status returns the gateway's retained availability topic.
func (t Topics) Status() string { return t.base() + "status" }

// Instance returns the topic on which the process serving the gateway id
// announces itself (see Claim).
func (t Topics) Instance() string { return t.base() + "instance" }

// Probe returns the topic on which a gateway checks, after subscribing,
// that the broker delivers its command topics to it. It matches SetFilter
// but names no actuator ($ is not allowed in actuator names).
func (t Topics) Probe() string { return t.base() + "$probe/set" }

// SetFilter is the subscription filter for every command topic.
func (t Topics) SetFilter() string { return t.base() + "+/set" }

// ResultFilter is the subscription filter for every answer topic.
func (t Topics) ResultFilter() string { return t.base() + "+/result" }

// StateFilter is the subscription filter for every state topic.
func (t Topics) StateFilter() string { return t.base() + "+/state" }

func (t Topics) base() string {
	p := t.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	return p + "/" + t.GatewayID + "/"
}

// Kind says which of an actuator's topics a topic is.
type Kind int

// Kinds of actuator topics.
const (
	KindNone   Kind = iota // not an actuator topic of this gateway
	KindSet                // <actuator>/set
	KindResult             // <actuator>/result
	KindState              // <actuator>/state
	KindInput              // <input>/input
)

// Parse returns the actuator an actuator topic of this gateway names, and
// which topic it is; KindNone for any other topic, and for a name whose
// answer could not be published (a wildcard, U+0000, invalid UTF-8, or so
// long that the answer topic would not fit in MQTT's 65,535 bytes).
func (t Topics) Parse(topic string) (actuator string, kind Kind) {
	rest, ok := strings.CutPrefix(topic, t.base())
	if !ok {
		return "", KindNone
	}
	name, leaf, ok := strings.Cut(rest, "/")
	if !ok || strings.Contains(leaf, "/") || !t.answerable(name) {
		return "", KindNone
	}
	switch leaf {
	case "set":
		return name, KindSet
	case "result":
		return name, KindResult
	case "state":
		return name, KindState
	case "input":
		return name, KindInput
	}
	return "", KindNone
}

// MaxTopic is the longest topic MQTT can carry, in bytes: its length is
// written in two bytes.
const MaxTopic = 1<<16 - 1

// answerable reports whether name can be the actuator level of this
// gateway's topics: not empty, valid UTF-8 without U+0000, no wildcard (+
// #) and no /, as MQTT wants of the topics the gateway publishes on, and
// short enough for the longest of them (the answer topic) to fit. A
// command on any other topic cannot be answered: a broker refuses (and
// disconnects) a publish on a topic with a wildcard, and paho cuts a
// longer topic to 65,535 bytes, which would send the answer out on a
// topic that is none of the gateway's.
func (t Topics) answerable(name string) bool {
	return name != "" && utf8.ValidString(name) && !strings.ContainsAny(name, "+#/\x00") &&
		len(t.Result(name)) <= MaxTopic
}

// Actuator returns the actuator named by a command topic.
func (t Topics) Actuator(topic string) (string, bool) {
	if name, kind := t.Parse(topic); kind == KindSet {
		return name, true
	}
	return "", false
}

// MaxPayload is the largest command payload accepted, in bytes.
const MaxPayload = 1024

// MaxText is the largest id, holder or signer accepted, in bytes.
const MaxText = 128

// DecodeCommand parses a command payload for actuator. It is strict: the
// payload must be one JSON object with only the fields id, token, seq, state,
// holder, signer and sig, each at most once and of the right type; signer and
// sig come together or not at all, and sig is the standard base64 (with
// padding) of a 64-byte signature. DecodeCommand does not verify the
// signature: package sign does, against the gateway's configuration. On error the returned
// Command still carries whatever could be read (its ID, for the answer).
//
// A payload without "state" is a fence-only command.
//
// Nothing is parsed beyond MaxPayload bytes: a larger payload is refused
// (see Oversized) after a look at its first MaxPayload bytes for its id.
func DecodeCommand(actuator string, payload []byte) (fence.Command, error) {
	if len(payload) > MaxPayload {
		return Oversized(actuator, len(payload), payload[:MaxPayload])
	}
	c, idRead, err := decodeCommand(actuator, payload)
	if err != nil && !idRead {
		// A command rejected before its id was read is still answered
		// with its id: look for it on its own.
		c.ID = peekID(payload)
	}
	return c, err
}

// decodeCommand is DecodeCommand without the look for the id of a command
// it rejects; idRead says whether it read the id field itself.
func decodeCommand(actuator string, payload []byte) (c fence.Command, idRead bool, _ error) {
	c = fence.Command{Actuator: actuator}
	if len(bytes.TrimSpace(payload)) == 0 {
		return c, false, errors.New("empty payload; want a JSON object with a token")
	}
	if !utf8.Valid(payload) {
		return c, idRead, errors.New("payload is not valid UTF-8")
	}
	if fast, ok := decodeFast(actuator, payload); ok {
		return fast, true, nil
	}

	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return c, idRead, fmt.Errorf("payload is not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return c, idRead, errors.New("payload must be a JSON object")
	}
	seen := make(map[string]bool)
	var hasToken bool
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return c, idRead, fmt.Errorf("payload is not JSON: %v", err)
		}
		key := kt.(string) // object keys are always strings
		if seen[key] {
			return c, idRead, fmt.Errorf("field %q appears twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return c, idRead, fmt.Errorf("payload is not JSON: %v", err)
		}
		switch key {
		case "id":
			c.ID, err = text(key, raw)
			idRead = true
		case "holder":
			c.Holder, err = text(key, raw)
		case "token":
			c.Fence.Token, err = integer(key, raw, 1, fence.MaxToken)
			hasToken = true
		case "seq":
			c.Fence.Seq, err = integer(key, raw, 0, fence.MaxSeq)
		case "state":
			var s string
			if s, err = text(key, raw); err == nil {
				c.State, err = fence.ParseState(s)
				if err != nil {
					err = fmt.Errorf("state %q is not \"on\" or \"off\"", s)
				}
			}
		case "signer":
			if c.Signer, err = text(key, raw); err == nil && c.Signer == "" {
				err = errors.New("signer is empty; name the controller that signed the command, or send neither signer nor sig")
			}
		case "sig":
			var s string
			if s, err = text("sig", raw); err == nil {
				c.Sig, err = decodeSig(s)
			}
		case "pulse_ms":
			c.Pulse, err = pulseMs(raw)
		case "reset":
			if string(raw) != "true" {
				err = fmt.Errorf("reset must be true (or left out), got %s", abbrev(raw))
			}
			c.Reset = true
		default:
			err = fmt.Errorf("unknown field %q (fields: id, token, seq, state, pulse_ms, reset, holder, signer, sig)", key)
		}
		if err != nil {
			return c, idRead, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return c, idRead, fmt.Errorf("payload is not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return c, idRead, errors.New("payload has data after the JSON object")
	}
	if !hasToken {
		return c, idRead, errors.New("token is required (an integer from 1 to 2^63-1)")
	}
	if seen["signer"] != seen["sig"] {
		return c, idRead, errors.New("signer and sig go together: a signed command has both, an unsigned one neither")
	}
	if c.Reset && (seen["state"] || c.Pulse > 0) {
		return c, idRead, errors.New("reset goes with a fence-only command (no state, no pulse_ms): it releases a tripped scope and drives nothing")
	}
	if c.Pulse > 0 && c.State == fence.StateOff {
		return c, idRead, errors.New(`pulse_ms with state "off": a pulse returns to rest by itself; send pulse_ms alone`)
	}
	c.State = c.Asks()
	return c, idRead, nil
}

// maxPulseMs is fence.MaxPulse in the unit of pulse_ms.
const maxPulseMs = uint64(fence.MaxPulse / time.Millisecond)

// pulseMs decodes pulse_ms: whole milliseconds from 1 to fence.MaxPulse
// (each pulse output has its own max_pulse, at most that).
func pulseMs(raw json.RawMessage) (time.Duration, error) {
	ms, err := integer("pulse_ms", raw, 1, maxPulseMs)
	if err != nil {
		return 0, fmt.Errorf("%w: a pulse lasts at most %v (a pulse output's max_pulse may be shorter)", err, fence.MaxPulse)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Oversized returns what DecodeCommand returns for a payload of size bytes,
// more than MaxPayload, that begins with head: an error that says so, and
// a command that carries the payload's id if head shows it. It reads at
// most MaxPayload bytes of head, so that the payload's receiver may keep
// only its beginning (see package mqttlink).
func Oversized(actuator string, size int, head []byte) (fence.Command, error) {
	c := fence.Command{Actuator: actuator, ID: peekID(head[:min(len(head), MaxPayload)])}
	return c, fmt.Errorf("payload is %d bytes; the limit is %d", size, MaxPayload)
}

// peekID returns the string "id" of the JSON object that b holds or
// begins (b may end anywhere), if it is found among the object's fields
// before anything malformed, is valid UTF-8 and at most MaxText bytes; ""
// otherwise. It reads no further than the id.
func peekID(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for {
		k, err := dec.Token()
		key, ok := k.(string)
		if err != nil || !ok {
			return ""
		}
		if key == "id" {
			v, err := dec.Token()
			s, ok := v.(string)
			if err != nil || !ok || len(s) > MaxText || !utf8.Valid(b[:dec.InputOffset()]) {
				return ""
			}
			return s
		}
		if skipValue(dec) != nil {
			return ""
		}
	}
}

// skipValue reads one JSON value from dec, however deeply nested, without
// recursion.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// SigSize is the size of a command's signature (Ed25519).
const SigSize = 64

// EncodeSig returns a signature as a command carries it: standard base64
// with padding.
func EncodeSig(sig []byte) string { return base64.StdEncoding.EncodeToString(sig) }

// decodeSig parses a signature written as EncodeSig writes it, strictly:
// encoding/base64 alone would also take line breaks and padding bits.
func decodeSig(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || EncodeSig(b) != s {
		return nil, fmt.Errorf("sig must be standard base64 with padding, got %s", abbrev(json.RawMessage(strconv.Quote(s))))
	}
	if len(b) != SigSize {
		return nil, fmt.Errorf("sig holds %d bytes; an Ed25519 signature has %d (88 characters of base64)", len(b), SigSize)
	}
	return b, nil
}

func text(key string, raw json.RawMessage) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("%s must be a string, got %s", key, abbrev(raw))
	}
	if len(s) > MaxText {
		return "", fmt.Errorf("%s is %d bytes; the limit is %d", key, len(s), MaxText)
	}
	return s, nil
}

func integer(key string, raw json.RawMessage, lo, hi uint64) (uint64, error) {
	s := string(raw)
	top := "2^63-1"
	if hi != fence.MaxToken {
		top = strconv.FormatUint(hi, 10)
	}
	want := fmt.Sprintf("%s must be an integer from %d to %s", key, lo, top)
	if s == "" || strings.ContainsAny(s, ".eE") || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
		return 0, fmt.Errorf("%s, got %s", want, abbrev(raw))
	}
	if s[0] == '-' {
		return 0, fmt.Errorf("%s, got negative %s", want, s)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > hi {
		return 0, fmt.Errorf("%s, got %s (too large)", want, abbrev(raw))
	}
	if v < lo {
		return 0, fmt.Errorf("%s, got %s", want, s)
	}
	return v, nil
}

func abbrev(raw json.RawMessage) string {
	s := string(raw)
	if len(s) > 40 {
		n := 40
		for n > 0 && !utf8.RuneStart(s[n]) {
			n-- // not within a character: the answer's text stays UTF-8
		}
		s = s[:n] + "…"
	}
	return s
}

// EncodeCommand is the inverse of DecodeCommand, for controllers.
//
// Its output is never longer than a payload DecodeCommand accepted for the
// same command, so it never exceeds MaxPayload: strings are escaped only
// where JSON requires it (encoding/json would also escape <, >, & and U+2028,
// up to six times longer) and seq is left out when it is 0.
func EncodeCommand(c fence.Command) []byte {
	b := []byte{'{'}
	if c.ID != "" {
		b = appendString(append(b, `"id":`...), c.ID)
		b = append(b, ',')
	}
	b = strconv.AppendUint(append(b, `"token":`...), c.Fence.Token, 10)
	if c.Fence.Seq != 0 {
		b = strconv.AppendUint(append(b, `,"seq":`...), c.Fence.Seq, 10)
	}
	if c.Pulse > 0 {
		b = strconv.AppendInt(append(b, `,"pulse_ms":`...), c.Pulse.Milliseconds(), 10)
	} else if s := c.State.String(); s != "" {
		b = appendString(append(b, `,"state":`...), s)
	}
	if c.Reset {
		b = append(b, `,"reset":true`...)
	}
	if c.Holder != "" {
		b = appendString(append(b, `,"holder":`...), c.Holder)
	}
	if c.Signer != "" {
		b = appendString(append(b, `,"signer":`...), c.Signer)
	}
	if c.Sig != nil {
		b = append(append(append(b, `,"sig":"`...), EncodeSig(c.Sig)...), '"')
	}
	return append(b, '}')
}

// appendString appends s as a JSON string with the shortest escapes. Invalid
// UTF-8 becomes U+FFFD, as with encoding/json.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b = append(b, '\\', byte(r))
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			if r < 0x20 {
				b = fmt.Appendf(b, `\u%04x`, r)
			} else {
				b = utf8.AppendRune(b, r)
			}
		}
	}
	return append(b, '"')
}

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
	Error    string        `json:"error,omitempty"`
	Blocking *wireState    `json:"blocking,omitempty"`
	Pulse    *wirePulse    `json:"pulse,omitempty"`
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
		Pulse: pulseOf(r.Pulse)}
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
		Command: fence.Fence{Token: w.Token, Seq: w.Seq}, Fence: w.Fence, Actual: w.Actual, Error: w.Error, Pulse: w.Pulse.pulse()}
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
	w := wireState{Actuator: o.Actuator, Scope: o.Scope, State: o.State.String(), Fence: o.Fence, Holder: o.Holder, Pulse: pulseOf(o.Pulse), Why: o.Why}
	if !o.ChangedAt.IsZero() {
		t := o.ChangedAt
		w.ChangedAt = &t
	}
	return w
}

func (w wireState) output() (fence.Output, error) {
	o := fence.Output{Actuator: w.Actuator, Scope: w.Scope, Fence: w.Fence, Holder: w.Holder, Pulse: w.Pulse.pulse(), Why: w.Why}
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
