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
	"slices"
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
	// An output that answers with neither level (a register used as a
	// coil, holding another value after its device's power came back)
	// says so with an error that has a method NeitherLevel() bool
	// returning true; a watched output found so is driven as the boot
	// rule says.
	Level() (high bool, err error)
}

// neitherLevel reports whether err, from a Pin's Level, says that the
// output answered at neither level.
func neitherLevel(err error) bool {
	var n interface{ NeitherLevel() bool }
	return errors.As(err, &n) && n.NeitherLevel()
}

// Input is one digital input, as a board provides it: the one input
// interface of the project, as Pin is the one output interface.
type Input interface {
	// Level reads the input's (debounced) level.
	Level() (high bool, err error)
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
	// Observer, if set, is told what the bank does: its decisions (for the
	// metrics, the log and the event stream) and its timings.
	Observer *Observer
	// Safe are, per scope name, the scopes' dead-men.
	Safe map[string]Safe
	// Trips are, per scope name, the input level that sends the scope to
	// its safe state (its Safe.State; off without one) and holds it there
	// until a reset command from its holder, once the input has left it.
	Trips map[string]InputLevel
	// Clock times the dead-man, max_on, pulses, dead times and Stalled;
	// nil is the real clock.
	Clock Clock
}

// Observer receives the bank's measurements. Any of its funcs may be nil;
// none may block: they run on the decision path.
type Observer struct {
	// Decided gets every answered command.
	Decided func(Event)
	// Admitted gets each admission: its commands (one actuator's, taken
	// together) and how long deciding and recording them took, the
	// store's commit included.
	Admitted func(took time.Duration, commands int)
	// Driven gets each drive of an output and how long it took.
	Driven func(actuator string, took time.Duration, err error)
	// Watched gets a watched output's health (Spec.Poll) when it went
	// down, answered again, or was found changed behind the gateway's
	// back. It is called under the scope's lock and must not block.
	Watched func(actuator string, h Health)
}

// Bank is the set of configured actuators. Its methods are safe for
// concurrent use.
type Bank struct {
	store  *fencelog.Store
	opts   Options
	clock  Clock
	outs   map[string]*output // immutable after New
	order  []string           // actuator names in configuration order
	scopes []*guard           // in order of their first actuator

	startMu sync.Mutex
	started bool

	inputs   map[string]Input // set by AttachInputs before Start
	attached atomic.Bool      // Start attached the pins: input changes may drive them

	pulseWG sync.WaitGroup   // the pulses' ends that may still run
	pulseMu sync.Mutex       // guards pulses and stopped
	pulses  map[string]Timer // the running pulses' ends, by actuator
	stopped bool             // Stop has begun: no pulse starts a timer

	healthMu sync.Mutex        // guards each output's health for readers without its scope's lock
	watchMu  sync.Mutex        // guards watching
	watching map[*output]Timer // the watched outputs' next checks; nil until Start and after Stop
	watchWG  sync.WaitGroup    // the checks that may still run
}

// New checks the actuators and interlocks, binds every actuator to its
// scope in the store (an actuator the configuration moved brings its old
// scope's fence along, see fencelog.Store.Bind), and applies the boot rule:
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
func New(store *fencelog.Store, specs []Spec, opts *Options) (*Bank, error) {
	b := &Bank{store: store, outs: make(map[string]*output)}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.Logger == nil {
		b.opts.Logger = slog.New(slog.DiscardHandler)
	}
	b.clock = b.opts.Clock
	if b.clock == nil {
		b.clock = realClock{}
	}
	epoch := b.clock.Now()
	byScope := map[string]*guard{}
	for _, s := range specs {
		if s.Name == "" {
			return nil, errors.New("actuator: empty actuator name")
		}
		if _, dup := b.outs[s.Name]; dup {
			return nil, fmt.Errorf("actuator: duplicate actuator %q", s.Name)
		}
		if err := s.checkScope(); err != nil {
			return nil, err
		}
		boot, err := ParseBoot(string(s.Boot))
		if err != nil {
			var se *SpecError
			if errors.As(err, &se) {
				se.Actuator = s.Name // ParseBoot does not know it
			}
			return nil, err
		}
		s.Boot = boot
		if err := s.checkKind(); err != nil {
			return nil, err
		}
		sc := byScope[s.Scope]
		if sc == nil {
			sc = &guard{name: s.Scope, sem: make(chan struct{}, 1)}
			byScope[s.Scope] = sc
			b.scopes = append(b.scopes, sc)
		}
		o := &output{Spec: s, guard: sc}
		sc.members = append(sc.members, o)
		b.outs[s.Name] = o
		b.order = append(b.order, s.Name)
	}
	for _, sc := range b.scopes {
		sc.clock, sc.epoch = b.clock, epoch
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

// Stop ends the running pulses now, at rest, recorded as interrupted, and
// starts no more timers. The service calls it when it stops; a crash
// leaves the pulses to the next start, which does the same.
func (b *Bank) Stop() {
	b.stopWatching()
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
		o.guard.lock(context.Background())
		if cur, err := b.store.Output(o.Scope, o.Name); err == nil && cur.Pulse != nil && cur.Pulse.Status == fence.PulseRunning {
			if rec, ok := b.endPulse(o, *cur.Pulse, fence.PulseInterrupted, pulseStopped); ok {
				b.changedFrom(o.guard, rec)
			}
		}
		o.guard.unlock()
	}
	b.pulseWG.Wait() // the ends that had begun: done before the board closes
}

// Output returns the recorded state of the named actuator.
func (b *Bank) Output(name string) (fence.Output, error) {
	o, ok := b.outs[name]
	if !ok {
		return fence.Output{}, fmt.Errorf("actuator: unknown actuator %q", name)
	}
	return b.store.Output(o.Scope, o.Name)
}
