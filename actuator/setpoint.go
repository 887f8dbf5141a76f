package actuator

import (
	"fmt"

	"github.com/fencegate/fencegate/fence"
)

// Setpoint is one set-point output (a PWM channel, a holding register
// behind a dimmer or a valve), as a device provides it: the one set-point
// interface of the project, as Pin is the one switch interface.
type Setpoint interface {
	// SetDuty sets the output to d.
	SetDuty(d fence.Duty) error
	// Duty reads back the set-point the output is at.
	Duty() (fence.Duty, error)
	// Nearest is the set-point Duty reads back after SetDuty(d): d, or
	// the nearest step of a device with a coarser resolution (an 8-bit
	// register, a PWM period that is no multiple of 10000 ns).
	Nearest(d fence.Duty) fence.Duty
}

// Frequencer is a set-point device whose frequency a command may set (a
// PWM channel; a register has none).
type Frequencer interface {
	// SetFrequency runs the output at hz, keeping the share of the period
	// its set-point holds; 0 is its configured frequency.
	SetFrequency(hz uint32) error
}

// AttachSetpoints gets the device of every set-point output (dev returns
// it by its Spec.PinName). Call it before Start.
func (b *Bank) AttachSetpoints(dev func(name string) (Setpoint, error)) error {
	for _, name := range b.order {
		o := b.outs[name]
		if o.Kind != KindSetpoint {
			continue
		}
		d, err := dev(o.PinName)
		if err != nil {
			return fmt.Errorf("actuator: %s: %w", name, err)
		}
		o.dev = d
	}
	return nil
}

// setpointPin is a set-point output as the rest of the bank sees every
// output: a Pin that is on at its recorded set-point and off at 0. Its
// level comes from the record, which every change reaches before the
// output is driven (record, then drive), so on is always the set-point
// recorded last; an output found at any other set-point is at neither
// level, which the watch and the boot rule treat as a change behind the
// gateway's back.
type setpointPin struct {
	dev      Setpoint
	recorded func() fence.Output
}

func (p *setpointPin) Out(high bool) error {
	cur := p.recorded()
	if f, ok := p.dev.(Frequencer); ok {
		if err := f.SetFrequency(cur.Frequency); err != nil {
			return err
		}
	}
	var d fence.Duty
	if high {
		d = cur.Duty
	}
	return p.dev.SetDuty(d)
}

func (p *setpointPin) Level() (bool, error) {
	d, err := p.dev.Duty()
	if err != nil {
		return false, err
	}
	rec := p.recorded().Duty
	want := p.dev.Nearest(rec)
	switch {
	case d == want:
		return rec > 0, nil // at the recorded set-point, even one finer than the device's step
	case d == 0:
		return false, nil
	}
	return false, &dutyError{read: d, recorded: rec}
}

// dutyError says that a set-point output reads back at another set-point
// than the one recorded: neither on (as recorded) nor off.
type dutyError struct{ read, recorded fence.Duty }

func (e *dutyError) Error() string {
	return fmt.Sprintf("reads %s%%, recorded %s%%", e.read, e.recorded)
}

func (e *dutyError) NeitherLevel() bool { return true }

// pinOf returns o's set-point device as a Pin.
func (b *Bank) pinOf(o *output) (Pin, error) {
	if o.dev == nil {
		return nil, fmt.Errorf("actuator: %s: a set-point output without a device (AttachSetpoints)", o.Name)
	}
	return &setpointPin{dev: o.dev, recorded: func() fence.Output {
		cur, _ := b.store.Output(o.Scope, o.Name)
		return cur
	}}, nil
}

// at is the state o's record takes for a set-point of d: on above 0.
func (o *output) at(d fence.Duty) fence.Set {
	return fence.Set{Actuator: o.Name, State: d.State(), Duty: d}
}

// safeSet is what sc's safe state (its dead-man, its trip) sets o to: a
// set-point output's safe_duty, a switch's safe state.
func (sc *guard) safeSet(o *output) fence.Set {
	if o.Kind == KindSetpoint {
		return o.at(o.SafeDuty)
	}
	return fence.Set{Actuator: o.Name, State: sc.safeState()}
}

// readDuty sets res.Duty to set-point output o's recorded set-point and,
// if o reads back at another, res.ActualDuty and res.Actual to what it
// reads ("unknown" if it cannot be read). The scope's lock must be held.
func (b *Bank) readDuty(o *output, res *fence.Result) {
	cur, err := b.store.Output(o.Scope, o.Name)
	if err != nil {
		return
	}
	res.Duty, res.Frequency = &cur.Duty, cur.Frequency
	got, err := o.dev.Duty()
	if err != nil {
		res.Actual = "unknown"
		return
	}
	if o.Poll > 0 {
		b.sawLevel(o, got > 0)
	}
	if got != o.dev.Nearest(cur.Duty) {
		res.ActualDuty = &got
		if s := got.State(); s != res.State {
			res.Actual = s.String()
		}
	}
}

// safeText names sc's safe state for o, for people.
func (sc *guard) safeText(o *output) string {
	if o.Kind == KindSetpoint {
		return "duty " + o.SafeDuty.String() + "%"
	}
	return sc.safeState().String()
}

// isAt reports whether cur, an output's record, is at set.
func isAt(cur fence.Output, set fence.Set) bool {
	return cur.State == set.State && cur.Duty == set.Duty && cur.Frequency == set.Frequency
}

// shapeSetpoint checks c, a command to the set-point output o, and
// returns it as o takes it: state off is a set-point of 0; an on without
// a set-point, and a pulse, are refused, as is a set-point outside o's
// range or below its device's smallest step (reason range: recorded, it
// would be an output "on" that its device holds off). 0 is always in
// range: off must always be reachable.
func (o *output) shapeSetpoint(c fence.Command) (fence.Command, string, error) {
	switch {
	case c.Pulse > 0:
		return c, fence.ReasonInvalid, fmt.Errorf("%s is a set-point output: send duty (percent, 0 to 100), not pulse_ms", o.Name)
	case c.State == fence.StateOff && !c.Setpoint:
		c.Setpoint, c.Duty = true, 0
	case c.State == fence.StateOn && !c.Setpoint:
		return c, fence.ReasonInvalid, fmt.Errorf("%s is a set-point output: send duty (percent, %s to %s; 0 is off), not state on", o.Name, o.Min, o.max())
	}
	if c.Frequency > 0 {
		if _, ok := o.dev.(Frequencer); !ok {
			return c, fence.ReasonInvalid, fmt.Errorf("%s has no frequency to set (a register takes a set-point alone): send duty without frequency", o.Name)
		}
		if o.MaxFrequency == 0 {
			return c, fence.ReasonRange, fmt.Errorf("%s runs at its configured frequency: a command may not choose one unless its pwm: gives min_frequency and max_frequency", o.Name)
		}
		if c.Frequency < o.MinFrequency || c.Frequency > o.MaxFrequency {
			return c, fence.ReasonRange, fmt.Errorf("frequency %d Hz is outside %s's range, %d to %d Hz (min_frequency, max_frequency)", c.Frequency, o.Name, o.MinFrequency, o.MaxFrequency)
		}
	}
	if !c.Setpoint || c.Duty == 0 {
		return c, "", nil
	}
	if c.Duty < o.Min || c.Duty > o.max() {
		return c, fence.ReasonRange, fmt.Errorf("duty %s%% is outside %s's range, %s to %s %% (its min and max; 0, off, is always accepted)", c.Duty, o.Name, o.Min, o.max())
	}
	if o.dev != nil && o.dev.Nearest(c.Duty) == 0 {
		least := smallestOn(o.dev)
		return c, fence.ReasonRange, fmt.Errorf("duty %s%% is below the smallest step of %s's device, %s %%: it would hold the output off; "+
			"send 0 for off, or at least %s %%", c.Duty, o.Name, o.dev.Nearest(least), least)
	}
	return c, "", nil
}

// smallestOn is the smallest set-point that dev does not hold at 0 (its
// steps grow with the set-point).
func smallestOn(dev Setpoint) fence.Duty {
	lo, hi := fence.Duty(1), fence.FullDuty
	for lo < hi {
		mid := lo + (hi-lo)/2
		if dev.Nearest(mid) == 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// max is o's highest set-point: its Max, or 100 % if it has none.
func (o *output) max() fence.Duty {
	if o.Max == 0 {
		return fence.FullDuty
	}
	return o.Max
}

// checkSetpoint checks a set-point output's spec.
func (s *Spec) checkSetpoint() error {
	hi := s.Max
	if hi == 0 {
		hi = fence.FullDuty
	}
	inRange := func(d fence.Duty) bool { return d == 0 || (d >= s.Min && d <= hi) }
	switch {
	case s.Pulse != 0 || s.MaxPulse != 0:
		return s.specErr("pulse", "pulse and max_pulse are for kind: pulse")
	case !s.Min.Valid() || !hi.Valid() || s.Min > hi:
		return s.specErr("min", "min %s and max %s: want 0 <= min <= max <= 100 (percent)", s.Min, hi)
	case !s.MaxRate.Valid():
		return s.specErr("max_rate", "max_rate %s: want at most 100 (percent per second)", s.MaxRate)
	case s.Boot == BootOn:
		return s.specErr("boot", "boot: on: a set-point output starts at its recorded set-point (boot: last), off, or a set-point you give (boot: 30)")
	case s.Boot == BootDuty && !inRange(s.BootDuty):
		return s.specErr("boot", "boot: %s is outside its range, %s to %s (min, max; or 0)", s.BootDuty, s.Min, hi)
	case !inRange(s.SafeDuty):
		return s.specErr("safe_duty", "safe_duty %s is outside its range, %s to %s (min, max; or 0)", s.SafeDuty, s.Min, hi)
	case s.MaxOn < 0:
		return s.specErr("max_on", "max_on %v is negative", s.MaxOn)
	case s.MinFrequency > s.MaxFrequency || s.MaxFrequency > fence.MaxFrequency || (s.MaxFrequency > 0 && s.MinFrequency == 0):
		return s.specErr("max_frequency", "min_frequency %d and max_frequency %d: want 1 <= min <= max <= %d (hertz), both or neither", s.MinFrequency, s.MaxFrequency, fence.MaxFrequency)
	}
	return nil
}
