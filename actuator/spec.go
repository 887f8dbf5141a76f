package actuator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// Boot is an actuator's start policy.
type Boot string

// Boot policies.
const (
	BootLast Boot = "last" // drive to the recorded state (off, recorded, if none)
	BootOff  Boot = "off"  // drive off and record off; the fence is untouched
	BootOn   Boot = "on"   // drive on and record on; the fence is untouched
	// BootDuty sets a set-point output to its Spec.BootDuty, recorded;
	// the fence is untouched.
	BootDuty Boot = "duty"
)

// ParseBoot parses a boot policy; the empty string is BootLast.
func ParseBoot(s string) (Boot, error) {
	switch b := Boot(s); b {
	case "":
		return BootLast, nil
	case BootLast, BootOff, BootOn, BootDuty:
		return b, nil
	}
	return "", &SpecError{Field: "boot", Msg: fmt.Sprintf("boot %q: want last, off or on (a set-point output: last, off or a set-point)", s)}
}

// SpecError is what the checks of this package (New, CheckKind,
// CheckInterlocks, CheckSafe, ParseBoot) find wrong with a configuration:
// the item it is about, the key at fault and what is wrong, so that
// package config can say where without parsing the text.
type SpecError struct {
	Actuator  string // the actuator it is about, if any
	Scope     string // the scope whose rule (safe) it is about, if any
	Interlock string // the interlock it is about, if any
	// Field is the configuration key at fault (boot, kind, pulse,
	// max_pulse, max_on, scope, actuators, dead_time, safe, name); empty
	// if the item as a whole.
	Field string
	// Msg says what is wrong, for people, without naming the item.
	Msg string
}

// Item returns the kind (actuator, interlock or scope) and the name of
// the item e is about; "", "" if none (an interlock without a name).
func (e *SpecError) Item() (kind, name string) {
	switch {
	case e.Interlock != "":
		return "interlock", e.Interlock
	case e.Scope != "":
		return "scope", e.Scope
	case e.Actuator != "":
		return "actuator", e.Actuator
	}
	return "", ""
}

// Error names the item: "actuator: NAME: MSG", "actuator: interlock
// NAME: MSG", "actuator: scope NAME: MSG".
func (e *SpecError) Error() string {
	switch kind, name := e.Item(); kind {
	case "":
		return "actuator: " + e.Msg
	case "actuator":
		return "actuator: " + name + ": " + e.Msg
	default:
		return "actuator: " + kind + " " + name + ": " + e.Msg
	}
}

// specErr is a SpecError about actuator s's key field.
func (s *Spec) specErr(field, format string, a ...any) error {
	return &SpecError{Actuator: s.Name, Field: field, Msg: fmt.Sprintf(format, a...)}
}

// lockErr is a SpecError about interlock g's key field.
func lockErr(g fence.Interlock, field, format string, a ...any) error {
	return &SpecError{Interlock: g.Name, Field: field, Msg: fmt.Sprintf(format, a...)}
}

// safeErr is a SpecError about scope's safe.
func safeErr(scope, format string, a ...any) error {
	return &SpecError{Scope: scope, Field: "safe", Msg: fmt.Sprintf(format, a...)}
}

// MaxDeadTime is the longest dead time an interlock may ask for: the scope
// waits it out under its lock.
const MaxDeadTime = 10 * time.Second

// Kind is what an actuator's output does with a command.
type Kind string

// Kinds.
const (
	// KindSwitch outputs stay in the state the last command set.
	KindSwitch Kind = "switch"
	// KindPulse outputs rest off and take pulses: on for the pulse's
	// width, then back to rest (a door strike, a garage door's button).
	KindPulse Kind = "pulse"
	// KindSetpoint outputs take set-points (a duty, 0 to 100 %), not
	// on/off: a PWM channel, a dimmer or a valve on a holding register.
	// They are on above 0.
	KindSetpoint Kind = "setpoint"
)

// Spec describes one actuator for New.
type Spec struct {
	Name      string
	Scope     string // fence scope; required (package config makes it Name if the configuration gives none)
	PinName   string // the board's name for the pin
	ActiveLow bool   // on drives the pin low
	Boot      Boot   // empty means BootLast
	Kind      Kind   // empty means KindSwitch
	// Pulse is a pulse output's default width: a command with state on
	// and no pulse_ms asks for it. Zero: such commands are refused.
	Pulse time.Duration
	// MaxPulse is a pulse output's longest pulse (1 ms to fence.MaxPulse).
	MaxPulse time.Duration
	// MaxOn, if not zero, switches the output off once it has been on
	// this long: a liveness rule, recorded and reported, which never
	// touches the fence.
	MaxOn time.Duration
	// Requires, if set, is an input level without which a command that
	// turns the output on is refused (reason interlock); its pair still
	// raises the fence.
	Requires *InputLevel
	// Poll, if not zero, makes the output a watched one (see watch.go):
	// on a device that may stop answering or change its level behind the
	// gateway's back, read back this often and reconciled by the boot
	// rule. A failed drive at start does not stop the gateway.
	Poll time.Duration
	// A set-point output's (KindSetpoint) rules. Min and Max bound the
	// set-points a command may ask for (Max 0: 100 %; 0, off, is always
	// accepted); MaxRate, if not zero, is how far its set-point may move
	// per second (a larger step is refused, reason rate); BootDuty is its
	// set-point at start under BootDuty; SafeDuty is what its scope's safe
	// state (dead-man, trip) sets it to.
	Min, Max, MaxRate  fence.Duty
	BootDuty, SafeDuty fence.Duty
	// MinFrequency and MaxFrequency, on a PWM output, are the frequencies
	// (hertz) a command may choose; both 0: none, it runs at its
	// configured one.
	MinFrequency, MaxFrequency uint32
}

// InputLevel names an input and a level of it, for the rules that read
// inputs: an output that requires it to come on (Spec.Requires), a scope
// that it trips to its safe state (Options.Trips).
type InputLevel struct {
	Input string
	High  bool
}

func (l InputLevel) String() string {
	if l.High {
		return l.Input + " is high"
	}
	return l.Input + " is low"
}

// Safe is a scope's dead-man: if no command raises the scope's fence for
// After (a heartbeat, a fence-only command, will do), every output of the
// scope goes to State, recorded and published with the reason; the fence
// does not move, so the next holder's command works at once and a stale
// holder stays stale. With OnDisconnect, a lost broker connection does
// the same at once.
type Safe struct {
	After        time.Duration
	State        fence.State // StateOff or StateOn
	OnDisconnect bool
}

// CheckKind checks a spec's kind, pulse widths and boot policy against
// each other, as New does: for configuration checks.
func CheckKind(s Spec) error { return s.checkKind() }

// checkScope refuses a spec without a scope: which actuators share a
// fence is the configuration's decision, never a default made here.
func (s *Spec) checkScope() error {
	if s.Scope == "" {
		return s.specErr("scope", "empty scope: name the fence scope it belongs to (an actuator alone in its scope usually takes its own name)")
	}
	return nil
}

// checkKind checks s's kind and its pulse widths.
func (s *Spec) checkKind() error {
	if s.Kind != KindSetpoint && (s.Min != 0 || s.Max != 0 || s.MaxRate != 0 || s.SafeDuty != 0 || s.Boot == BootDuty || s.MaxFrequency != 0) {
		return s.specErr("kind", "min, max, max_rate, safe_duty and a set-point at boot are for set-point outputs (kind: setpoint)")
	}
	switch s.Kind {
	case "", KindSwitch:
		s.Kind = KindSwitch
		if s.Pulse != 0 || s.MaxPulse != 0 {
			field := "max_pulse"
			if s.Pulse != 0 {
				field = "pulse"
			}
			return s.specErr(field, "pulse and max_pulse are for kind: pulse")
		}
		if s.Boot == BootOn && s.Requires != nil {
			return s.specErr("boot", "boot: on would switch it on at start without checking that %s, which it requires: use boot: last or off", s.Requires)
		}
		if s.MaxOn < 0 {
			return s.specErr("max_on", "max_on %v is negative", s.MaxOn)
		}
		return nil
	case KindPulse:
	case KindSetpoint:
		return s.checkSetpoint()
	default:
		return s.specErr("kind", "kind %q: want switch, pulse or setpoint", s.Kind)
	}
	switch {
	case s.MaxPulse < time.Millisecond || s.MaxPulse > fence.MaxPulse || s.MaxPulse%time.Millisecond != 0:
		return s.specErr("max_pulse", "max_pulse %v: a pulse output needs one, whole milliseconds from 1ms to %v", s.MaxPulse, fence.MaxPulse)
	case s.Pulse < 0 || s.Pulse > s.MaxPulse || s.Pulse%time.Millisecond != 0:
		return s.specErr("pulse", "pulse %v: the default width is whole milliseconds, at most max_pulse (%v)", s.Pulse, s.MaxPulse)
	case s.Boot == BootOn:
		return s.specErr("boot", "boot: on: a pulse output rests off; it is never switched on at start")
	case s.MaxOn != 0:
		return s.specErr("max_on", "max_on: a pulse output is on only for its pulse (max_pulse)")
	}
	return nil
}

// checkSafe checks a scope's dead-man against its members; a scope with
// a trip may have a safe state alone, for its trip.
func checkSafe(scope string, safe Safe, members []*output, trip bool) error {
	if safe.After < 0 || (safe.After == 0 && !safe.OnDisconnect && !trip) {
		return safeErr(scope, "safe: give after (e.g. 30s), on_disconnect: true, or both (or a trip: that sends the scope to this state)")
	}
	if safe.State != fence.StateOff && safe.State != fence.StateOn {
		return safeErr(scope, "safe: state is on or off")
	}
	if safe.State == fence.StateOn {
		for _, o := range members {
			if o.Requires != nil {
				return safeErr(scope, "safe state on, but %s requires %s to come on, which a safe state would not check: make the scope safe off", o.Name, o.Requires)
			}
			if o.lock != nil {
				return safeErr(scope, "safe state on, but %s is in interlock %s, of which at most one may be on: a scope with an interlock is safe off", o.Name, o.lock.Name)
			}
		}
	}
	return nil
}

// CheckSafe checks a scope's dead-man against the specs and interlocks,
// as New does, trip saying whether the scope has one: for configuration
// checks.
func CheckSafe(scope string, safe Safe, specs []Spec, interlocks []fence.Interlock, trip bool) error {
	b, err := specBank(specs)
	if err != nil {
		return err
	}
	if err := b.addInterlocks(interlocks); err != nil {
		return err
	}
	var members []*output
	for _, name := range b.order {
		if o := b.outs[name]; o.Scope == scope {
			members = append(members, o)
		}
	}
	if len(members) == 0 {
		return fmt.Errorf("actuator: safe for scope %q, which no actuator is in", scope)
	}
	return checkSafe(scope, safe, members, trip)
}

// CheckInterlocks checks interlocks against specs as New does, without a
// store: for configuration checks.
func CheckInterlocks(specs []Spec, interlocks []fence.Interlock) error {
	b, err := specBank(specs)
	if err != nil {
		return err
	}
	return b.addInterlocks(interlocks)
}

// specBank is a bank of specs without a store, for the configuration
// checks.
func specBank(specs []Spec) (*Bank, error) {
	b := &Bank{outs: map[string]*output{}}
	for _, s := range specs {
		if err := s.checkScope(); err != nil {
			return nil, err
		}
		b.outs[s.Name] = &output{Spec: s}
		b.order = append(b.order, s.Name)
	}
	return b, nil
}

func (b *Bank) addInterlocks(list []fence.Interlock) error {
	names := map[string]bool{}
	for _, g := range list {
		if g.Name == "" {
			return &SpecError{Field: "name", Msg: "an interlock needs a name"}
		}
		if names[g.Name] {
			return lockErr(g, "name", "declared twice: give each interlock a name of its own")
		}
		names[g.Name] = true
		if len(g.Members) < 2 {
			return lockErr(g, "actuators", "name at least two actuators")
		}
		if g.DeadTime < 0 || g.DeadTime > MaxDeadTime {
			return lockErr(g, "dead_time", "dead_time %v: want 0 to %v", g.DeadTime, MaxDeadTime)
		}
		il := &interlock{Interlock: g}
		il.Members = slices.Clone(g.Members)
		var scopeName string
		var ons []string
		for _, m := range g.Members {
			o := b.outs[m]
			switch {
			case o == nil:
				return lockErr(g, "actuators", "no actuator %q", m)
			case o.lock == il:
				return lockErr(g, "actuators", "names %s twice", m)
			case o.lock != nil:
				return lockErr(g, "actuators", "%s is already in interlock %s; put all mutually exclusive actuators in one interlock",
					m, o.lock.Name)
			case o.Kind == KindPulse:
				return lockErr(g, "actuators", "%s is a pulse output; an interlock's members are switches", m)
			case o.Kind == KindSetpoint:
				return lockErr(g, "actuators", "%s is a set-point output; an interlock's members are switches", m)
			case scopeName != "" && o.Scope != scopeName:
				return lockErr(g, "actuators", "%s is in scope %q, %s in scope %q; the members of an interlock must share one scope (one lease, one fence), so that one holder decides them all",
					g.Members[0], scopeName, m, o.Scope)
			}
			scopeName = o.Scope
			o.lock = il
			if o.Boot == BootOn {
				ons = append(ons, m)
			}
		}
		if len(ons) > 1 {
			return lockErr(g, "actuators", "%s all have boot: on, but at most one may be on", strings.Join(ons, " and "))
		}
	}
	return nil
}
