package wire

import (
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
)

func TestDecodeDuty(t *testing.T) {
	for in, want := range map[string]fence.Duty{
		`{"token":5,"duty":42.5}`:                 4250,
		`{"token":5,"duty":0}`:                    0,
		`{"token":5,"duty":100}`:                  10000,
		`{"token":5,"duty":0.01}`:                 1,
		`{"token":5,"duty":50,"frequency":25000}`: 5000,
	} {
		c, err := DecodeCommand("fan", []byte(in))
		if err != nil || !c.Setpoint || c.Duty != want || c.State != want.State() {
			t.Errorf("DecodeCommand(%s) = %+v, %v; want duty %d", in, c, err, want)
			continue
		}
		if back, err := DecodeCommand("fan", EncodeCommand(c)); err != nil || !back.Equal(c) {
			t.Errorf("EncodeCommand(%s) = %s, which decodes to %+v, %v", in, EncodeCommand(c), back, err)
		}
	}
	for in, says := range map[string]string{
		`{"token":5,"duty":150}`:                    "0 to 100",
		`{"token":5,"duty":"50"}`:                   "string",
		`{"token":5,"duty":-1}`:                     "negative",
		`{"token":5,"duty":1e2}`:                    "0 to 100",
		`{"token":5,"duty":42.125}`:                 "0.01",
		`{"token":5,"duty":true}`:                   "0 to 100",
		`{"token":5,"duty":50,"state":"on"}`:        "duty goes alone",
		`{"token":5,"duty":50,"pulse_ms":10}`:       "duty goes alone",
		`{"token":5,"duty":50,"reset":true}`:        "reset goes with a fence-only",
		`{"token":5,"frequency":100}`:               "frequency goes with duty",
		`{"token":5,"state":"on","frequency":100}`:  "frequency goes with duty",
		`{"token":5,"duty":50,"frequency":0}`:       "frequency must be an integer from 1 to 1000000",
		`{"token":5,"duty":50,"frequency":1000001}`: "frequency must be an integer from 1 to 1000000",
		`{"token":5,"duty":50,"frequency":2.5}`:     "frequency must be an integer",
	} {
		if c, err := DecodeCommand("fan", []byte(in)); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("DecodeCommand(%s) = %+v, %v; want an error saying %q", in, c, err, says)
		}
	}
}

func TestAnswerDuty(t *testing.T) {
	d, a := fence.Duty(4250), fence.Duty(0)
	r := fence.Result{ID: "x", Actuator: "fan", Outcome: fence.Applied, State: fence.StateOn, Duty: &d, ActualDuty: &a, Actual: "off"}
	b := EncodeResult(r)
	if !strings.Contains(string(b), `"duty":42.5,"actual_duty":0`) {
		t.Errorf("EncodeResult = %s, want duty 42.5 and actual_duty 0", b)
	}
	back, err := DecodeResult(b)
	if err != nil || back.Duty == nil || *back.Duty != d || back.ActualDuty == nil || *back.ActualDuty != a {
		t.Errorf("DecodeResult(%s) = %+v, %v", b, back, err)
	}
	o := fence.Output{Actuator: "fan", State: fence.StateOn, Duty: 7500}
	if s := EncodeState(o); !strings.Contains(string(s), `"duty":75`) {
		t.Errorf("EncodeState = %s, want duty 75", s)
	} else if back, err := DecodeState(s); err != nil || back.Duty != 7500 {
		t.Errorf("DecodeState(%s) = %+v, %v", s, back, err)
	}
}
