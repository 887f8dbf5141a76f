package wire

import (
	"errors"
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/fencegate/fencegate/fence"
)

// CheckCommand returns an error if the gateway would reject c as
// malformed, or if c could not reach it: see EncodeChecked.
func CheckCommand(c fence.Command) error {
	_, err := EncodeChecked(Request{Command: c})
	return err
}

// EncodeChecked is EncodeRequest for a controller that checks before it
// publishes, so that a command without a token (or with a state, pulse or
// text the gateway refuses) is refused where it is made, with nothing
// sent: it returns an error if the gateway would reject r as malformed,
// or if r could not reach it. The rule is the gateway's own decoder: the
// payload is decoded, and must give r back unchanged.
func EncodeChecked(r Request) ([]byte, error) {
	c := r.Command
	if err := CheckLevel(c.Actuator); err != nil {
		return nil, fmt.Errorf("actuator %q is not an actuator's name (letters, digits, _ and -): %v", c.Actuator, err)
	}
	if c.Fence.Token == 0 {
		return nil, errors.New("a command needs a token (from 1 to 2^63-1): its lease's fencing token")
	}
	if c.State != fence.StateNone && c.State != fence.StateOn && c.State != fence.StateOff {
		return nil, fmt.Errorf("state %d is neither on nor off", c.State)
	}
	if c.Pulse > 0 && c.State == fence.StateOff {
		return nil, errors.New(`a pulse with state "off": a pulse returns to rest by itself; send the pulse alone`)
	}
	if c.Setpoint && (c.Pulse > 0 || c.Reset) {
		return nil, errors.New("a set-point command carries its duty alone: no pulse, no reset")
	}
	if c.Frequency > 0 && (!c.Setpoint || c.Frequency > fence.MaxFrequency) {
		return nil, fmt.Errorf("frequency %d: it goes with a duty, 1 to %d hertz", c.Frequency, fence.MaxFrequency)
	}
	if c.Setpoint && !c.Duty.Valid() {
		return nil, fmt.Errorf("duty %d hundredths of a percent is above 100 %%", uint16(c.Duty))
	}
	if c.Pulse%1e6 != 0 {
		return nil, fmt.Errorf("pulse %v is not whole milliseconds", c.Pulse)
	}
	for _, f := range []struct{ key, v string }{{"id", c.ID}, {"holder", c.Holder}, {"signer", c.Signer}} {
		if !utf8.ValidString(f.v) {
			return nil, fmt.Errorf("%s %q is not valid UTF-8", f.key, f.v)
		}
	}
	payload := EncodeRequest(r)
	got, err := DecodeRequest(c.Actuator, payload)
	if err != nil {
		return nil, err
	}
	want := r
	want.State = c.Asks()
	if !reflect.DeepEqual(got, want) {
		return nil, fmt.Errorf("the command would reach the gateway as %+v, not as %+v", got, want)
	}
	return payload, nil
}
