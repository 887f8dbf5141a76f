package fencelog

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// encodeScope returns rec as encoding/json would, byte for byte (a test
// holds it to that), without its reflection: every applied command
// rewrites its scope's record, window of recent commands included, and
// json.Marshal took a sixth of the gateway's CPU under load.
func encodeScope(rec record) ([]byte, error) {
	if rec.unusual() || rec.Trip != "" {
		return json.Marshal(rec) // a pulse or set-point output's scope, a tripped one: rare enough
	}
	b := make([]byte, 0, 128+len(rec.Recent)*96+len(rec.Outputs)*96)
	b = append(b, `{"fence":`...)
	b = appendFence(b, rec.Fence)
	if len(rec.Recent) > 0 {
		b = append(b, `,"recent":[`...)
		for i, a := range rec.Recent {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, a.ID)
			b = append(b, `,"actuator":`...)
			b = appendString(b, a.Actuator)
			b = append(b, `,"fence":`...)
			b = appendFence(b, a.Fence)
			b = append(b, `,"state":`...)
			b = appendString(b, a.State.String())
			if r := a.Refused; r != nil {
				b = append(b, `,"refused":{"reason":`...)
				b = appendString(b, r.Reason)
				b = append(b, `,"error":`...)
				b = appendString(b, r.Error)
				if r.Blocker != "" {
					b = append(b, `,"blocker":`...)
					b = appendString(b, r.Blocker)
				}
				b = append(b, '}')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(rec.Outputs) > 0 {
		b = append(b, `,"outputs":{`...)
		names := make([]string, 0, len(rec.Outputs))
		for name := range rec.Outputs {
			names = append(names, name)
		}
		slices.Sort(names) // encoding/json sorts map keys
		for i, name := range names {
			o := rec.Outputs[name]
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, name)
			b = append(b, `:{"state":`...)
			b = appendString(b, o.State.String())
			if o.Holder != "" {
				b = append(b, `,"holder":`...)
				b = appendString(b, o.Holder)
			}
			b = append(b, `,"changed_at":`...)
			t, err := appendTime(b, o.ChangedAt)
			if err != nil {
				return nil, err
			}
			b = t
			if o.Why != "" {
				b = append(b, `,"why":`...)
				b = appendString(b, o.Why)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

func appendFence(b []byte, f fence.Fence) []byte {
	b = append(b, `{"token":`...)
	b = strconv.AppendUint(b, f.Token, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, f.Seq, 10)
	return append(b, '}')
}

// appendString appends s as a JSON string, as encoding/json writes it:
// plain ASCII directly, anything else (escapes, HTML characters, non-ASCII)
// by encoding/json itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendTime appends t as encoding/json writes a time.Time.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		q, err := json.Marshal(t) // its error, as json.Marshal of the record gives it
		return append(b, q...), err
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// encodeEntry returns e as encoding/json would, byte for byte (a test holds
// it to that), without its reflection: every applied command writes one.
func encodeEntry(e Entry) ([]byte, error) {
	b := make([]byte, 0, 192+len(e.Error)+len(e.Why))
	if e.Seq != 0 {
		b = append(b, `{"seq":`...)
		b = strconv.AppendUint(b, e.Seq, 10)
		b = append(b, `,"at":`...)
	} else {
		b = append(b, `{"at":`...)
	}
	b, err := appendTime(b, e.At)
	if err != nil {
		return nil, err
	}
	field := func(name, v string) {
		if v != "" {
			b = append(b, `,"`...)
			b = append(b, name...)
			b = append(b, `":`...)
			b = appendString(b, v)
		}
	}
	field("scope", e.Scope)
	b = append(b, `,"actuator":`...)
	b = appendString(b, e.Actuator)
	field("id", e.ID)
	field("holder", e.Holder)
	b = append(b, `,"command":`...)
	b = appendFence(b, e.Command)
	if e.State != fence.StateNone {
		b = append(b, `,"state":`...)
		b = appendString(b, e.State.String())
	}
	if e.Duty != 0 {
		b = append(b, `,"duty":`...)
		b = append(b, e.Duty.String()...)
	}
	b = append(b, `,"outcome":`...)
	b = appendString(b, string(e.Outcome))
	field("reason", e.Reason)
	b = append(b, `,"fence":`...)
	b = appendFence(b, e.Fence)
	field("error", e.Error)
	field("why", e.Why)
	field("signer", e.Signer)
	return append(b, '}'), nil
}

// unusual reports whether rec records a pulse or a set-point, which
// encodeScope leaves to encoding/json.
func (rec record) unusual() bool {
	for _, a := range rec.Recent {
		if a.Pulse != 0 || a.PulseStatus != "" || a.Setpoint {
			return true
		}
	}
	for _, o := range rec.Outputs {
		if o.Pulse != nil || o.Duty != 0 || o.Frequency != 0 {
			return true
		}
	}
	return false
}
