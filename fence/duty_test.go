package fence

import (
	"strings"
	"testing"
	"time"
)

func TestParseDuty(t *testing.T) {
	for in, want := range map[string]Duty{"0": 0, "100": 10000, "42": 4200, "42.5": 4250, "42.25": 4225, "0.01": 1, "99.99": 9999, "100.0": 10000, "7.50": 750} {
		got, err := ParseDuty(in)
		if err != nil || got != want {
			t.Errorf("ParseDuty(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "150", "100.01", "1e2", "42.125", "042", "4.", ".5", "abc", "1000", "+5", " 5"} {
		if got, err := ParseDuty(in); err == nil {
			t.Errorf("ParseDuty(%q) = %d, want an error", in, got)
		}
	}
	for d := Duty(0); d <= FullDuty; d++ {
		if back, err := ParseDuty(d.String()); err != nil || back != d {
			t.Fatalf("ParseDuty(%q) = %d, %v; want %d", d.String(), back, err, d)
		}
	}
}

func TestRampEffect(t *testing.T) {
	cur := Output{Actuator: "fan", State: StateOn, Duty: 3000}
	cmd := func(d Duty) Command { return Command{Actuator: "fan", Setpoint: true, Duty: d, State: d.State()} }
	const rate = 1000 // 10 % per second
	cases := []struct {
		to      Duty
		elapsed time.Duration
		refused bool
	}{
		{5000, 2 * time.Second, false}, // 20 points in 2 s
		{5001, 2 * time.Second, true},
		{1000, 2 * time.Second, false},
		{900, 2 * time.Second, true},
		{0, 0, false}, // off is always reachable
		{10000, time.Hour, false},
		{3500, -time.Second, true}, // a clock that went back allows nothing
	}
	for _, c := range cases {
		e := RampEffect(cmd(c.to), cur, c.elapsed, rate)
		if (e.Refusal != nil) != c.refused {
			t.Errorf("from 30%% to %s%% after %v: refusal %+v, want refused %v", c.to, c.elapsed, e.Refusal, c.refused)
		}
		if e.Refusal != nil && (e.Refusal.Reason != ReasonRate || !strings.Contains(e.Refusal.Error, "max_rate")) {
			t.Errorf("refusal %+v: want reason rate naming max_rate", e.Refusal)
		}
		if e.Refusal == nil && (len(e.Sets) != 1 || e.Sets[0].Duty != c.to || e.Sets[0].State != c.to.State()) {
			t.Errorf("from 30%% to %s%%: sets %+v", c.to, e.Sets)
		}
	}
	if e := RampEffect(cmd(10000), cur, 0, 0); e.Refusal != nil {
		t.Errorf("no max_rate: refused %+v", e.Refusal)
	}
}
