package conformance_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sign"
	"github.com/fencegate/fencegate/wire"
)

// -update writes commands.json and answers.json from the cases below, as
// the Go client encodes and reads them. Every client, this one included,
// is then held to the files.
var update = flag.Bool("update", false, "write commands.json and answers.json from the Go client")

// A Command is a command as the vector files give it: token, seq and
// pulse_ms are decimal strings, which JavaScript reads without losing
// digits above 2^53.
type Command struct {
	Actuator string `json:"actuator"`
	ID       string `json:"id,omitempty"`
	Token    string `json:"token,omitempty"`
	Seq      string `json:"seq,omitempty"`
	State    string `json:"state,omitempty"`
	PulseMs  string `json:"pulse_ms,omitempty"`
	// Duty is a set-point command's duty, percent, as the payload writes
	// it ("42.5", "0"); empty for other commands.
	Duty string `json:"duty,omitempty"`
	// Frequency is a set-point command's frequency in hertz, a decimal
	// string; empty for none.
	Frequency string `json:"frequency,omitempty"`
	Reset     bool   `json:"reset,omitempty"`
	Holder    string `json:"holder,omitempty"`
	// DutyGiven is the duty as a program hands it to a client, where
	// that is not the number duty writes: a string, a boolean, a number
	// JSON cannot carry (NaN, Infinity) or one that is not a duty. A
	// client must refuse each that is refused, and send each that is a
	// case's as its duty. Go's Command holds a duty as hundredths of a
	// percent and cannot be given any of these.
	DutyGiven *Given `json:"duty_given,omitempty"`
}

// Signing is a vector's key: an Ed25519 seed, its public key as the
// gateway's configuration takes it, and the signer's name.
type Signing struct {
	Seed      string `json:"seed"`
	Signer    string `json:"signer"`
	PublicKey string `json:"public_key"`
}

// CommandCase is one encoding: the command, and what a client must make
// of it, byte for byte.
type CommandCase struct {
	Name      string   `json:"name"`
	Prefix    string   `json:"prefix"`
	Gateway   string   `json:"gateway"`
	Command   Command  `json:"command"`
	Reply     string   `json:"reply,omitempty"`
	Signing   *Signing `json:"signing,omitempty"`
	Topic     string   `json:"topic"`
	Canonical string   `json:"canonical"`
	Sig       string   `json:"sig,omitempty"`
	Payload   string   `json:"payload"`
}

// Refused is a command a client must refuse to send: the gateway would
// reject it as malformed.
type Refused struct {
	Name    string  `json:"name"`
	Command Command `json:"command"`
	Why     string  `json:"why"`
}

// Commands is commands.json.
type Commands struct {
	About   string        `json:"about"`
	Cases   []CommandCase `json:"cases"`
	Refused []Refused     `json:"refused"`
	// ReplyTopics are the reply topics a client makes of its client id
	// and user name, or is asked for, and those it refuses.
	ReplyTopics []ReplyCase `json:"reply_topics"`
}

// Fence is a pair as the vector files give it.
type Fence struct {
	Token string `json:"token"`
	Seq   string `json:"seq"`
}

// AnswerCase is one answer as the gateway publishes it, the command it
// may answer, and what a client makes of it.
type AnswerCase struct {
	Name    string  `json:"name"`
	Command Command `json:"command"`
	Answer  string  `json:"answer"`
	Matches bool    `json:"matches"`
	Outcome string  `json:"outcome"`
	Reason  string  `json:"reason,omitempty"`
	Fence   Fence   `json:"fence"`
	State   string  `json:"state,omitempty"`
	// Duty is a set-point output's recorded duty the answer carries, as
	// the answer writes it; empty for other outputs.
	Duty   string `json:"duty,omitempty"`
	Action string `json:"action"`
}

// Answers is answers.json.
type Answers struct {
	About   string       `json:"about"`
	Actions []string     `json:"actions"`
	Cases   []AnswerCase `json:"cases"`
}

func num(v uint64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatUint(v, 10)
}

func (c Command) fence(t testing.TB) fence.Command {
	t.Helper()
	u := func(s string) uint64 {
		if s == "" {
			return 0
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("vector %+v: %v", c, err)
		}
		return v
	}
	fc := fence.Command{Actuator: c.Actuator, ID: c.ID, Holder: c.Holder, Fence: fence.Fence{Token: u(c.Token), Seq: u(c.Seq)},
		Pulse: time.Duration(u(c.PulseMs)) * time.Millisecond, Reset: c.Reset}
	if c.DutyGiven != nil && c.Duty == "" {
		// Not a duty a Go program can hold: a command a client refuses.
		fc.Setpoint, fc.Duty, fc.State = true, fence.FullDuty+1, fence.StateOn
	}
	if c.Duty != "" {
		d, err := fence.ParseDuty(c.Duty)
		if err != nil {
			d = fence.FullDuty + 1 // not a duty: a command a client refuses
		}
		fc.Setpoint, fc.Duty, fc.State = true, d, d.State()
	}
	if c.Frequency != "" {
		f, err := strconv.ParseUint(c.Frequency, 10, 32)
		if err != nil {
			f = fence.MaxFrequency + 1 // not a frequency: a command a client refuses
		}
		fc.Frequency = uint32(f)
	}
	if c.Duty != "" && c.State != "" {
		fc.State = fence.State(99) // a duty and a state: a command a client refuses
		return fc
	}
	switch c.State {
	case "on":
		fc.State = fence.StateOn
	case "off":
		fc.State = fence.StateOff
	case "":
	default:
		fc.State = fence.State(99) // neither: a command a client refuses
	}
	return fc
}

func commandOf(c fence.Command) Command {
	s := c.State.String()
	if c.State != fence.StateNone && s == "" {
		s = "ON"
	}
	out := Command{Actuator: c.Actuator, ID: c.ID, Token: num(c.Fence.Token), Seq: num(c.Fence.Seq), State: s,
		PulseMs: num(uint64(c.Pulse.Milliseconds())), Reset: c.Reset, Holder: c.Holder}
	if c.Setpoint {
		out.State, out.Duty = "", c.Duty.String() // the payload carries duty alone
		out.Frequency = num(uint64(c.Frequency))
	}
	return out
}

// RFC 8032's first three seeds, as in protocol.md's test vectors.
var seeds = []string{
	"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
	"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
	"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
}

func signing(i int, signer string) *Signing {
	seed, _ := hex.DecodeString(seeds[i])
	return &Signing{Seed: seeds[i], Signer: signer, PublicKey: sign.FormatPublicKey(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))}
}

// commandCases are the encodings: protocol.md's three signed vectors
// first (their signatures are checked against the document's), then the
// rest of what a command can be.
func commandCases() []CommandCase {
	const gh = "greenhouse-1"
	on, off := fence.StateOn, fence.StateOff
	type in struct {
		name, prefix, gateway, reply string
		c                            fence.Command
		signing                      *Signing
		given                        *Given // the duty as a program gives it, if not as the payload writes it
	}
	ins := []in{
		{name: "protocol.md vector 1: an on command, signed", gateway: gh, signing: signing(0, "ctl-a"),
			c: fence.Command{Actuator: "pump", ID: "b-2", Holder: "controller-b", Fence: fence.Fence{Token: 42, Seq: 1}, State: on}},
		{name: "protocol.md vector 2: a fence-only command without id or holder, signed, the largest token", gateway: "sim", signing: signing(1, "ctl-b"),
			c: fence.Command{Actuator: "heater", Fence: fence.Fence{Token: fence.MaxToken}}},
		{name: "protocol.md vector 3: a non-ASCII id and holder, signed", gateway: gh, signing: signing(2, "ctl-a"),
			c: fence.Command{Actuator: "vent-open", ID: "ключ-7", Holder: "Gärtnerin Zoë 🌱", Fence: fence.Fence{Token: 1, Seq: 9}, State: off}},
		{name: "an unsigned on command with a reply topic", gateway: gh, reply: "fencegate/greenhouse-1/reply/irrigation/ctl-7f3a",
			c: fence.Command{Actuator: "pump", ID: "c-1", Holder: "irrigation", Fence: fence.Fence{Token: 42}, State: on}},
		{name: "an unsigned off command, seq 0 left out", gateway: gh,
			c: fence.Command{Actuator: "valve", ID: "c-2", Fence: fence.Fence{Token: 43}, State: off}},
		{name: "a fence-only command (a heartbeat), unsigned", gateway: gh, reply: "fencegate/greenhouse-1/reply/c",
			c: fence.Command{Actuator: "pump", ID: "a-hb-7-3", Holder: "a", Fence: fence.Fence{Token: 7, Seq: 3}}},
		{name: "a pulse, signed: pulse_ms in the payload, on and the width in the signature", gateway: gh, signing: signing(0, "ctl-a"),
			c: fence.Command{Actuator: "door", ID: "open-1", Holder: "front desk", Fence: fence.Fence{Token: 100, Seq: 2}, Pulse: 1500 * time.Millisecond}},
		{name: "a pulse that also says on: the same signature as without", gateway: gh, signing: signing(0, "ctl-a"),
			c: fence.Command{Actuator: "door", ID: "open-1", Holder: "front desk", Fence: fence.Fence{Token: 100, Seq: 2}, Pulse: 1500 * time.Millisecond, State: on}},
		{name: "the longest pulse", gateway: gh,
			c: fence.Command{Actuator: "door", ID: "open-2", Fence: fence.Fence{Token: 100, Seq: 3}, Pulse: fence.MaxPulse}},
		{name: "protocol.md vector 4: a set-point, signed: state \"duty\", then the duty in hundredths of a percent", gateway: gh, signing: signing(0, "ctl-c"),
			c: fence.Command{Actuator: "fan", ID: "f-9", Holder: "controller-c", Fence: fence.Fence{Token: 77, Seq: 3}, Setpoint: true, Duty: 4250, State: on}},
		{name: "protocol.md vector 5: a set-point of 0 (off), signed, without id or holder", gateway: "sim", signing: signing(2, "ctl-c"),
			c: fence.Command{Actuator: "dimmer", Fence: fence.Fence{Token: 5}, Setpoint: true, Duty: 0, State: off}},
		{name: "the full set-point and the finest step", gateway: gh,
			c: fence.Command{Actuator: "fan", ID: "f-10", Fence: fence.Fence{Token: 78}, Setpoint: true, Duty: fence.FullDuty, State: on}},
		{name: "a set-point at a frequency, signed: its hertz after the duty", gateway: gh, signing: signing(1, "ctl-c"),
			c: fence.Command{Actuator: "fan", ID: "f-12", Holder: "controller-c", Fence: fence.Fence{Token: 79, Seq: 2}, Setpoint: true, Duty: 7550, State: on, Frequency: 25000}},
		{name: "a set-point of 0.01 %", gateway: gh,
			c: fence.Command{Actuator: "fan", ID: "f-11", Fence: fence.Fence{Token: 78, Seq: 1}, Setpoint: true, Duty: 1, State: on}},
		{name: "a set-point given as the number -0: it is 0, and goes as 0 (the gateway refuses the text -0)", gateway: gh, given: &Given{Type: "number", Value: "-0"},
			c: fence.Command{Actuator: "fan", ID: "f-13", Fence: fence.Fence{Token: 78, Seq: 2}, Setpoint: true, Duty: 0, State: off}},
		{name: "a set-point given as the number 42.50", gateway: gh, given: &Given{Type: "number", Value: "42.50"},
			c: fence.Command{Actuator: "fan", ID: "f-14", Fence: fence.Fence{Token: 78, Seq: 3}, Setpoint: true, Duty: 4250, State: on}},
		{name: "a reset, signed: the byte 01 ends the canonical bytes", gateway: gh, signing: signing(1, "ctl-b"),
			c: fence.Command{Actuator: "heater", ID: "r-1", Holder: "climate", Fence: fence.Fence{Token: 50, Seq: 4}, Reset: true}},
		{name: "the largest token and seq", gateway: gh,
			c: fence.Command{Actuator: "pump", ID: "max", Fence: fence.Fence{Token: fence.MaxToken, Seq: fence.MaxSeq}, State: off}},
		{name: "JSON escapes: quote, backslash, control characters; <, >, & and U+2028 raw", gateway: gh, signing: signing(2, "ctl-c"),
			c: fence.Command{Actuator: "pump", ID: "q\"uo\\te\n\t\r\b\f\x01\x1f", Holder: "<a&b> \u2028 /slash", Fence: fence.Fence{Token: 5}, State: on}},
		{name: "a topic prefix of two levels", prefix: "site/fencegate", gateway: "barn_2", reply: "site/fencegate/barn_2/reply/x",
			c: fence.Command{Actuator: "Fan_3", ID: "p", Fence: fence.Fence{Token: 9, Seq: 1}, State: on}},
		{name: "an id and holder of 128 bytes, the most", gateway: gh,
			c: fence.Command{Actuator: "pump", ID: string(bytes.Repeat([]byte("i"), 128)), Holder: string(bytes.Repeat([]byte("é"), 64)), Fence: fence.Fence{Token: 3}, State: on}},
	}
	var out []CommandCase
	for _, x := range ins {
		prefix := x.prefix
		if prefix == "" {
			prefix = wire.DefaultPrefix
		}
		c := x.c
		cmd := commandOf(c)
		cmd.DutyGiven = x.given
		cc := CommandCase{Name: x.name, Prefix: prefix, Gateway: x.gateway, Command: cmd, Reply: x.reply, Signing: x.signing,
			Topic: wire.Topics{Prefix: prefix, GatewayID: x.gateway}.Set(c.Actuator), Canonical: hex.EncodeToString(sign.Canonical(x.gateway, c))}
		if x.signing != nil {
			seed, _ := hex.DecodeString(x.signing.Seed)
			c = sign.Sign(ed25519.NewKeyFromSeed(seed), x.signing.Signer, x.gateway, c)
			cc.Sig = wire.EncodeSig(c.Sig)
		}
		cc.Payload = string(wire.EncodeRequest(wire.Request{Command: c, Reply: x.reply}))
		out = append(out, cc)
	}
	return out
}

// protocolSigs are protocol.md's three signatures.
var protocolSigs = []string{
	"cZp6CRkepq6hCAXeO3zrRHW5jo/+ibNrUYDBHieLvk6FnIIBggEmgbe7OM3sOqqNvNbJRbx4jbCKs3VSvvjQCg==",
	"hjEs24RstnvnqzLJBPIwVYvEEcdu3fzZtEvPrCeCKSSEwcNREcS0LmS+kSqb1SJtywuKPMT62BvjwDUYVxubCg==",
	"/9Cnw1HDpt1Wzbm0CHY7C4hbwg2pwzF1BKEJAzF41/38vDllhq3GeXtr5nJUudvUc3/pqPMbc2QDMxTS6S+GDQ==",
}

func refused() []Refused {
	long := string(bytes.Repeat([]byte("x"), 129))
	return []Refused{
		{"no token", Command{Actuator: "pump", ID: "r-1", State: "on"}, "token"},
		{"token 0 with a seq", Command{Actuator: "pump", Token: "0", Seq: "3", State: "on"}, "token"},
		{"token above 2^63-1", Command{Actuator: "pump", Token: "9223372036854775808", State: "on"}, "token"},
		{"seq above 2^63-1", Command{Actuator: "pump", Token: "1", Seq: "9223372036854775808", State: "on"}, "seq"},
		{"a state other than on or off", Command{Actuator: "pump", Token: "1", State: "ON"}, "state"},
		{"pulse_ms above 600000", Command{Actuator: "door", Token: "1", PulseMs: "600001"}, "pulse_ms"},
		{"a pulse with state off", Command{Actuator: "door", Token: "1", PulseMs: "500", State: "off"}, "pulse_ms"},
		{"reset with a state", Command{Actuator: "heater", Token: "1", State: "on", Reset: true}, "reset"},
		{"a duty above 100", Command{Actuator: "fan", Token: "1", Duty: "150"}, "duty"},
		{"a duty finer than 0.01", Command{Actuator: "fan", Token: "1", Duty: "42.125"}, "duty"},
		{"a negative duty", Command{Actuator: "fan", Token: "1", Duty: "-5"}, "duty"},
		{"a duty with a state", Command{Actuator: "fan", Token: "1", Duty: "50", State: "on"}, "duty"},
		{"a duty with pulse_ms", Command{Actuator: "fan", Token: "1", Duty: "50", PulseMs: "500"}, "duty"},
		{"a frequency without a duty", Command{Actuator: "fan", Token: "1", State: "on", Frequency: "1000"}, "frequency"},
		{"a frequency above 1000000", Command{Actuator: "fan", Token: "1", Duty: "50", Frequency: "1000001"}, "frequency"},
		{"an id of 129 bytes", Command{Actuator: "pump", Token: "1", ID: long, State: "on"}, "id"},
		{"a holder of 129 bytes", Command{Actuator: "pump", Token: "1", Holder: long, State: "on"}, "holder"},
		{"no actuator", Command{Token: "1", State: "on"}, "actuator"},
		{"an actuator with a wildcard", Command{Actuator: "pump/#", Token: "1", State: "on"}, "actuator"},
		// What a broker refuses in a topic (wire.CheckTopicText) cannot be
		// in the command topic either.
		{"an actuator with a line feed", Command{Actuator: "pump\n", Token: "1", State: "on"}, "actuator"},
		{"an actuator with U+0085", Command{Actuator: "pump\u0085", Token: "1", State: "on"}, "actuator"},
		{"an actuator with U+FFFF", Command{Actuator: "pump\uffff", Token: "1", State: "on"}, "actuator"},
		{"an actuator with U+0000", Command{Actuator: "pump\x00", Token: "1", State: "on"}, "actuator"},
		// A duty is a number: the gateway refuses a JSON string, and a
		// client must not read one into a number for it.
		{"a duty given as the string 4_2", dutyGiven("string", "4_2"), "duty"},
		{"a duty given as the string \" 42 \"", dutyGiven("string", " 42 "), "duty"},
		{"a duty given as the string -0", dutyGiven("string", "-0"), "duty"},
		{"a duty given as the string 50", dutyGiven("string", "50"), "duty"},
		{"a duty of NaN", dutyGiven("number", "NaN"), "duty"},
		{"a duty of Infinity", dutyGiven("number", "Infinity"), "duty"},
		{"a duty of 1e999 (infinite as a double)", dutyGiven("number", "1e999"), "duty"},
		{"a duty of true", dutyGiven("bool", "true"), "duty"},
		{"a duty of 100.001", dutyGiven("number", "100.001"), "duty"},
		{"a duty of 0.001", dutyGiven("number", "0.001"), "duty"},
	}
}

func answerCases() []AnswerCase {
	on, off := fence.StateOn, fence.StateOff
	f := func(t, s uint64) fence.Fence { return fence.Fence{Token: t, Seq: s} }
	cmd := fence.Command{Actuator: "pump", ID: "b-2", Holder: "controller-b", Fence: f(42, 1), State: on}
	other := func(mod func(*fence.Command)) fence.Command { c := cmd; mod(&c); return c }
	res := func(o fence.Outcome, mod func(*fence.Result)) fence.Result {
		r := fence.Result{ID: cmd.ID, Actuator: cmd.Actuator, Outcome: o, Command: cmd.Fence, Fence: cmd.Fence, State: on}
		if mod != nil {
			mod(&r)
		}
		return r
	}
	type in struct {
		name string
		c    fence.Command
		r    fence.Result
	}
	setpoint := other(func(c *fence.Command) { c.Actuator, c.Setpoint, c.Duty, c.State = "fan", true, 4250, on })
	d4250, d3000 := fence.Duty(4250), fence.Duty(3000)
	blocking := fence.Output{Actuator: "pump-reverse", Scope: "pump", State: on, Fence: f(40, 0), Holder: "controller-a", ChangedAt: time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)}
	ins := []in{
		{"applied", cmd, res(fence.Applied, nil)},
		{"duplicate: an answer to a resend of an applied command", cmd, res(fence.Duplicate, nil)},
		{"applied, a fence-only command: no state asked, the state reported", other(func(c *fence.Command) { c.State = fence.StateNone }),
			res(fence.Applied, func(r *fence.Result) { r.State = off })},
		{"stale: another holder's token is newer; the answer carries its fence and the state", cmd,
			res(fence.Stale, func(r *fence.Result) {
				r.Fence, r.State, r.Error = f(43, 0), off, "token 42/1 is not above the scope's fence 43/0: a newer holder has taken the scope"
			})},
		{"stale under the largest token", other(func(c *fence.Command) { c.Fence = f(fence.MaxToken-1, 0) }),
			res(fence.Stale, func(r *fence.Result) { r.Command, r.Fence, r.State = f(fence.MaxToken-1, 0), f(fence.MaxToken, 0), off })},
		{"applied under the largest token and seq", other(func(c *fence.Command) { c.Fence = f(fence.MaxToken, fence.MaxSeq) }),
			res(fence.Applied, func(r *fence.Result) {
				r.Command, r.Fence = f(fence.MaxToken, fence.MaxSeq), f(fence.MaxToken, fence.MaxSeq)
			})},
		{"rejected: an unknown actuator; fence and state unknown", other(func(c *fence.Command) { c.Actuator = "pmup" }),
			fence.Result{ID: "b-2", Actuator: "pmup", Outcome: fence.Rejected, Reason: fence.ReasonUnknownActuator, Command: f(42, 1), Error: `unknown actuator "pmup"`}},
		{"rejected as invalid, before its token was read: token and seq 0 match", cmd,
			res(fence.Rejected, func(r *fence.Result) {
				r.Reason, r.Command, r.Fence, r.State, r.Error = fence.ReasonInvalid, fence.Fence{}, fence.Fence{}, fence.StateNone, "state must be \"on\" or \"off\""
			})},
		{"rejected as invalid, its token read but not its seq", cmd,
			res(fence.Rejected, func(r *fence.Result) {
				r.Reason, r.Command, r.Error = fence.ReasonInvalid, f(42, 0), "pulse_ms must be an integer"
			})},
		{"rejected: an interlock's other member is on", cmd,
			res(fence.Rejected, func(r *fence.Result) {
				r.Reason, r.Fence, r.State, r.Blocking, r.Error = fence.ReasonInterlock, f(41, 0), off, &blocking, "pump-reverse is on"
			})},
		{"rejected: a signature that does not verify", cmd,
			res(fence.Rejected, func(r *fence.Result) {
				r.Reason, r.Fence, r.Error = fence.ReasonBadSignature, f(41, 0), "the signature does not verify"
			})},
		{"rejected: the scope is tripped", cmd,
			res(fence.Rejected, func(r *fence.Result) {
				r.Reason, r.Fence, r.State, r.Error = fence.ReasonTrip, f(41, 0), off, "tripped"
			})},
		{"failed: the fence could not be recorded; nothing driven", cmd,
			res(fence.Failed, func(r *fence.Result) { r.Fence, r.State, r.Error = f(41, 0), off, "store: input/output error" })},
		{"applied, but the output reads back otherwise", cmd, res(fence.Applied, func(r *fence.Result) { r.Actual = "unknown" })},
		{"duplicate, but a later command has since switched it off", cmd,
			res(fence.Duplicate, func(r *fence.Result) { r.State = off })},
		{"applied, a pulse: its record in the answer", other(func(c *fence.Command) { c.Actuator, c.State, c.Pulse = "door", fence.StateNone, 1500*time.Millisecond }),
			fence.Result{ID: "b-2", Actuator: "door", Outcome: fence.Applied, Command: f(42, 1), Fence: f(42, 1), State: on,
				Pulse: &fence.Pulse{ID: "b-2", Fence: f(42, 1), Width: 1500 * time.Millisecond, Status: "running"}}},
		{"applied, a set-point: the recorded duty in the answer", setpoint, res(fence.Applied, func(r *fence.Result) { r.Actuator, r.Duty = "fan", &d4250 })},
		{"applied, a set-point, but it reads back at another duty", setpoint,
			res(fence.Applied, func(r *fence.Result) { r.Actuator, r.Duty, r.ActualDuty = "fan", &d4250, &d3000 })},
		{"duplicate of a set-point, but a later command has since set another", setpoint,
			res(fence.Duplicate, func(r *fence.Result) { r.Actuator, r.Duty = "fan", &d3000 })},
		{"rejected: a set-point outside the output's min and max", setpoint,
			res(fence.Rejected, func(r *fence.Result) {
				r.Actuator, r.Reason, r.Fence, r.Duty, r.Error = "fan", fence.ReasonRange, f(41, 0), &d3000, "duty 42.5% is outside fan's range, 50 to 90 %"
			})},
		{"rejected: a set-point step faster than the output's max_rate; its pair raised the fence", setpoint,
			res(fence.Rejected, func(r *fence.Result) {
				r.Actuator, r.Reason, r.Duty, r.Error = "fan", fence.ReasonRate, &d3000, "fan may change by at most 1% per second (max_rate)"
			})},
		{"applied, a non-ASCII id", other(func(c *fence.Command) { c.ID = "ключ-7" }), res(fence.Applied, func(r *fence.Result) { r.ID = "ключ-7" })},
		{"not this command's: another id", cmd, res(fence.Applied, func(r *fence.Result) { r.ID = "b-3" })},
		{"not this command's: the same id on another actuator", cmd, res(fence.Applied, func(r *fence.Result) { r.Actuator = "valve" })},
		{"not this command's: the same id and token, an earlier seq", cmd,
			res(fence.Stale, func(r *fence.Result) { r.Command, r.Fence = f(42, 0), f(42, 1) })},
		{"not this command's: the same id, another token", cmd, res(fence.Applied, func(r *fence.Result) { r.Command, r.Fence = f(41, 1), f(41, 1) })},
	}
	var out []AnswerCase
	for _, x := range ins {
		a := AnswerCase{Name: x.name, Command: commandOf(x.c), Answer: string(wire.EncodeResult(x.r)), Matches: client.Answers(x.c, x.r),
			Outcome: string(x.r.Outcome), Reason: x.r.Reason, Fence: Fence{strconv.FormatUint(x.r.Fence.Token, 10), strconv.FormatUint(x.r.Fence.Seq, 10)},
			State: x.r.State.String(), Action: action(x.c, x.r)}
		if x.r.Duty != nil {
			a.Duty = x.r.Duty.String()
		}
		out = append(out, a)
	}
	return out
}

// action is what a controller does with r, an answer that may be to c.
func action(c fence.Command, r fence.Result) string {
	if !client.Answers(c, r) {
		return "ignore"
	}
	err := client.ErrorOf(c, r)
	var (
		se *client.StaleError
		re *client.RejectedError
		fe *client.FailedError
		oe *client.OutputError
	)
	switch {
	case err == nil:
		return "done"
	case errors.As(err, &se):
		return "reacquire"
	case errors.As(err, &re):
		return "report"
	case errors.As(err, &fe):
		return "retry-later"
	case errors.As(err, &oe):
		return "reread"
	}
	return "error: " + err.Error()
}

const (
	commandsAbout = "fencegate's command encodings, byte for byte, for every client of the protocol (docs/protocol.md, Commands and Signed commands). " +
		"token, seq and pulse_ms are decimal strings here (JavaScript's numbers lose digits above 2^53); in the payload they are JSON integers. " +
		"duty is a set-point's percent as the payload writes it (at most two decimals); in the payload it is a JSON number, and the canonical bytes carry the state \"duty\" and the duty in hundredths of a percent, then frequency (hertz, a decimal string here, an integer in the payload) if the command has one. " +
		"canonical is the hex of the bytes a signature covers (for an unsigned command too); sig and payload are what the client sends on topic. " +
		"Every refused command is one a client refuses to send: the gateway would reject it as malformed; why names the field at fault. " +
		"duty_given is a duty as a program hands it to a client where that is not the number duty writes: type string (a text), number (value is its JavaScript and Python spelling: NaN, Infinity, 1e999, -0) or bool; a client refuses each of the refused, and sends each of the cases' as duty says. " +
		"reply_topics are the reply topics a client makes of its client_id and username (<prefix>/<gateway>/reply/[<username>/]<client_id>) or, given asked, takes as they are, and those it refuses before it connects: why names what is at fault (client_id, username, reply: the topic asked for). " +
		"Characters a broker refuses in a topic (control characters, surrogates, non-characters) are written as \\u escapes; a lone surrogate (\\ud800) is one a JavaScript or Python string can hold, and Go holds as the three bytes ED A0 80, which are not UTF-8."
	answersAbout = "fencegate's answers (docs/protocol.md, Answers and Outcomes) and what a controller does with each. " +
		"matches: whether answer is the answer to command (same id, actuator, token and seq; a rejected invalid answer also with token or seq 0); " +
		"fence is the scope's fence the answer carries; state the actuator's recorded state (\"\" when the answer has none); duty a set-point output's recorded duty."
)

var actions = []string{
	"done: applied or duplicate, and the output is as asked: the command took effect",
	"reacquire: stale: a newer holder has the scope; stop acting under this token, never resend with it; reread the state, acquire the lease again",
	"report: rejected: nothing changed; the command or the configuration is at fault (reason says which); the same command gets the same answer",
	"retry-later: failed: the gateway could not record or drive; retry with a higher seq once it is healthy",
	"reread: applied or duplicate, but the output is not in the state asked (actual differs, or a later command changed it): reread the state; to set it, send a new command",
	"ignore: not an answer to this command (another command's, or another controller's on a shared topic); keep waiting",
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestUpdate(t *testing.T) {
	if !*update {
		t.Skip("writes the vector files with -update")
	}
	writeJSON(t, "commands.json", Commands{About: commandsAbout, Cases: commandCases(), Refused: refused(), ReplyTopics: replyCases(t)})
	writeJSON(t, "answers.json", Answers{About: answersAbout, Actions: actions, Cases: answerCases()})
}

// The Go client encodes and signs every command of commands.json byte for
// byte, the first three as protocol.md's vectors say, and refuses every
// refused one.
func TestCommands(t *testing.T) {
	var v Commands
	readJSON(t, "commands.json", &v)
	if len(v.Cases) < len(protocolSigs) {
		t.Fatalf("commands.json has %d cases", len(v.Cases))
	}
	for i, s := range protocolSigs {
		if v.Cases[i].Sig != s {
			t.Errorf("case %d (%s): sig %s, protocol.md says %s", i, v.Cases[i].Name, v.Cases[i].Sig, s)
		}
	}
	for _, cc := range v.Cases {
		c := cc.Command.fence(t)
		topics := wire.Topics{Prefix: cc.Prefix, GatewayID: cc.Gateway}
		if got := topics.Set(c.Actuator); got != cc.Topic {
			t.Errorf("%s: topic %s, want %s", cc.Name, got, cc.Topic)
		}
		if got := hex.EncodeToString(sign.Canonical(cc.Gateway, c)); got != cc.Canonical {
			t.Errorf("%s: canonical\n %s\nwant\n %s", cc.Name, got, cc.Canonical)
		}
		if cc.Signing != nil {
			seed, _ := hex.DecodeString(cc.Signing.Seed)
			key := ed25519.NewKeyFromSeed(seed)
			if got := sign.FormatPublicKey(key.Public().(ed25519.PublicKey)); got != cc.Signing.PublicKey {
				t.Errorf("%s: public key %s, want %s", cc.Name, got, cc.Signing.PublicKey)
			}
			c = sign.Sign(key, cc.Signing.Signer, cc.Gateway, c)
			if got := base64.StdEncoding.EncodeToString(c.Sig); got != cc.Sig {
				t.Errorf("%s: sig %s, want %s", cc.Name, got, cc.Sig)
			}
		}
		if err := wire.CheckCommand(c); err != nil {
			t.Errorf("%s: CheckCommand: %v", cc.Name, err)
		}
		if got := string(wire.EncodeRequest(wire.Request{Command: c, Reply: cc.Reply})); got != cc.Payload {
			t.Errorf("%s: payload\n %s\nwant\n %s", cc.Name, got, cc.Payload)
		}
		// The gateway reads it back as it was made.
		r, err := wire.DecodeRequest(c.Actuator, []byte(cc.Payload))
		if err != nil || r.Reply != cc.Reply {
			t.Errorf("%s: the gateway reads the payload as %+v, %v", cc.Name, r, err)
		}
	}
	for _, rc := range v.Refused {
		u := func(s string) (uint64, bool) {
			if s == "" {
				return 0, true
			}
			x, err := strconv.ParseUint(s, 10, 64)
			return x, err == nil
		}
		tok, okT := u(rc.Command.Token)
		seq, okS := u(rc.Command.Seq)
		if !okT || !okS {
			continue // beyond a uint64: a Go command cannot hold it
		}
		c := rc.Command
		c.Token, c.Seq = num(tok), num(seq)
		if err := wire.CheckCommand(c.fence(t)); err == nil {
			t.Errorf("refused %q: CheckCommand accepts it", rc.Name)
		} else {
			t.Logf("refused %q: %v", rc.Name, err)
		}
	}
}

// The Go client reads every answer of answers.json as it says, and does
// what it says with it.
func TestAnswers(t *testing.T) {
	var v Answers
	readJSON(t, "answers.json", &v)
	for _, ac := range v.Cases {
		c := ac.Command.fence(t)
		r, err := wire.DecodeResult([]byte(ac.Answer))
		if err != nil {
			t.Errorf("%s: %v", ac.Name, err)
			continue
		}
		if got := client.Answers(c, r); got != ac.Matches {
			t.Errorf("%s: Answers = %v, want %v", ac.Name, got, ac.Matches)
		}
		got := AnswerCase{Name: ac.Name, Command: ac.Command, Answer: ac.Answer, Matches: ac.Matches, Outcome: string(r.Outcome), Reason: r.Reason,
			Fence: Fence{strconv.FormatUint(r.Fence.Token, 10), strconv.FormatUint(r.Fence.Seq, 10)}, State: r.State.String(), Action: action(c, r)}
		if r.Duty != nil {
			got.Duty = r.Duty.String()
		}
		if got != ac {
			t.Errorf("%s:\n got %+v\nwant %+v", ac.Name, got, ac)
		}
	}
}
