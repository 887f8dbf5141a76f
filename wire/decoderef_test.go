package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/fencegate/fencegate/fence"
)

// decodeCommandRef is DecodeRequest as a plain streaming decoder that
// reads a command's id twice: the differential tests hold the fast and
// single-pass one to it.
func decodeCommandRef(actuator string, payload []byte) (Request, error) {
	if len(payload) > MaxPayload {
		c, err := Oversized(actuator, len(payload), payload[:MaxPayload])
		return Request{Command: c}, err
	}
	// Read the id first, on its own, so that even a command rejected for a
	// later field is answered with its id.
	var r Request
	c := &r.Command
	c.Actuator, c.ID = actuator, peekID(payload)
	if len(bytes.TrimSpace(payload)) == 0 {
		return r, errors.New("empty payload; want a JSON object with a token")
	}
	if !utf8.Valid(payload) {
		return r, errors.New("payload is not valid UTF-8")
	}

	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return r, fmt.Errorf("payload is not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return r, errors.New("payload must be a JSON object")
	}
	seen := make(map[string]bool)
	var hasToken bool
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return r, fmt.Errorf("payload is not JSON: %v", err)
		}
		key := kt.(string) // object keys are always strings
		if seen[key] {
			return r, fmt.Errorf("field %q appears twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return r, fmt.Errorf("payload is not JSON: %v", err)
		}
		raw = asSent(payload, dec.InputOffset(), raw)
		switch key {
		case "id":
			c.ID, err = text(key, raw)
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
			var s string
			if s, err = str(key, raw); err == nil {
				r.Reply = s
			}
		case "reset":
			if string(raw) != "true" {
				err = fmt.Errorf("reset must be true (or left out), got %s", abbrev(raw))
			}
			c.Reset = true
		default:
			err = fmt.Errorf("unknown field %q (fields: id, token, seq, state, pulse_ms, duty, frequency, reset, holder, signer, sig, reply)", key)
		}
		if err != nil {
			return r, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return r, fmt.Errorf("payload is not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return r, errors.New("payload has data after the JSON object")
	}
	if !hasToken {
		return r, errors.New("token is required (an integer from 1 to 2^63-1)")
	}
	if seen["signer"] != seen["sig"] {
		return r, errors.New("signer and sig go together: a signed command has both, an unsigned one neither")
	}
	if c.Reset && (seen["state"] || c.Pulse > 0 || c.Setpoint) {
		return r, errors.New("reset goes with a fence-only command (no state, pulse_ms or duty): it releases a tripped scope and drives nothing")
	}
	if c.Setpoint && (seen["state"] || c.Pulse > 0) {
		return r, errors.New(`duty goes alone: it sets a set-point output (0 is off), which takes neither state nor pulse_ms`)
	}
	if c.Frequency > 0 && !c.Setpoint {
		return r, errors.New(`frequency goes with duty: it is the frequency a PWM output runs a set-point at`)
	}
	if c.Setpoint {
		c.State = c.Duty.State()
	}
	if c.Pulse > 0 {
		if c.State == fence.StateOff {
			return r, errors.New(`pulse_ms with state "off": a pulse returns to rest by itself; send pulse_ms alone`)
		}
		c.State = fence.StateOn
	}
	return r, nil
}

// DecodeCommand answers every payload as decodeCommandRef does: the same
// command (id included) and the same error text. The payloads: the test
// tables, the fuzz corpus, and a few thousand mutations of them (bytes
// changed, cut, doubled).
func TestDecodeCommandAsBefore(t *testing.T) {
	var seeds [][]byte
	for _, tt := range validCommands {
		seeds = append(seeds, []byte(tt.payload))
	}
	for _, tt := range badCommands {
		seeds = append(seeds, []byte(tt.payload))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzDecodeCommand", "*"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			seeds = append(seeds, b) // the corpus file's text, as a payload too
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	payloads := slices.Clone(seeds)
	for range 5000 {
		p := slices.Clone(seeds[rng.IntN(len(seeds))])
		switch rng.IntN(4) {
		case 0:
			if len(p) > 0 {
				p[rng.IntN(len(p))] = "{}[]\":,0-9.e \\\"idtoken"[rng.IntN(22)]
			}
		case 1:
			p = p[:rng.IntN(len(p)+1)]
		case 2:
			p = append(p, p...)
		case 3:
			if len(p) > 0 {
				i := rng.IntN(len(p))
				p = append(p[:i:i], append([]byte(`"id":"x",`), p[i:]...)...)
			}
		}
		payloads = append(payloads, p)
	}
	for _, p := range payloads {
		got, gerr := DecodeRequest("pump", p)
		want, werr := decodeCommandRef("pump", p)
		if !reflect.DeepEqual(got, want) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("DecodeCommand(%q) = %+v, %v\nbefore: %+v, %v", p, got, gerr, want, werr)
		}
	}
}
