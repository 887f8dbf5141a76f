package habridge

import (
	"testing"

	"github.com/fencegate/fencegate/fence"
)

// Home Assistant's payloads: a switch's on and off, in any case; a
// number's float, taken to the protocol's step (0.01 %), whatever a
// slider's arithmetic left in it; anything else refused with what is
// wanted, so that nothing is sent.
func TestParseRequest(t *testing.T) {
	for _, c := range []struct {
		payload  string
		setpoint bool
		want     request
	}{
		{"on", false, request{state: fence.StateOn}},
		{" OFF\n", false, request{state: fence.StateOff}},
		{"42", true, request{setpoint: true, duty: 4200, state: fence.StateOn}},
		{"42.5", true, request{setpoint: true, duty: 4250, state: fence.StateOn}},
		{"42.300000000000004", true, request{setpoint: true, duty: 4230, state: fence.StateOn}},
		{"57.99999999999999", true, request{setpoint: true, duty: 5800, state: fence.StateOn}},
		{"0", true, request{setpoint: true, state: fence.StateOff}},
		{"0.0", true, request{setpoint: true, state: fence.StateOff}},
		{"100", true, request{setpoint: true, duty: fence.FullDuty, state: fence.StateOn}},
	} {
		got, err := parseRequest(c.payload, c.setpoint)
		if err != nil || got != c.want {
			t.Errorf("parseRequest(%q, %v) = %+v, %v; want %+v", c.payload, c.setpoint, got, err, c.want)
		}
	}
	for _, c := range []struct {
		payload  string
		setpoint bool
	}{
		{"toggle", false}, {"1", false}, {"42", false}, {"", false},
		{"on", true}, {"150", true}, {"100.01", true}, {"-1", true}, {"-0.001", true}, {"NaN", true}, {"Inf", true}, {"", true}, {"4 2", true},
	} {
		if got, err := parseRequest(c.payload, c.setpoint); err == nil {
			t.Errorf("parseRequest(%q, %v) = %+v; want an error", c.payload, c.setpoint, got)
		}
	}
}
