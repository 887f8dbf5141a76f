// Package actuator owns fencegate's outputs: it admits each command through
// the durable fence record and only then drives the output.
//
// # Concepts
//
// A [Bank] holds the configured actuators, the fence scope each belongs to
// and the interlocks among them. [New] binds every actuator to its scope in
// the store and applies the boot rule; [Bank.Lines] tells the board at
// which level to take over each line; [Bank.Start] attaches the pins and
// drives them to those levels. [Bank.Handle] then takes one
// [fence.Command] through the whole path: admission and durable record
// (package fencelog), then the drive, then the answer.
//
// # Safety
//
//   - Per scope, admission, the fsynced record and the drive happen under one
//     lock, so no interleaving lets a lower fence's drive land after a higher
//     fence's drive. Different scopes proceed independently.
//   - An output is driven only after fencelog reported the new fence durable.
//     If the record fails, nothing is driven and the answer is failed.
//   - Of the members of an interlock at most one is ever on: a command
//     that would turn a second one on is refused, or, with break-before-make,
//     switches the others off first. Every state of the effect and the fence
//     are recorded in one transaction before any pin moves, the offs are
//     driven before the on, and no member comes on before the interlock's
//     dead time has passed since the last one went off. A failed off stops
//     the sequence: nothing comes on next to an output that may still be on.
//   - The boot rule has one owner, this package: the level at which a line
//     is taken over and the level Start drives it to are the same decision,
//     made after the store bound the actuators to their scopes, so nothing
//     moves at start that reconciliation would not move.
package actuator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// Pin is one physical (or simulated) output, as a board provides it. It is
// the one pin interface of the project: package boards checks its boards
// against it.
type Pin interface {
	// Out drives the pin high (true) or low (false).
	Out(high bool) error
	// Level reads back the level the pin is at, without reconfiguring it.
	Level() (high bool, err error)
}

// Boot is an actuator's start policy.
type Boot string

// Boot policies.
const (
	BootLast Boot = "last" // drive to the recorded state (off, recorded, if none)
	BootOff  Boot = "off"  // drive off and record off; the fence is untouched
	BootOn   Boot = "on"   // drive on and record on; the fence is untouched
)

// ParseBoot parses a boot policy; the empty string is BootLast.
func ParseBoot(s string) (Boot, error) {
	switch b := Boot(s); b {
	case "":
		return BootLast, nil
	case BootLast, BootOff, BootOn:
		return b, nil
	}
	return "", fmt.Errorf("actuator: boot %q: want last, off or on", s)
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
)

// MaxPulse is the longest max_pulse a pulse output may have.
const MaxPulse = 10 * time.Minute

// Spec describes one actuator for New.
type Spec struct {
	Name      string
	Scope     string // fence scope; empty means Name
	PinName   string // the board's name for the pin
	ActiveLow bool   // on drives the pin low
	Boot      Boot   // empty means BootLast
	Kind      Kind   // empty means KindSwitch
	// Pulse is a pulse output's default width: a command with state on
	// and no pulse_ms asks for it. Zero: such commands are refused.
	Pulse time.Duration
	// MaxPulse is a pulse output's longest pulse (1 ms to MaxPulse).
	MaxPulse time.Duration
	// MaxOn, if not zero, switches the output off once it has been on
	// this long: a liveness rule, recorded and reported, which never
	// touches the fence.
	MaxOn time.Duration
	// Requires, if set, is an input level without which a command that
	// turns the output on is refused (reason interlock); its pair still
	// raises the fence.
	Requires *InputLevel
}

// Input is one digital input, as a board provides it: the one input
// interface of the project, as Pin is the one output interface.
type Input interface {
	// Level reads the input's (debounced) level.
	Level() (high bool, err error)
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

// checkKind checks s's kind and its pulse widths.
func (s *Spec) checkKind() error {
	switch s.Kind {
	case "", KindSwitch:
		s.Kind = KindSwitch
		if s.Pulse != 0 || s.MaxPulse != 0 {
			return fmt.Errorf("actuator: %s: pulse and max_pulse are for kind: pulse", s.Name)
		}
		if s.Boot == BootOn && s.Requires != nil {
			return fmt.Errorf("actuator: %s: boot: on would switch it on at start without checking that %s, which it requires: use boot: last or off", s.Name, s.Requires)
		}
		if s.MaxOn < 0 {
			return fmt.Errorf("actuator: %s: max_on %v is negative", s.Name, s.MaxOn)
		}
		return nil
	case KindPulse:
	default:
		return fmt.Errorf("actuator: %s: kind %q: want switch or pulse", s.Name, s.Kind)
	}
	switch {
	case s.MaxPulse < time.Millisecond || s.MaxPulse > MaxPulse || s.MaxPulse%time.Millisecond != 0:
		return fmt.Errorf("actuator: %s: max_pulse %v: a pulse output needs one, whole milliseconds from 1ms to %v", s.Name, s.MaxPulse, MaxPulse)
	case s.Pulse < 0 || s.Pulse > s.MaxPulse || s.Pulse%time.Millisecond != 0:
		return fmt.Errorf("actuator: %s: pulse %v: the default width is whole milliseconds, at most max_pulse (%v)", s.Name, s.Pulse, s.MaxPulse)
	case s.Boot == BootOn:
		return fmt.Errorf("actuator: %s: boot: on: a pulse output rests off; it is never switched on at start", s.Name)
	case s.MaxOn != 0:
		return fmt.Errorf("actuator: %s: max_on: a pulse output is on only for its pulse (max_pulse)", s.Name)
	}
	return nil
}

// Options configure a Bank. Nil or zero values are usable.
type Options struct {
	// Logger receives drive failures and what the boot rule changed. Nil
	// discards.
	Logger *slog.Logger
	// Interlocks are groups of actuators of one scope of which at most one
	// may be on.
	Interlocks []fence.Interlock
	// Rules are, per scope name, what the scope admits beyond its fence
	// (fence.Rules.MaxJump); the store adds its floor. A scope without an
	// entry has no limit.
	Rules map[string]fence.Rules
	// Changed, if set, is called with the recorded state of every actuator
	// of a scope whenever they may have changed: after an applied or failed
	// command, at Start, and on Republish. It is called under the scope's
	// lock, so the calls for one scope come in fence order; it must not
	// block.
	Changed func(outputs []fence.Output)
	// AfterCommit, if set, is called after a command's fence was recorded
	// durably and before its output is driven. It exists for crash tests
	// and the simulator's crash scenario.
	AfterCommit func(fence.Command)
	// Authorize, if set, decides whether command c to an actuator of scope
	// may be decided at all (its signature: see package sign). A non-nil
	// error rejects c with reason (a fence.Reason* code) before its scope
	// is locked or its fence read: audited, nothing recorded or driven.
	// It must not block.
	Authorize func(c fence.Command, scope string) (reason string, err error)
	// Observer, if set, is told what the bank does, for metrics.
	Observer *Observer
	// Safe are, per scope name, the scopes' dead-men.
	Safe map[string]Safe
	// Trips are, per scope name, the input level that sends the scope to
	// its safe state (its Safe.State; off without one) and holds it there
	// until a reset command from its holder, once the input has left it.
	Trips map[string]InputLevel
}

// Observer receives the bank's measurements. Any of its funcs may be nil;
// none may block: they run on the decision path.
type Observer struct {
	// Decided gets every answered command, as the event stream does.
	Decided func(Event)
	// Admitted gets each admission: its commands (one actuator's, taken
	// together) and how long deciding and recording them took, the
	// store's commit included.
	Admitted func(took time.Duration, commands int)
	// Driven gets each drive of an output and how long it took.
	Driven func(actuator string, took time.Duration, err error)
}

// Bank is the set of configured actuators. Its methods are safe for
// concurrent use.
type Bank struct {
	log    *fencelog.Log
	opts   Options
	outs   map[string]*output // immutable after New
	order  []string           // actuator names in configuration order
	scopes []*scope           // in order of their first actuator

	startMu sync.Mutex
	started bool

	subMu sync.Mutex // guards subs
	subs  map[chan Event]struct{}

	inputs   map[string]Input // set by AttachInputs before Start
	attached atomic.Bool      // Start attached the pins: input changes may drive them

	pulseWG sync.WaitGroup         // the pulses' ends that may still run
	pulseMu sync.Mutex             // guards pulses and stopped
	pulses  map[string]*time.Timer // the running pulses' ends, by actuator
	stopped bool                   // Stop has begun: no pulse starts a timer
}

// scope is one fence scope's actuators and its lock.
type scope struct {
	name    string
	rules   fence.Rules
	sem     chan struct{} // the scope's lock; a Handle waiting for it gives up when its ctx ends
	members []*output     // in configuration order
	// waiting, if set, is called when a caller finds the lock taken,
	// before it waits: the tests' hook to force the interleavings a
	// broken lock would allow (see export_test.go). Set before use.
	waiting func()
	// moved is when the lock's holder last made progress (took the lock,
	// or went on to its batch's next command), as 1 + ns since epoch; 0
	// while the lock is free. See Bank.Stalled.
	moved atomic.Int64

	// The dead-man, guarded by the lock: safe is the rule (After 0:
	// none), alive when a command last raised the fence (or Start ran),
	// deadman the timer that checks it.
	safe    Safe
	alive   time.Time
	deadman *time.Timer
	tripped bool // the dead-man fired, and no command raised the fence since

	trip *InputLevel // the input level that trips the scope; nil if none
}

func (s *scope) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err // a free lock must not win over an ended context
	}
	select {
	case s.sem <- struct{}{}:
		s.progress()
		return nil
	default:
	}
	if s.waiting != nil {
		s.waiting()
	}
	select {
	case s.sem <- struct{}{}:
		s.progress()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *scope) unlock() {
	s.moved.Store(0)
	<-s.sem
}

// progress notes that the lock's holder moved on. The lock must be held.
func (s *scope) progress() { s.moved.Store(int64(time.Since(epoch)) + 1) }

// safeState is the state sc's dead-man and trip send it to: off unless
// its Safe says on.
func (sc *scope) safeState() fence.State {
	if sc.safe.State == fence.StateOn {
		return fence.StateOn
	}
	return fence.StateOff
}

// epoch is what the scopes' progress times count from: the monotonic
// clock, which no step of the wall clock moves.
var epoch = time.Now()

type output struct {
	Spec
	scope *scope
	lock  *interlock // nil outside any interlock
	start start      // the boot rule's decision
	pin   Pin        // set by Start
	// onSince is when the output was driven on (monotonic; zero while
	// off), and maxOn the timer that switches it off after MaxOn; both
	// guarded by the scope's lock.
	onSince time.Time
	maxOn   *time.Timer
}

func (o *output) level(s fence.State) bool { return (s == fence.StateOn) != o.ActiveLow }

// start is the boot rule's decision for one actuator.
type start struct {
	state fence.State // the recorded state it is driven to
	// deferred: an interlocked output recorded on starts off and is
	// switched on after its interlock's dead time.
	deferred bool
}

// interlock is an Interlock and the time its last member went off.
type interlock struct {
	fence.Interlock
	lastOff time.Time // guarded by the scope's lock
}

// Event is one decision, as Subscribe delivers it.
type Event struct {
	At     time.Time // wall clock, for people only
	Scope  string
	Holder string
	State  fence.State // the state the command asked for
	Result fence.Result
}

// Status is an actuator's recorded state together with its read-back level.
type Status struct {
	fence.Output
	PinName   string
	ActiveLow bool
	// Interlock names the actuator's interlock, if any.
	Interlock string
	// Kind is the output's kind.
	Kind Kind
	// Deadman is the scope's dead-man, if it has one with a time.
	Deadman *DeadmanStatus
	// Trip says why the scope is held at its safe state by its trip
	// input, until a reset; "" if it is not.
	Trip string
	// High is the level read back from the pin; valid if LevelErr is nil.
	High     bool
	LevelErr error
	// Drives counts the drives of the pin by this process, for boards that
	// count them (the sim board); nil otherwise.
	Drives *uint64
}

// DeadmanStatus is where a scope's dead-man stands.
type DeadmanStatus struct {
	Safe
	// Left is the time until it fires unless a command raises the fence;
	// 0 once it fired (Tripped).
	Left    time.Duration
	Tripped bool
}

// Line is where a board takes over one actuator's line: at the level the
// boot rule decided.
type Line struct {
	Actuator string
	Pin      string
	High     bool
}

// New checks the actuators and interlocks, binds every actuator to its
// scope in the store (an actuator the configuration moved brings its old
// scope's fence along, see fencelog.Log.Bind), and applies the boot rule:
//
//   - boot: last drives the recorded state; an actuator never commanded
//     is recorded off;
//   - boot: on and boot: off record that state (the fence is untouched);
//   - if more than one member of an interlock would be on (a store from
//     before the interlock was configured), every member is recorded off;
//   - a member of an interlock with a dead time that is recorded on is
//     taken over off and switched on by Start once the dead time has
//     passed: at start the gateway cannot know whether a crash interrupted
//     a switch-over, so it makes sure of the dead time.
//
// What the rule changes is recorded (fsynced, audited as "boot") before
// New returns, and before any line is taken over.
func New(log *fencelog.Log, specs []Spec, opts *Options) (*Bank, error) {
	b := &Bank{log: log, outs: make(map[string]*output)}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.Logger == nil {
		b.opts.Logger = slog.New(slog.DiscardHandler)
	}
	byScope := map[string]*scope{}
	for _, s := range specs {
		if s.Name == "" {
			return nil, errors.New("actuator: empty actuator name")
		}
		if _, dup := b.outs[s.Name]; dup {
			return nil, fmt.Errorf("actuator: duplicate actuator %q", s.Name)
		}
		if s.Scope == "" {
			s.Scope = s.Name
		}
		boot, err := ParseBoot(string(s.Boot))
		if err != nil {
			return nil, fmt.Errorf("actuator: %s: %w", s.Name, err)
		}
		s.Boot = boot
		if err := s.checkKind(); err != nil {
			return nil, err
		}
		sc := byScope[s.Scope]
		if sc == nil {
			sc = &scope{name: s.Scope, sem: make(chan struct{}, 1)}
			byScope[s.Scope] = sc
			b.scopes = append(b.scopes, sc)
		}
		o := &output{Spec: s, scope: sc}
		sc.members = append(sc.members, o)
		b.outs[s.Name] = o
		b.order = append(b.order, s.Name)
	}
	if err := b.addInterlocks(b.opts.Interlocks); err != nil {
		return nil, err
	}
	for name, r := range b.opts.Rules {
		sc := byScope[name]
		if sc == nil {
			return nil, fmt.Errorf("actuator: rules for scope %q, which no actuator is in", name)
		}
		sc.rules = r
	}
	for name, lvl := range b.opts.Trips {
		sc := byScope[name]
		if sc == nil {
			return nil, fmt.Errorf("actuator: trip for scope %q, which no actuator is in", name)
		}
		sc.trip = &lvl
	}
	for name, safe := range b.opts.Safe {
		sc := byScope[name]
		if sc == nil {
			return nil, fmt.Errorf("actuator: safe for scope %q, which no actuator is in", name)
		}
		if err := checkSafe(name, safe, sc.members, sc.trip != nil); err != nil {
			return nil, err
		}
		sc.safe = safe
	}
	if err := b.boot(); err != nil {
		return nil, err
	}
	return b, nil
}

// checkSafe checks a scope's dead-man against its members; a scope with
// a trip may have a safe state alone, for its trip.
func checkSafe(scope string, safe Safe, members []*output, trip bool) error {
	if safe.After < 0 || (safe.After == 0 && !safe.OnDisconnect && !trip) {
		return fmt.Errorf("actuator: scope %s: safe: give after (e.g. 30s), on_disconnect: true, or both (or a trip: that sends the scope to this state)", scope)
	}
	if safe.State != fence.StateOff && safe.State != fence.StateOn {
		return fmt.Errorf("actuator: scope %s: safe: state is on or off", scope)
	}
	if safe.State == fence.StateOn {
		for _, o := range members {
			if o.Requires != nil {
				return fmt.Errorf("actuator: scope %s: safe state on, but %s requires %s to come on, which a safe state would not check: make the scope safe off", scope, o.Name, o.Requires)
			}
			if o.lock != nil {
				return fmt.Errorf("actuator: scope %s: safe state on, but %s is in interlock %s, of which at most one may be on: a scope with an interlock is safe off", scope, o.Name, o.lock.Name)
			}
		}
	}
	return nil
}

// CheckSafe checks a scope's dead-man against the specs and interlocks,
// as New does, trip saying whether the scope has one: for configuration
// checks.
func CheckSafe(scope string, safe Safe, specs []Spec, interlocks []fence.Interlock, trip bool) error {
	b := specBank(specs)
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
	return specBank(specs).addInterlocks(interlocks)
}

// specBank is a bank of specs without a store, for the configuration
// checks.
func specBank(specs []Spec) *Bank {
	b := &Bank{outs: map[string]*output{}}
	for _, s := range specs {
		if s.Scope == "" {
			s.Scope = s.Name
		}
		b.outs[s.Name] = &output{Spec: s}
		b.order = append(b.order, s.Name)
	}
	return b
}

func (b *Bank) addInterlocks(list []fence.Interlock) error {
	names := map[string]bool{}
	for _, g := range list {
		if g.Name == "" {
			return errors.New("actuator: an interlock needs a name")
		}
		if names[g.Name] {
			return fmt.Errorf("actuator: interlock %q is declared twice", g.Name)
		}
		names[g.Name] = true
		if len(g.Members) < 2 {
			return fmt.Errorf("actuator: interlock %s: name at least two actuators", g.Name)
		}
		if g.DeadTime < 0 || g.DeadTime > MaxDeadTime {
			return fmt.Errorf("actuator: interlock %s: dead_time %v: want 0 to %v", g.Name, g.DeadTime, MaxDeadTime)
		}
		il := &interlock{Interlock: g}
		il.Members = slices.Clone(g.Members)
		var scopeName string
		var ons []string
		for _, m := range g.Members {
			o := b.outs[m]
			switch {
			case o == nil:
				return fmt.Errorf("actuator: interlock %s: no actuator %q", g.Name, m)
			case o.lock == il:
				return fmt.Errorf("actuator: interlock %s names %s twice", g.Name, m)
			case o.lock != nil:
				return fmt.Errorf("actuator: interlock %s: %s is already in interlock %s; put all mutually exclusive actuators in one interlock",
					g.Name, m, o.lock.Name)
			case o.Kind == KindPulse:
				return fmt.Errorf("actuator: interlock %s: %s is a pulse output; an interlock's members are switches", g.Name, m)
			case scopeName != "" && o.Scope != scopeName:
				return fmt.Errorf("actuator: interlock %s: %s is in scope %q, %s in scope %q; the members of an interlock must share one scope (one lease, one fence), so that one holder decides them all",
					g.Name, g.Members[0], scopeName, m, o.Scope)
			}
			scopeName = o.Scope
			o.lock = il
			if o.Boot == BootOn {
				ons = append(ons, m)
			}
		}
		if len(ons) > 1 {
			return fmt.Errorf("actuator: interlock %s: %s all have boot: on, but at most one may be on", g.Name, strings.Join(ons, " and "))
		}
	}
	return nil
}

// boot binds the actuators to their scopes and applies the boot rule (see New).
func (b *Bank) boot() error {
	scopes := make(map[string]string, len(b.outs))
	for name, o := range b.outs {
		scopes[name] = o.Scope
	}
	moved, err := b.log.Bind(scopes)
	if err != nil {
		return fmt.Errorf("actuator: %w", err)
	}
	for _, name := range moved {
		b.opts.Logger.Warn("actuator moved to another scope; its old fence came along", "actuator", name, "scope", b.outs[name].Scope)
	}
	var changes []fencelog.StateChange
	set := func(o *output, s fence.State, why string) {
		o.start.state = s
		changes = append(changes, fencelog.StateChange{Scope: o.Scope, Actuator: o.Name, State: s, Holder: "boot", Why: why})
	}
	for _, sc := range b.scopes {
		rec, err := b.log.Scope(sc.name)
		if err != nil {
			return fmt.Errorf("actuator: %w", err)
		}
		for _, o := range sc.members {
			if p := rec.Output(o.Name).Pulse; p != nil && p.Status == fence.PulseRunning {
				// A crash (or a stop) while it ran: a pulse is never resumed.
				why := fmt.Sprintf("interrupted: the gateway stopped while this pulse of %v ran; it is not resumed", p.Width)
				if rec, _, err = b.log.EndPulse(sc.name, o.Name, *p, fence.PulseInterrupted, why); err != nil {
					return fmt.Errorf("actuator: %w", err)
				}
				b.opts.Logger.Warn("pulse interrupted by a stop of the gateway; the output rests off", "actuator", o.Name, "fence", p.Fence.String(), "width", p.Width.String())
			}
			recorded := rec.Output(o.Name).State
			o.start.state = recorded
			switch {
			case o.Kind == KindPulse && recorded != fence.StateOff:
				set(o, fence.StateOff, "a pulse output rests off")
			case o.Boot == BootOn && recorded != fence.StateOn:
				set(o, fence.StateOn, "boot: on")
			case o.Boot == BootOff && recorded != fence.StateOff:
				set(o, fence.StateOff, "boot: off")
			case recorded == fence.StateNone:
				set(o, fence.StateOff, "never commanded: off")
			}
			if trip := rec.Trip(); trip != "" && o.Kind != KindPulse && o.start.state != sc.safeState() {
				// Held by a trip since before the restart: no boot policy
				// switches it out of the safe state; a reset does.
				set(o, sc.safeState(), "held by its scope's trip ("+trip+") until a reset")
			}
		}
		for _, o := range sc.members {
			if o.lock == nil || o != b.outs[o.lock.Members[0]] {
				continue
			}
			var ons []string
			for _, m := range o.lock.Members {
				if b.outs[m].start.state == fence.StateOn {
					ons = append(ons, m)
				}
			}
			if len(ons) > 1 {
				why := fmt.Sprintf("interlock %s: %s were all on; at most one may be: all switched off", o.lock.Name, strings.Join(ons, ", "))
				b.opts.Logger.Warn(why)
				for _, m := range ons {
					set(b.outs[m], fence.StateOff, why)
				}
			}
		}
	}
	if err := b.log.SetStates(changes); err != nil {
		return fmt.Errorf("actuator: %w", err)
	}
	for _, o := range b.outs {
		o.start.deferred = o.lock != nil && o.lock.DeadTime > 0 && o.start.state == fence.StateOn
	}
	return nil
}

// Lines returns, in configuration order, the level at which a board must
// take over each actuator's line: the boot rule's decision (an interlocked
// output that will come on after its dead time is taken over off).
func (b *Bank) Lines() []Line {
	lines := make([]Line, 0, len(b.order))
	for _, name := range b.order {
		o := b.outs[name]
		lines = append(lines, Line{Actuator: name, Pin: o.PinName, High: o.level(o.initial())})
	}
	return lines
}

func (o *output) initial() fence.State {
	if o.start.deferred {
		return fence.StateOff
	}
	return o.start.state
}

// Start attaches every actuator's pin (pin returns it by its Spec.PinName)
// and drives the outputs as the boot rule decided: each scope's outputs to
// their initial levels, offs before ons; then, once their interlock's dead
// time has passed, the interlocked outputs that were taken over off. Call
// it once, before handling commands. It stops at the first failure.
func (b *Bank) Start(pin func(name string) (Pin, error)) error {
	b.startMu.Lock()
	defer b.startMu.Unlock()
	if b.started {
		return errors.New("actuator: Start called twice")
	}
	for _, name := range b.order {
		o := b.outs[name]
		p, err := pin(o.PinName)
		if err != nil {
			return fmt.Errorf("actuator: %s: %w", name, err)
		}
		o.pin = p
	}
	b.attached.Store(true)
	ctx := context.Background()
	var deferred []*output
	for _, sc := range b.scopes {
		sc.lock(ctx)
		err := b.startScope(sc)
		sc.unlock()
		if err != nil {
			return err
		}
		for _, o := range sc.members {
			if o.start.deferred {
				deferred = append(deferred, o)
			}
		}
	}
	for _, o := range deferred {
		o.scope.lock(ctx)
		err := b.drive(o, fence.StateOn)
		if err == nil {
			b.changed(o.scope)
		}
		o.scope.unlock()
		if err != nil {
			return fmt.Errorf("actuator: %s: drive on after the dead time of interlock %s: %w", o.Name, o.lock.Name, err)
		}
	}
	for _, sc := range b.scopes {
		sc.lock(ctx)
		b.alive(sc)         // a holder has the dead-man's time from the start
		b.tripScope(sc, "") // an input at its trip level since TripAtStart
		sc.unlock()
	}
	b.started = true
	return nil
}

func (b *Bank) startScope(sc *scope) error {
	now := time.Now()
	rec, err := b.log.Scope(sc.name)
	if err != nil {
		return fmt.Errorf("actuator: %w", err)
	}
	initial := func(o *output) fence.State {
		if rec.Trip() != "" && o.Kind != KindPulse {
			return sc.safeState() // tripped since the boot rule decided
		}
		return o.initial()
	}
	for _, pass := range []fence.State{fence.StateOff, fence.StateOn} {
		for _, o := range sc.members {
			if initial(o) != pass {
				continue
			}
			if err := o.pin.Out(o.level(pass)); err != nil {
				return fmt.Errorf("actuator: %s: drive %s at start: %w", o.Name, pass, err)
			}
			// max_on counts from when the record says it went on, as far
			// as the wall clock can tell (never from the future).
			b.onFor(o, pass, time.Since(rec.Output(o.Name).ChangedAt))
		}
	}
	for _, o := range sc.members {
		if o.lock != nil {
			o.lock.lastOff = now // at start every member may just have gone off
		}
	}
	b.changed(sc)
	return nil
}

// drive drives o to s, waiting out o's interlock's dead time before an on
// and noting when an interlocked output went off. The scope's lock must be
// held.
func (b *Bank) drive(o *output, s fence.State) error {
	if s == fence.StateOn && o.lock != nil {
		// Until the dead time has passed on the monotonic clock, however
		// early a sleep returns (a timer on an emulated or loaded core
		// may wake a little before its time).
		until := o.lock.lastOff.Add(o.lock.DeadTime)
		for wait := time.Until(until); wait > 0; wait = time.Until(until) {
			time.Sleep(wait)
		}
	}
	start := time.Now()
	err := o.pin.Out(o.level(s))
	if ob := b.opts.Observer; ob != nil && ob.Driven != nil {
		ob.Driven(o.Name, time.Since(start), err)
	}
	if err == nil {
		b.onFor(o, s, 0)
	}
	if s == fence.StateOff && o.lock != nil {
		// Even a failed off may have moved the line: the dead time counts
		// from now either way.
		o.lock.lastOff = time.Now()
	}
	return err
}

// changed reports the scope's recorded states to Options.Changed. The
// scope's lock must be held.
func (b *Bank) changed(sc *scope) {
	if b.opts.Changed == nil {
		return
	}
	rec, err := b.log.Scope(sc.name)
	if err != nil {
		b.opts.Logger.Error("read scope", "scope", sc.name, "err", err)
		return
	}
	b.changedFrom(sc, rec)
}

func (b *Bank) changedFrom(sc *scope, rec fencelog.Scope) {
	if b.opts.Changed == nil {
		return
	}
	outs := make([]fence.Output, 0, len(sc.members))
	for _, o := range sc.members {
		outs = append(outs, rec.Output(o.Name))
	}
	b.opts.Changed(outs)
}

// Republish reports every scope's recorded states to Options.Changed, each
// under its scope's lock.
func (b *Bank) Republish() {
	for _, sc := range b.scopes {
		sc.lock(context.Background())
		b.changed(sc)
		sc.unlock()
	}
}

// Stalled names the scope whose lock has been held for longer than limit
// without progress (a drive that never returns, a commit that never
// does, a deadlock), and for how long; "" if none. A batch makes progress
// with each command an interlock takes one at a time, so only one
// command's work counts: its record, its dead time, its drives.
func (b *Bank) Stalled(limit time.Duration) (scope string, held time.Duration) {
	now := time.Since(epoch)
	for _, sc := range b.scopes {
		if moved := sc.moved.Load(); moved != 0 {
			if d := now - time.Duration(moved-1); d > limit && d > held {
				scope, held = sc.name, d
			}
		}
	}
	return scope, held
}

// Started reports whether Start has driven every output to its recorded
// (or boot) state.
func (b *Bank) Started() bool {
	b.startMu.Lock()
	defer b.startMu.Unlock()
	return b.started
}

// Names returns the actuator names in configuration order.
func (b *Bank) Names() []string { return slices.Clone(b.order) }

// Scope returns the fence scope of the named actuator.
func (b *Bank) Scope(actuator string) (string, bool) {
	o, ok := b.outs[actuator]
	if !ok {
		return "", false
	}
	return o.Scope, true
}

// Handle takes c through admission, durable record and drive, and returns
// the answer. An unknown actuator is rejected. It never panics on bad
// input. If ctx ends while c waits for its scope, c is not decided and the
// error is ctx's: the caller must leave the command unanswered (and, over
// MQTT, unacknowledged, so that the broker delivers it again).
func (b *Bank) Handle(ctx context.Context, c fence.Command) (fence.Result, error) {
	res, err := b.HandleBatch(ctx, []fence.Command{c})
	if err != nil {
		return fence.Result{}, err
	}
	return res[0], nil
}

// HandleBatch handles cmds, commands to one actuator in the order they
// came, as Handle would one after another, and returns their answers in
// that order; but the commands its scope admits share one commit, and so
// one sync of the store. Each is still driven only after that commit, and
// in order, each read back before the next is driven. If ctx ends while
// the batch waits for its scope, the commands from the first that waited
// on are not decided: HandleBatch returns the answers before it (those
// Authorize rejected) and ctx's error.
//
// An interlocked output's commands are decided one at a time under the
// lock (see MaxBatch): a caller that must look at something between them
// gives them one by one.
func (b *Bank) HandleBatch(ctx context.Context, cmds []fence.Command) ([]fence.Result, error) {
	results := make([]fence.Result, len(cmds))
	if len(cmds) == 0 {
		return results, nil
	}
	name := cmds[0].Actuator
	if i := slices.IndexFunc(cmds, func(c fence.Command) bool { return c.Actuator != name }); i >= 0 {
		return nil, fmt.Errorf("actuator: a batch of commands to %q and %q: a batch is one actuator's", name, cmds[i].Actuator)
	}
	o, ok := b.outs[name]
	if !ok {
		for i, c := range cmds {
			results[i] = b.Reject(c, fence.ReasonUnknownActuator, fmt.Errorf("unknown actuator %q", c.Actuator))
		}
		return results, nil
	}
	if !b.Started() {
		return nil, errors.New("actuator: Handle before Start")
	}
	var todo []int // the commands to decide: those authorized
	cloned := false
	for i, c := range cmds {
		if b.opts.Authorize != nil {
			// The command as it was signed: before shape fills in a default.
			if reason, err := b.opts.Authorize(c, o.Scope); err != nil {
				results[i] = b.Reject(c, reason, err)
				continue
			}
		}
		shaped, err := o.shape(c)
		if err != nil {
			results[i] = b.Reject(c, fence.ReasonInvalid, err)
			continue
		}
		if shaped.Pulse != c.Pulse {
			if !cloned {
				cmds, cloned = slices.Clone(cmds), true // the caller's stay as they came
			}
			cmds[i] = shaped
		}
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return results, nil
	}
	if err := o.scope.lock(ctx); err != nil {
		return results[:todo[0]], err // the rejections before the first that waited are answered
	}
	var decided []fence.Result
	if o.lock == nil {
		decided = b.handle(o, pick(cmds, todo))
	} else {
		// An interlocked output's command plans from the other members'
		// pins, which the commands before it may have moved: one at a
		// time, each planned after the one before it was driven.
		for _, i := range todo {
			o.scope.progress()
			decided = append(decided, b.handle(o, cmds[i:i+1])...)
		}
	}
	o.scope.unlock()
	for k, i := range todo {
		results[i] = decided[k]
		b.emit(cmds[i], o.Scope, decided[k])
	}
	return results, nil
}

// MaxBatch is the most commands of an actuator that HandleBatch should be
// given at once: one for an interlocked output, whose commands are
// planned and waited for (the dead time) one by one anyway; the link's
// own bound otherwise.
func (b *Bank) MaxBatch(actuator string) int {
	if o, ok := b.outs[actuator]; ok && (o.lock != nil || o.Kind == KindPulse) {
		return 1
	}
	return math.MaxInt
}

// shape checks c against o's kind and returns it as o takes it: a pulse
// output takes pulses (state on without pulse_ms is a pulse of its
// default width) and fence-only commands; a switch takes no pulse. An
// error rejects c before its scope is locked: nothing recorded or driven.
func (o *output) shape(c fence.Command) (fence.Command, error) {
	if c.Pulse > 0 && c.State == fence.StateNone {
		c.State = fence.StateOn // as the wire decodes a pulse: on, then back at rest
	}
	if o.Kind != KindPulse {
		if c.Pulse > 0 {
			return c, fmt.Errorf("%s is not a pulse output: send state on or off, without pulse_ms", o.Name)
		}
		return c, nil
	}
	switch {
	case c.State == fence.StateOff:
		return c, fmt.Errorf("%s is a pulse output, which rests off by itself: send pulse_ms (at most %d), or state on for its default pulse", o.Name, o.MaxPulse.Milliseconds())
	case c.State == fence.StateOn && c.Pulse == 0 && o.Pulse == 0:
		return c, fmt.Errorf("%s is a pulse output without a default width (pulse:): send pulse_ms, at most %d", o.Name, o.MaxPulse.Milliseconds())
	case c.State == fence.StateOn && c.Pulse == 0:
		c.Pulse = o.Pulse
	case c.Pulse > o.MaxPulse:
		return c, fmt.Errorf("pulse_ms %d is longer than %s's max_pulse (%d ms)", c.Pulse.Milliseconds(), o.Name, o.MaxPulse.Milliseconds())
	}
	return c, nil
}

func pick(cmds []fence.Command, at []int) []fence.Command {
	if len(at) == len(cmds) {
		return cmds
	}
	out := make([]fence.Command, len(at))
	for k, i := range at {
		out[k] = cmds[i]
	}
	return out
}

// handle admits cmds, commands to o, in one batch and carries out each
// decision in order. The scope's lock must be held.
func (b *Bank) handle(o *output, cmds []fence.Command) []fence.Result {
	reqs := make([]fencelog.Request, len(cmds))
	for i, c := range cmds {
		reqs[i] = fencelog.Request{Command: c, Plan: b.planner(o, c)}
	}
	start := time.Now()
	adms, err := b.log.AdmitBatch(o.Scope, o.scope.rules, reqs)
	if ob := b.opts.Observer; ob != nil && ob.Admitted != nil {
		ob.Admitted(time.Since(start), len(cmds))
	}
	results := make([]fence.Result, len(cmds))
	for i, c := range cmds {
		if err != nil {
			results[i] = b.notRecorded(o, c, err)
			continue
		}
		if adms[i].Outcome == fence.Applied {
			b.alive(o.scope) // a sign of life from the holder: the fence rose
		}
		results[i] = b.carryOut(o, c, adms[i])
	}
	return results
}

// notRecorded answers c, whose admission failed: nothing was recorded or
// driven.
func (b *Bank) notRecorded(o *output, c fence.Command, err error) fence.Result {
	res := fence.Result{ID: c.ID, Actuator: c.Actuator, Command: c.Fence, Outcome: fence.Failed,
		Error: "fence not recorded, nothing driven: " + err.Error()}
	if cur, err := b.log.Output(o.Scope, o.Name); err == nil {
		res.Fence, res.State = cur.Fence, cur.State
	}
	b.readBack(o, &res)
	return res
}

// carryOut drives what adm, c's admission, recorded, and answers c.
func (b *Bank) carryOut(o *output, c fence.Command, adm fencelog.Admission) fence.Result {
	res := fence.Result{ID: c.ID, Actuator: c.Actuator, Command: c.Fence}
	res.Outcome = adm.Outcome
	res.Fence, res.State = adm.Output.Fence, adm.Output.State
	switch adm.Outcome {
	case fence.Duplicate:
		// The original decision's fence, and the state now: the output
		// may have changed since the original was applied (a later
		// command, or the boot rule at a restart), and the answer must
		// not tell the controller it is as it asked when it is not.
		orig := adm.Original
		res.Fence = orig.Fence
		if orig.Refused != nil {
			// The original was refused; so is its redelivery, the same way.
			b.refuse(&res, orig.Refused, adm.Scope)
		} else if orig.Pulse > 0 {
			// Never again: the redelivery is told how the pulse went.
			status := orig.PulseStatus
			if status == "" {
				status = fence.PulseRunning
			}
			res.Pulse = &fence.Pulse{ID: orig.ID, Fence: orig.Fence, Width: orig.Pulse, Status: status}
		}
	case fence.Stale:
		res.Error = adm.Error
	case fence.Rejected:
		// A token jump: nothing recorded, nothing driven.
		res.Reason, res.Error = adm.Reason, adm.Error
	case fence.Applied:
		if b.opts.AfterCommit != nil {
			b.opts.AfterCommit(c)
		}
		if r := adm.Effect.Refusal; r != nil {
			b.refuse(&res, r, adm.Scope)
			b.changedFrom(o.scope, adm.Scope)
			break
		}
		for i, set := range adm.Effect.Sets {
			target := b.outs[set.Actuator]
			if err := b.drive(target, set.State); err != nil {
				res.Outcome = fence.Failed
				res.Error = fmt.Sprintf("fence %s recorded but %s could not be driven %s: %v", c.Fence, target.Name, set.State, err)
				if rest := adm.Effect.Sets[i+1:]; len(rest) > 0 {
					res.Error += fmt.Sprintf("; %s was not driven %s (the interlock's other member may still be on)", rest[len(rest)-1].Actuator, rest[len(rest)-1].State)
				}
				b.opts.Logger.Error("drive failed", "actuator", target.Name, "pin", target.PinName, "state", set.State.String(), "err", err)
				b.log.Record(fencelog.Entry{Scope: o.Scope, Actuator: o.Name, ID: c.ID, Holder: c.Holder, Signer: c.Signer,
					Command: c.Fence, State: c.State, Outcome: fence.Failed, Fence: res.Fence, Error: res.Error})
				break
			}
		}
		if p := adm.Output.Pulse; adm.Effect.Pulse > 0 && p != nil {
			res.Pulse = p
			// A pulse that did not start, or that the stopping gateway
			// cuts short, ends at once, at rest.
			cut := ""
			if res.Outcome == fence.Failed {
				cut = "interrupted: the output could not be driven on"
			} else if !b.pulseEnds(o, *p) {
				cut = pulseStopped
			}
			if cut != "" {
				if rec, ok := b.endPulse(o, *p, fence.PulseInterrupted, cut); ok {
					adm.Scope = rec
					res.Pulse = rec.Output(o.Name).Pulse
					res.State = fence.StateOff
				}
			}
		}
		b.changedFrom(o.scope, adm.Scope)
	}
	b.readBack(o, &res)
	return res
}

// readBack sets res.Actual if o's output does not read back as its
// recorded state res.State. The scope's lock must be held.
func (b *Bank) readBack(o *output, res *fence.Result) {
	if res.State == fence.StateNone {
		return
	}
	high, err := o.pin.Level()
	switch {
	case err != nil:
		res.Actual = "unknown"
	case high != o.level(res.State):
		res.Actual = fence.StateOff.String()
		if high == o.level(fence.StateOn) {
			res.Actual = fence.StateOn.String()
		}
	}
}

// planner returns the effect rule of c: a tripped scope refuses ons and
// is released by a reset once its trip input left its trip level; an
// output that requires an input's level refuses an on without it; a pulse
// output refuses a pulse while it pulses; an interlock refuses (or breaks
// before it makes) an on next to a member that is on, by its record or by
// its pin (a failed drive left the record behind, or it cannot be read).
// Inputs and pins are read here, under the scope's lock, before the
// record's transaction. The scope's lock must be held.
func (b *Bank) planner(o *output, c fence.Command) fencelog.Planner {
	var veto *fence.Refusal
	if c.State == fence.StateOn && o.Requires != nil {
		veto = b.vetoOf(o)
	}
	var stillTripped string
	if c.Reset {
		stillTripped = b.tripping(o.scope)
	}
	inner := b.stateRule(o, c)
	return func(rec fencelog.Scope) fence.Effect {
		if trip := rec.Trip(); trip != "" {
			switch {
			case c.State != fence.StateNone && c.State != o.scope.safeState() && o.Kind != KindPulse, c.Pulse > 0:
				return fence.Effect{Refusal: &fence.Refusal{Reason: fence.ReasonTrip, Error: fmt.Sprintf(
					"scope %s is held at its safe state (%s): %s; send a fence-only command with reset once that is cleared", o.Scope, o.scope.safeState(), trip)}}
			case c.Reset && stillTripped != "":
				return fence.Effect{Refusal: &fence.Refusal{Reason: fence.ReasonTrip, Error: fmt.Sprintf(
					"scope %s cannot be reset: %s", o.Scope, stillTripped)}}
			case c.Reset:
				e := fence.Plain(c)
				e.Reset = true
				return e
			}
		}
		if veto != nil {
			return fence.Effect{Refusal: veto}
		}
		if inner != nil {
			return inner(rec)
		}
		return fence.Plain(c)
	}
}

// stateRule is the effect rule of a pulse or an interlocked output's on;
// nil for anything else. The scope's lock must be held.
func (b *Bank) stateRule(o *output, c fence.Command) fencelog.Planner {
	if o.Kind == KindPulse && c.Pulse > 0 {
		// A pulse output is on only while it pulses.
		return func(rec fencelog.Scope) fence.Effect {
			return fence.PulseEffect(c, rec.Output(o.Name).State == fence.StateOn)
		}
	}
	if o.lock == nil || c.State != fence.StateOn {
		return nil
	}
	pinOn := map[string]bool{}
	for _, m := range o.lock.Members {
		if m == o.Name {
			continue
		}
		mo := b.outs[m]
		high, err := mo.pin.Level()
		pinOn[m] = err != nil || high == mo.level(fence.StateOn)
	}
	g := &o.lock.Interlock
	return func(rec fencelog.Scope) fence.Effect {
		return g.Effect(c, func(a string) bool { return rec.Output(a).State == fence.StateOn || pinOn[a] })
	}
}

// pulseEnds has the pulse p of o, just started, end after its width;
// false if the bank is stopping, and it does not. The scope's lock must be
// held.
func (b *Bank) pulseEnds(o *output, p fence.Pulse) bool {
	b.pulseMu.Lock()
	defer b.pulseMu.Unlock()
	if b.stopped {
		return false
	}
	if b.pulses == nil {
		b.pulses = make(map[string]*time.Timer)
	}
	b.pulseWG.Add(1) // done by the end, or by Stop if it stops the timer first
	b.pulses[o.Name] = time.AfterFunc(p.Width, func() {
		defer b.pulseWG.Done()
		// Back to rest at the width, whoever holds the scope's lock (a
		// command waiting out a dead time, a slow commit): the pin of a
		// pulse output moves only for its pulses, and a pulse that
		// arrives before the end is recorded is refused busy, so the
		// drive needs no lock; the record of the end, next, does.
		why := fmt.Sprintf("done: on for %v, then back at rest", p.Width) + b.toRest(o)
		o.scope.lock(context.Background())
		defer o.scope.unlock()
		b.pulseMu.Lock()
		delete(b.pulses, o.Name)
		b.pulseMu.Unlock()
		if rec, ok := b.recordPulseEnd(o, p, fence.PulseDone, why); ok {
			b.changedFrom(o.scope, rec)
		}
	})
	return true
}

// endPulse drives o, whose pulse p runs, back to rest and records how the
// pulse ended; ok is false if the record was not p running. The scope's
// lock must be held.
func (b *Bank) endPulse(o *output, p fence.Pulse, status, why string) (fencelog.Scope, bool) {
	return b.recordPulseEnd(o, p, status, why+b.toRest(o))
}

// pulseStopped is why a pulse the stopping gateway cut short ended.
const pulseStopped = "interrupted: the gateway stopped while it ran"

// toRest drives the pulse output o back to rest; it returns "", or what
// to add to the pulse's end if the drive failed.
func (b *Bank) toRest(o *output) string {
	err := b.drive(o, fence.StateOff)
	if err == nil {
		return ""
	}
	b.opts.Logger.Error("drive failed at the end of a pulse", "actuator", o.Name, "pin", o.PinName, "err", err)
	return fmt.Sprintf("; but the output could not be driven off: %v", err)
}

// recordPulseEnd records how the pulse p of o ended; ok is false if the
// record was not p running. The scope's lock must be held.
func (b *Bank) recordPulseEnd(o *output, p fence.Pulse, status, why string) (fencelog.Scope, bool) {
	rec, ok, err := b.log.EndPulse(o.Scope, o.Name, p, status, why)
	if err != nil {
		b.opts.Logger.Error("record the end of a pulse", "actuator", o.Name, "err", err)
		return rec, false
	}
	return rec, ok
}

// TripAtStart trips the scopes whose trip input is at its trip level now
// (level reads an input; one that cannot be read trips its scope too):
// recorded tripped, their outputs at the safe state, before Lines decides
// the level at which each line is taken over, so that no output of a
// tripped scope is on for a moment at start. Call it after New and before
// Lines, with the inputs read before the outputs are taken over.
func (b *Bank) TripAtStart(level func(input string) (bool, error)) error {
	for _, sc := range b.scopes {
		if sc.trip == nil {
			continue
		}
		high, err := level(sc.trip.Input)
		why := "trip: " + sc.trip.String()
		switch {
		case err != nil:
			why = fmt.Sprintf("trip input %s cannot be read: %v", sc.trip.Input, err)
		case high != sc.trip.High:
			continue
		}
		rec, err := b.log.Scope(sc.name)
		if err != nil {
			return fmt.Errorf("actuator: %w", err)
		}
		if rec.Trip() != "" {
			continue // the boot rule holds it already
		}
		for _, o := range sc.members {
			if o.Kind != KindPulse {
				o.start = start{state: sc.safeState()}
			}
		}
		b.opts.Logger.Warn("scope tripped at start: its outputs are taken over at the safe state; a reset command releases it once the input is cleared", "scope", sc.name, "why", why)
		if err := b.log.SetTrip(sc.name, why, changesOf(sc, sc.toSafe(rec), fencelog.OutcomeTrip, why)); err != nil {
			return fmt.Errorf("actuator: %w", err)
		}
	}
	return nil
}

// inputNames returns the inputs the bank's rules read.
func (b *Bank) inputNames() []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, name := range b.order {
		if r := b.outs[name].Requires; r != nil {
			add(r.Input)
		}
	}
	for _, sc := range b.scopes {
		if sc.trip != nil {
			add(sc.trip.Input)
		}
	}
	return names
}

// AttachInputs gets every input the bank's rules read (input returns it
// by name). Call it before Start.
func (b *Bank) AttachInputs(input func(name string) (Input, error)) error {
	b.inputs = map[string]Input{}
	for _, name := range b.inputNames() {
		in, err := input(name)
		if err != nil {
			return fmt.Errorf("actuator: input %s: %w", name, err)
		}
		b.inputs[name] = in
	}
	return nil
}

// level reads input name; an input that cannot be read is an error.
func (b *Bank) level(name string) (bool, error) {
	in := b.inputs[name]
	if in == nil {
		return false, errors.New("not attached")
	}
	return in.Level()
}

// vetoOf returns the refusal of an on for o, whose Requires is set, if
// its input is not at the level (or cannot be read); nil if it is.
func (b *Bank) vetoOf(o *output) *fence.Refusal {
	r := o.Requires
	high, err := b.level(r.Input)
	switch {
	case err != nil:
		return &fence.Refusal{Reason: fence.ReasonInterlock, Error: fmt.Sprintf("interlock: %s cannot be read (%v); %s needs %s to come on", r.Input, err, o.Name, r)}
	case high != r.High:
		return &fence.Refusal{Reason: fence.ReasonInterlock, Error: fmt.Sprintf("interlock: %s; %s needs %s to come on", InputLevel{r.Input, high}, o.Name, r)}
	}
	return nil
}

// tripping says why sc's trip holds it now ("" if its input is not at
// its trip level, or sc has no trip): an input that cannot be read holds
// it too.
func (b *Bank) tripping(sc *scope) string {
	if sc.trip == nil {
		return ""
	}
	high, err := b.level(sc.trip.Input)
	switch {
	case err != nil:
		return fmt.Sprintf("trip input %s cannot be read: %v", sc.trip.Input, err)
	case high == sc.trip.High:
		return "trip: " + sc.trip.String()
	}
	return ""
}

// InputChanged tells the bank that input name is now at level high: a
// scope it trips goes to its safe state and is held there. The board
// calls it (through the service) for every change.
//
// The trip is the event's: a contact that is back by the time the scope's
// lock is free (a command held it through a dead time) still trips it.
// Events before Start attached the pins are left to Start, which reads
// the trip inputs itself.
func (b *Bank) InputChanged(name string, high bool) {
	if !b.attached.Load() {
		return
	}
	for _, sc := range b.scopes {
		if sc.trip != nil && sc.trip.Input == name && sc.trip.High == high {
			sc.lock(context.Background())
			b.tripScope(sc, "trip: "+sc.trip.String())
			sc.unlock()
		}
	}
}

// tripScope records sc tripped (why; "" reads the trip input now and
// does nothing if it is not at its trip level), with its outputs at the
// safe state, drives them, and publishes the scope, unless it is tripped
// already. The scope's lock must be held.
func (b *Bank) tripScope(sc *scope, why string) {
	if why == "" {
		why = b.tripping(sc)
	}
	if why == "" {
		return
	}
	rec, err := b.log.Scope(sc.name)
	if err != nil {
		b.opts.Logger.Error("trip: read scope", "scope", sc.name, "err", err)
		return
	}
	if rec.Trip() != "" {
		return
	}
	b.opts.Logger.Warn("scope tripped to its safe state; a reset command releases it once the input is cleared", "scope", sc.name, "why", why)
	b.setStates(sc, sc.toSafe(rec), fencelog.OutcomeTrip, why, true)
}

// toSafe lists what sending sc to its safe state changes, by rec: every
// output not at it (a pulse output rests off anyway).
func (sc *scope) toSafe(rec fencelog.Scope) []fence.Set {
	var sets []fence.Set
	for _, o := range sc.members {
		if o.Kind != KindPulse && rec.Output(o.Name).State != sc.safeState() {
			sets = append(sets, fence.Set{Actuator: o.Name, State: sc.safeState()})
		}
	}
	return sets
}

// changesOf are sets as the store records them: set by the gateway for
// why, the outcome as their holder.
func changesOf(sc *scope, sets []fence.Set, outcome fence.Outcome, why string) []fencelog.StateChange {
	changes := make([]fencelog.StateChange, 0, len(sets))
	for _, set := range sets {
		changes = append(changes, fencelog.StateChange{Scope: sc.name, Actuator: set.Actuator, State: set.State,
			Holder: string(outcome), Why: why, Outcome: outcome})
	}
	return changes
}

// onFor notes that o was driven to s, on for elapsed already (0: from
// now), and has max_on switch it off in time. The scope's lock must be
// held.
func (b *Bank) onFor(o *output, s fence.State, elapsed time.Duration) {
	if o.MaxOn <= 0 {
		return // nothing to count (and a pulse's end drives without the lock)
	}
	if s != fence.StateOn {
		o.onSince = time.Time{}
		if o.maxOn != nil {
			o.maxOn.Stop()
		}
		return
	}
	if !o.onSince.IsZero() {
		return // on already: it counts from the first on
	}
	elapsed = min(max(elapsed, 0), o.MaxOn)
	o.onSince = time.Now().Add(-elapsed)
	b.timer(&o.maxOn, o.MaxOn-elapsed, func() { b.maxOnFired(o) })
}

// timer (re)arms *t to run f after d, unless the bank is stopping.
func (b *Bank) timer(t **time.Timer, d time.Duration, f func()) {
	b.pulseMu.Lock()
	defer b.pulseMu.Unlock()
	if b.stopped {
		return
	}
	if *t == nil {
		*t = time.AfterFunc(d, f)
		return
	}
	(*t).Reset(d)
}

// maxOnFired switches o off if it has been on for its max_on.
func (b *Bank) maxOnFired(o *output) {
	sc := o.scope
	sc.lock(context.Background())
	defer sc.unlock()
	if o.onSince.IsZero() {
		return // switched off meanwhile
	}
	if left := o.MaxOn - time.Since(o.onSince); left > 0 {
		b.timer(&o.maxOn, left, func() { b.maxOnFired(o) })
		return
	}
	why := fmt.Sprintf("max_on: on for %v, the longest it may be", o.MaxOn)
	b.opts.Logger.Warn("output switched off: on for its max_on", "actuator", o.Name, "max_on", o.MaxOn.String())
	b.setStates(sc, []fence.Set{{Actuator: o.Name, State: fence.StateOff}}, fencelog.OutcomeMaxOn, why, false)
}

// alive notes a sign of life from sc's holder and arms its dead-man. The
// scope's lock must be held.
func (b *Bank) alive(sc *scope) {
	if sc.safe.After <= 0 {
		return
	}
	sc.alive, sc.tripped = time.Now(), false
	b.timer(&sc.deadman, sc.safe.After, func() { b.deadmanFired(sc) })
}

// deadmanFired sends sc to its safe state if no command raised its fence
// for its dead-man's time.
func (b *Bank) deadmanFired(sc *scope) {
	sc.lock(context.Background())
	defer sc.unlock()
	if left := sc.safe.After - time.Since(sc.alive); left > 0 {
		b.timer(&sc.deadman, left, func() { b.deadmanFired(sc) })
		return
	}
	sc.tripped = true
	b.goSafe(sc, fmt.Sprintf("dead-man: no command raised scope %s's fence for %v", sc.name, sc.safe.After))
}

// Disconnected sends every scope whose dead-man says on_disconnect to
// its safe state: the broker connection was lost.
func (b *Bank) Disconnected(err error) {
	for _, sc := range b.scopes {
		if !sc.safe.OnDisconnect {
			continue
		}
		sc.lock(context.Background())
		b.goSafe(sc, fmt.Sprintf("dead-man: the broker connection was lost (%v)", err))
		sc.unlock()
	}
}

// goSafe drives sc's outputs to its safe state, offs first, recording
// each that changes (the fence does not move). The scope's lock must be
// held.
func (b *Bank) goSafe(sc *scope, why string) {
	b.pulseMu.Lock()
	stopped := b.stopped
	b.pulseMu.Unlock()
	if stopped {
		return
	}
	rec, err := b.log.Scope(sc.name)
	if err != nil {
		b.opts.Logger.Error("dead-man: read scope", "scope", sc.name, "err", err)
		return
	}
	sets := sc.toSafe(rec)
	b.opts.Logger.Warn("scope goes to its safe state", "scope", sc.name, "state", sc.safeState().String(), "changed", len(sets), "why", why)
	if len(sets) > 0 {
		b.setStates(sc, sets, fencelog.OutcomeSafe, why, false)
	}
}

// setStates records sets (without touching the fence; with trip, the
// scope tripped too, why), then drives them, and publishes the scope's
// states. The scope's lock must be held.
func (b *Bank) setStates(sc *scope, sets []fence.Set, outcome fence.Outcome, why string, trip bool) {
	changes := changesOf(sc, sets, outcome, why)
	record := b.log.SetStates
	if trip {
		record = func(ch []fencelog.StateChange) error { return b.log.SetTrip(sc.name, why, ch) }
	}
	if err := record(changes); err != nil {
		b.opts.Logger.Error("record states", "scope", sc.name, "why", why, "err", err)
		return
	}
	b.driveSets(sets, why)
	b.changed(sc)
}

// driveSets drives sets, offs first. The scope's lock must be held.
func (b *Bank) driveSets(sets []fence.Set, why string) {
	for _, pass := range []fence.State{fence.StateOff, fence.StateOn} {
		for _, set := range sets {
			if set.State != pass {
				continue
			}
			if err := b.drive(b.outs[set.Actuator], set.State); err != nil {
				b.opts.Logger.Error("drive failed", "actuator", set.Actuator, "state", set.State.String(), "why", why, "err", err)
			}
		}
	}
}

// Stop ends the running pulses now, at rest, recorded as interrupted, and
// starts no more timers. The service calls it when it stops; a crash
// leaves the pulses to the next start, which does the same.
func (b *Bank) Stop() {
	b.pulseMu.Lock()
	b.stopped = true
	running := make([]string, 0, len(b.pulses))
	for name, t := range b.pulses {
		if t.Stop() {
			running = append(running, name)
			b.pulseWG.Done() // its end will not run
		}
	}
	b.pulses = nil
	for _, sc := range b.scopes {
		if sc.deadman != nil {
			sc.deadman.Stop()
		}
		for _, o := range sc.members {
			if o.maxOn != nil {
				o.maxOn.Stop()
			}
		}
	}
	b.pulseMu.Unlock()
	for _, name := range running {
		o := b.outs[name]
		o.scope.lock(context.Background())
		if cur, err := b.log.Output(o.Scope, o.Name); err == nil && cur.Pulse != nil && cur.Pulse.Status == fence.PulseRunning {
			if rec, ok := b.endPulse(o, *cur.Pulse, fence.PulseInterrupted, pulseStopped); ok {
				b.changedFrom(o.scope, rec)
			}
		}
		o.scope.unlock()
	}
	b.pulseWG.Wait() // the ends that had begun: done before the board closes
}

// refuse makes res the answer to a command that raised the fence but was
// refused r.
func (b *Bank) refuse(res *fence.Result, r *fence.Refusal, rec fencelog.Scope) {
	res.Outcome = fence.Rejected
	res.Reason = r.Reason
	res.Error = r.Error
	if r.Blocker != "" {
		blocking := rec.Output(r.Blocker)
		res.Blocking = &blocking
	}
}

// Reject answers c as rejected for reason (a fence.Reason* code) because
// of err, audits it, and changes nothing. The answer carries the
// actuator's current fence and state when the actuator exists.
func (b *Bank) Reject(c fence.Command, reason string, err error) fence.Result {
	res := fence.Result{ID: c.ID, Actuator: c.Actuator, Command: c.Fence, Outcome: fence.Rejected, Reason: reason, Error: err.Error()}
	e := fencelog.Entry{Actuator: c.Actuator, ID: c.ID, Holder: c.Holder, Signer: c.Signer, Command: c.Fence, State: c.State,
		Outcome: fence.Rejected, Reason: reason, Error: res.Error}
	if o, ok := b.outs[c.Actuator]; ok {
		e.Scope = o.Scope
		if cur, err := b.log.Output(o.Scope, o.Name); err == nil {
			res.Fence, res.State = cur.Fence, cur.State
			e.Fence = cur.Fence
		}
	}
	b.log.Record(e)
	b.emit(c, e.Scope, res)
	return res
}

// FindAudit returns the newest audit entries that q selects, oldest first.
func (b *Bank) FindAudit(q fencelog.AuditQuery) ([]fencelog.Entry, error) { return b.log.FindAudit(q) }

// Output returns the recorded state of the named actuator.
func (b *Bank) Output(name string) (fence.Output, error) {
	o, ok := b.outs[name]
	if !ok {
		return fence.Output{}, fmt.Errorf("actuator: unknown actuator %q", name)
	}
	return b.log.Output(o.Scope, o.Name)
}

// Statuses returns every actuator's recorded state and read-back level, in
// configuration order. Each scope is read under its lock, so it never shows
// a command between its record and its drive.
func (b *Bank) Statuses() ([]Status, error) {
	out := make([]Status, 0, len(b.order))
	for _, sc := range b.scopes {
		sc.lock(context.Background())
		rec, err := b.log.Scope(sc.name)
		if err != nil {
			sc.unlock()
			return nil, err
		}
		for _, o := range sc.members {
			st := Status{Output: rec.Output(o.Name), PinName: o.PinName, ActiveLow: o.ActiveLow, Kind: o.Kind}
			st.Trip = rec.Trip()
			if sc.safe.After > 0 && !sc.alive.IsZero() {
				d := &DeadmanStatus{Safe: sc.safe, Tripped: sc.tripped}
				if !sc.tripped {
					d.Left = max(sc.safe.After-time.Since(sc.alive), 0)
				}
				st.Deadman = d
			}
			if o.lock != nil {
				st.Interlock = o.lock.Name
			}
			if o.pin == nil {
				st.LevelErr = errors.New("not started")
			} else {
				st.High, st.LevelErr = o.pin.Level()
				if c, ok := o.pin.(interface{ Drives() uint64 }); ok {
					n := c.Drives()
					st.Drives = &n
				}
			}
			out = append(out, st)
		}
		sc.unlock()
	}
	index := make(map[string]int, len(b.order))
	for i, name := range b.order {
		index[name] = i
	}
	slices.SortFunc(out, func(x, y Status) int { return index[x.Actuator] - index[y.Actuator] })
	return out, nil
}

// Subscribe returns a channel of decisions and a function that ends the
// subscription. Delivery never blocks a decision: a subscriber that falls
// more than buf events behind misses events.
func (b *Bank) Subscribe(buf int) (<-chan Event, func()) {
	ch := make(chan Event, buf)
	b.subMu.Lock()
	if b.subs == nil {
		b.subs = make(map[chan Event]struct{})
	}
	b.subs[ch] = struct{}{}
	b.subMu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.subMu.Lock()
			delete(b.subs, ch)
			b.subMu.Unlock()
		})
	}
}

func (b *Bank) emit(c fence.Command, scope string, res fence.Result) {
	e := Event{At: time.Now(), Scope: scope, Holder: c.Holder, State: c.State, Result: res}
	if ob := b.opts.Observer; ob != nil && ob.Decided != nil {
		ob.Decided(e)
	}
	b.subMu.Lock()
	defer b.subMu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- e:
		default:
		}
	}
}
