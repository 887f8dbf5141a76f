package wire

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/fencegate/fencegate/fence"
)

// CheckCommand returns an error if the gateway would reject c as
// malformed, or if c could not reach it: a controller checks before it
// publishes, so that a command without a token (or with a state, pulse
// or text the gateway refuses) is refused where it is made, with nothing
// sent. The rule is the gateway's own decoder: c is encoded and decoded,
// and must come back unchanged.
func CheckCommand(c fence.Command) error {
	if c.Actuator == "" || !utf8.ValidString(c.Actuator) || strings.ContainsAny(c.Actuator, "+#/\x00") {
		return fmt.Errorf("actuator %q is not an actuator's name (letters, digits, _ and -)", c.Actuator)
	}
	if c.Fence.Token == 0 {
		return errors.New("a command needs a token (from 1 to 2^63-1): its lease's fencing token")
	}
	if c.State != fence.StateNone && c.State != fence.StateOn && c.State != fence.StateOff {
		return fmt.Errorf("state %d is neither on nor off", c.State)
	}
	if c.Pulse > 0 && c.State == fence.StateOff {
		return errors.New(`a pulse with state "off": a pulse returns to rest by itself; send the pulse alone`)
	}
	if c.Pulse%1e6 != 0 {
		return fmt.Errorf("pulse %v is not whole milliseconds", c.Pulse)
	}
	for _, f := range []struct{ key, v string }{{"id", c.ID}, {"holder", c.Holder}, {"signer", c.Signer}} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%s %q is not valid UTF-8", f.key, f.v)
		}
	}
	got, err := DecodeCommand(c.Actuator, EncodeCommand(c))
	if err != nil {
		return err
	}
	want := c
	want.State = c.Asks()
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("the command would reach the gateway as %+v, not as %+v", got, want)
	}
	return nil
}
