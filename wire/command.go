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

// MaxPayload is the largest command payload accepted, in bytes.
const MaxPayload = 1024

// MaxText is the largest id, holder or signer accepted, in bytes.
const MaxText = 128

// A Request is a command as a controller sends it: the command, and where
// its answer goes. The reply topic is the transport's business, not the
// fence's: it decides where the answer is published, never what is
// recorded or driven, so it is neither part of the command the core
// decides nor covered by a signature (see docs/protocol.md).
type Request struct {
	fence.Command
	// Reply is the topic the answer goes to (see Topics.CheckReply);
	// empty: the actuator's shared result topic.
	Reply string
}

// DecodeRequest parses a command payload for actuator. It is strict: the
// payload must be one JSON object with only the fields id, token, seq, state,
// pulse_ms, duty, frequency, reset, holder, signer, sig and reply, each at most once and of
// the right type; signer and sig come together or not at all, and sig is
// the standard base64 (with padding) of a 64-byte signature. It does not
// verify the signature (package sign does, against the gateway's
// configuration), nor the reply topic (Topics.CheckReply does). On error
// the returned Request still carries whatever could be read (its ID and
// reply topic, for the answer).
//
// A payload without "state" is a fence-only command.
//
// Nothing is parsed beyond MaxPayload bytes: a larger payload is refused
// (see Oversized) after a look at its first MaxPayload bytes for its id.
func DecodeRequest(actuator string, payload []byte) (Request, error) {
	if len(payload) > MaxPayload {
		c, err := Oversized(actuator, len(payload), payload[:MaxPayload])
		return Request{Command: c}, err
	}
	r, idRead, err := decodeCommand(actuator, payload)
	if err != nil && !idRead {
		// A command rejected before its id was read is still answered
		// with its id: look for it on its own.
		r.ID = peekID(payload)
	}
	return r, err
}

// DecodeCommand is DecodeRequest for a receiver that answers on the
// shared result topic: the command alone.
func DecodeCommand(actuator string, payload []byte) (fence.Command, error) {
	r, err := DecodeRequest(actuator, payload)
	return r.Command, err
}

// decodeCommand is DecodeRequest without the look for the id of a command
// it rejects; idRead says whether it read the id field itself.
func decodeCommand(actuator string, payload []byte) (r Request, idRead bool, _ error) {
	c := &r.Command
	c.Actuator = actuator
	if len(bytes.TrimSpace(payload)) == 0 {
		return r, false, errors.New("empty payload; want a JSON object with a token")
	}
	if !utf8.Valid(payload) {
		return r, idRead, errors.New("payload is not valid UTF-8")
	}
	if fast, ok := decodeFast(actuator, payload); ok {
		return fast, true, nil
	}

	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return r, idRead, fmt.Errorf("payload is not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return r, idRead, errors.New("payload must be a JSON object")
	}
	seen := make(map[string]bool)
	var hasToken bool
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return r, idRead, fmt.Errorf("payload is not JSON: %v", err)
		}
		key := kt.(string) // object keys are always strings
		if seen[key] {
			return r, idRead, fmt.Errorf("field %q appears twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return r, idRead, fmt.Errorf("payload is not JSON: %v", err)
		}
		raw = asSent(payload, dec.InputOffset(), raw)
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
		case "duty":
			c.Duty, err = duty(raw)
			c.Setpoint = true
		case "frequency":
			var f uint64
			f, err = integer(key, raw, 1, fence.MaxFrequency)
			c.Frequency = uint32(f)
		case "reply":
			r.Reply, err = str(key, raw)
		case "reset":
			if string(raw) != "true" {
				err = fmt.Errorf("reset must be true (or left out), got %s", abbrev(raw))
			}
			c.Reset = true
		default:
			err = fmt.Errorf("unknown field %q (fields: id, token, seq, state, pulse_ms, duty, frequency, reset, holder, signer, sig, reply)", key)
		}
		if err != nil {
			return r, idRead, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return r, idRead, fmt.Errorf("payload is not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return r, idRead, errors.New("payload has data after the JSON object")
	}
	if !hasToken {
		return r, idRead, errors.New("token is required (an integer from 1 to 2^63-1)")
	}
	if seen["signer"] != seen["sig"] {
		return r, idRead, errors.New("signer and sig go together: a signed command has both, an unsigned one neither")
	}
	if c.Reset && (seen["state"] || c.Pulse > 0 || c.Setpoint) {
		return r, idRead, errors.New("reset goes with a fence-only command (no state, pulse_ms or duty): it releases a tripped scope and drives nothing")
	}
	if c.Setpoint && (seen["state"] || c.Pulse > 0) {
		return r, idRead, errors.New(`duty goes alone: it sets a set-point output (0 is off), which takes neither state nor pulse_ms`)
	}
	if c.Frequency > 0 && !c.Setpoint {
		return r, idRead, errors.New(`frequency goes with duty: it is the frequency a PWM output runs a set-point at`)
	}
	if c.Pulse > 0 && c.State == fence.StateOff {
		return r, idRead, errors.New(`pulse_ms with state "off": a pulse returns to rest by itself; send pulse_ms alone`)
	}
	c.State = c.Asks()
	return r, idRead, nil
}

// maxPulseMs is fence.MaxPulse in the unit of pulse_ms.
const maxPulseMs = uint64(fence.MaxPulse / time.Millisecond)

// duty decodes duty: a number of percent, 0 to 100, in steps of 0.01.
func duty(raw json.RawMessage) (fence.Duty, error) {
	if len(raw) > 0 && raw[0] == '"' {
		return 0, fmt.Errorf("duty must be a number of percent from 0 to 100, got the string %s", abbrev(raw))
	}
	if len(raw) > 0 && raw[0] == '-' {
		return 0, fmt.Errorf("duty must be a number of percent from 0 to 100, got negative %s", abbrev(raw))
	}
	d, err := fence.ParseDuty(string(raw))
	if err != nil {
		return 0, fmt.Errorf("duty: %s", strings.Replace(err.Error(), "got "+string(raw), "got "+abbrev(raw), 1))
	}
	return d, nil
}

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

// text decodes a string field of at most MaxText bytes.
func text(key string, raw json.RawMessage) (string, error) {
	s, err := str(key, raw)
	if err != nil {
		return "", err
	}
	if len(s) > MaxText {
		return "", fmt.Errorf("%s is %d bytes; the limit is %d", key, len(s), MaxText)
	}
	return s, nil
}

// str decodes a string field. A lone surrogate escape (\ud800 without
// its pair) is refused: JSON decoders put U+FFFD in its place, and a
// reply topic, an id or a holder would then be another than the one
// sent (clients refuse them too).
func str(key string, raw json.RawMessage) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("%s must be a string, got %s", key, abbrev(raw))
	}
	if esc, ok := loneSurrogate(raw); ok {
		return "", fmt.Errorf("%s holds a lone surrogate (%s): a character above U+FFFF is escaped as a pair, or sent as UTF-8", key, esc)
	}
	return s, nil
}

// loneSurrogate finds, in a JSON string that decodes, an escape \uD800 to
// \uDFFF that is not a high surrogate followed by a low one.
func loneSurrogate(raw []byte) (string, bool) {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // an escape of one character: skip it, a \\ included
			continue
		}
		switch {
		case r >= 0xd800 && r <= 0xdbff:
			if lo, ok := hex4(i + 6); ok && lo >= 0xdc00 && lo <= 0xdfff {
				i += 11
				continue
			}
			return string(raw[i : i+6]), true
		case r >= 0xdc00 && r <= 0xdfff:
			return string(raw[i : i+6]), true
		}
		i += 5
	}
	return "", false
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
	if len(s) > 1 && s[0] == '0' && s[1] >= '0' && s[1] <= '9' {
		return 0, fmt.Errorf("%s, got %s (a JSON number has no leading zero)", want, abbrev(raw))
	}
	if len(s) > 1 && s[0] == '0' {
		// 0xff, 0b101: what a person used to other notations writes.
		if v, err := strconv.ParseUint(s, 0, 64); err == nil {
			return 0, fmt.Errorf("%s, got %s (JSON numbers are decimal; %s is %d)", want, abbrev(raw), abbrev(raw), v)
		}
		return 0, fmt.Errorf("%s, got %s (not a JSON number; JSON numbers are decimal)", want, abbrev(raw))
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

// asSent returns the value that payload holds up to end, as it was sent:
// raw (its value, as encoding/json read it), unless raw is a 0 that digits
// or letters follow ("0102", "0xff"). JSON allows no leading zero and has
// no hexadecimal numbers, and encoding/json reads such a number as 0
// followed by a stray character, so an error about the value would quote
// 0, not what was sent.
func asSent(payload []byte, end int64, raw json.RawMessage) json.RawMessage {
	if (string(raw) != "0" && string(raw) != "-0") || end >= int64(len(payload)) || !numberChar(payload[end]) || payload[end] == '.' {
		return raw
	}
	i := end
	for i < int64(len(payload)) && numberChar(payload[i]) {
		i++
	}
	return payload[end-int64(len(raw)) : i]
}

// numberChar reports a byte that may continue what a person meant as a
// number: a digit, a letter (0x1f, 1e3), a point or a sign.
func numberChar(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '.' || b == '+' || b == '-' || b == '_'
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

// EncodeCommand is EncodeRequest without a reply topic: the answer goes
// to the actuator's shared result topic.
func EncodeCommand(c fence.Command) []byte { return EncodeRequest(Request{Command: c}) }

// EncodeRequest is the inverse of DecodeRequest, for controllers.
//
// Its output is never longer than a payload DecodeRequest accepted for the
// same request, so it never exceeds MaxPayload: strings are escaped only
// where JSON requires it (encoding/json would also escape <, >, & and U+2028,
// up to six times longer) and seq is left out when it is 0.
func EncodeRequest(r Request) []byte {
	c := r.Command
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
	} else if c.Setpoint {
		b = append(append(b, `,"duty":`...), c.Duty.String()...)
		if c.Frequency > 0 {
			b = strconv.AppendUint(append(b, `,"frequency":`...), uint64(c.Frequency), 10)
		}
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
	if r.Reply != "" {
		b = appendString(append(b, `,"reply":`...), r.Reply)
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
