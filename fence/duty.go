package fence

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duty is a set-point: the share of full output a set-point output (a
// PWM channel, a dimmer or a valve on a holding register) is set to, in
// hundredths of a percent, from 0 (off) to FullDuty. It is an integer so
// that a set-point is recorded, compared and signed exactly: 42.5 % is
// 4250 everywhere, in every language.
type Duty uint16

// FullDuty is 100 %.
const FullDuty Duty = 10000

// MaxFrequency is the highest frequency a set-point command may ask a PWM
// output for, in hertz: at 1 MHz a period is 1000 ns, and a duty step of
// 0.01 % a tenth of a nanosecond, which no controller resolves.
const MaxFrequency = 1000000

// ParseDuty parses a duty as the protocol writes it: a JSON number of
// percent, 0 to 100, with at most two decimals ("42", "42.5", "42.25").
// No sign, exponent, leading zero or string.
func ParseDuty(s string) (Duty, error) {
	want := "a number of percent from 0 to 100 with at most two decimals"
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || !digits(whole) || (dot && (frac == "" || !digits(frac))) {
		return 0, fmt.Errorf("want %s, got %s", want, s)
	}
	if len(whole) > 1 && whole[0] == '0' {
		return 0, fmt.Errorf("want %s, got %s (a JSON number has no leading zero)", want, s)
	}
	if len(frac) > 2 {
		return 0, fmt.Errorf("want %s, got %s (the finest step is 0.01)", want, s)
	}
	if len(whole) > 3 {
		return 0, fmt.Errorf("want %s, got %s", want, s)
	}
	w, _ := strconv.Atoi(whole)
	f := 0
	if frac != "" {
		f, _ = strconv.Atoi((frac + "0")[:2])
	}
	v := w*100 + f
	if v > int(FullDuty) {
		return 0, fmt.Errorf("want %s, got %s", want, s)
	}
	return Duty(v), nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String formats d as ParseDuty reads it, as short as it can be: "42",
// "42.5", "42.25".
func (d Duty) String() string {
	s := strconv.Itoa(int(d) / 100)
	switch f := int(d) % 100; {
	case f == 0:
	case f%10 == 0:
		s += "." + strconv.Itoa(f/10)
	default:
		s += fmt.Sprintf(".%02d", f)
	}
	return s
}

// State is the on/off state a duty stands for where one is asked (an
// interlock, a switch entity): on above 0.
func (d Duty) State() State {
	if d > 0 {
		return StateOn
	}
	return StateOff
}

// Valid reports whether d is at most FullDuty.
func (d Duty) Valid() bool { return d <= FullDuty }

// MarshalJSON writes d as a number of percent.
func (d Duty) MarshalJSON() ([]byte, error) {
	if !d.Valid() {
		return nil, fmt.Errorf("fence: duty %d hundredths of a percent is above 100 %%", uint16(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalJSON reads a number of percent, as ParseDuty does.
func (d *Duty) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return errors.New("fence: duty is a number of percent, not a string")
	}
	v, err := ParseDuty(string(b))
	if err != nil {
		return fmt.Errorf("fence: duty: %w", err)
	}
	*d = v
	return nil
}

// RampEffect is the effect of c, a set-point command, on an output whose
// set-point may change by at most perSecond per second (its max_rate),
// cur being its record and elapsed the time since cur was recorded: a
// change larger than the time allows is refused (ReasonRate; its pair
// still raises the fence, as an interlock's refusal does); anything else
// is Plain. Off (0) is never refused: stopping must always be possible.
func RampEffect(c Command, cur Output, elapsed time.Duration, perSecond Duty) Effect {
	if !c.Setpoint || c.Duty == 0 || perSecond == 0 {
		return Plain(c)
	}
	step := int(c.Duty) - int(cur.Duty)
	if step < 0 {
		step = -step
	}
	if elapsed < 0 {
		elapsed = 0
	}
	allowed := float64(perSecond) * elapsed.Seconds()
	if float64(step) <= allowed {
		return Plain(c)
	}
	wait := time.Duration(float64(step)/float64(perSecond)*float64(time.Second)) - elapsed
	return Effect{Refusal: &Refusal{Reason: ReasonRate, Blocker: c.Actuator, Error: fmt.Sprintf(
		"%s may change by at most %s%% per second (max_rate): from %s%% to %s%% is %s points, and the %.1f s since it was set allow %s; ramp in smaller steps, or send it again in %.1f s",
		c.Actuator, perSecond, cur.Duty, c.Duty, Duty(step), elapsed.Seconds(), Duty(min(allowed, float64(FullDuty))), wait.Seconds())}}
}
