// Package actuator owns fencegate's outputs: it admits each command through
// the durable fence record and only then drives the output.
//
// # Concepts
//
// A [Bank] holds the configured actuators, each bound to a [Pin] that a board
// provides, and the fence scope each belongs to. [Bank.Handle] takes one
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
//   - [Bank.Reconcile] drives every output to its recorded state (boot: last)
//     or to its boot state (boot: on/off, recorded without touching the
//     fence) before any command is handled.
package actuator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// Pin is one physical (or simulated) output, as a board provides it.
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

// Spec describes one actuator for New.
type Spec struct {
	Name      string
	Scope     string // fence scope; empty means Name
	PinName   string // for people: the board's name for Pin
	ActiveLow bool   // on drives the pin low
	Boot      Boot   // empty means BootLast
	Pin       Pin
}

// Options configure a Bank. Nil or zero values are usable.
type Options struct {
	// Logger receives drive failures. Nil discards.
	Logger *slog.Logger
	// AfterCommit, if set, is called after a command's fence was recorded
	// durably and before its output is driven. It exists for crash tests
	// and the simulator's crash scenario.
	AfterCommit func(fence.Command)
}

// Bank is the set of configured actuators. Its methods are safe for
// concurrent use.
type Bank struct {
	log   *fencelog.Log
	opts  Options
	outs  map[string]*output // immutable after New
	order []string           // actuator names in configuration order
	locks map[string]*sync.Mutex

	subMu sync.Mutex // guards subs
	subs  map[chan Event]struct{}
}

// Event is one decision, as Subscribe delivers it.
type Event struct {
	At     time.Time // wall clock, for people only
	Scope  string
	Holder string
	State  fence.State // the state the command asked for
	Result fence.Result
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
	b.subMu.Lock()
	defer b.subMu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

type output struct {
	Spec
}

// Status is an actuator's recorded state together with its read-back level.
type Status struct {
	fence.Output
	PinName   string
	ActiveLow bool
	// High is the level read back from the pin; valid if LevelErr is nil.
	High     bool
	LevelErr error
	// Drives counts the drives of the pin by this process, for boards that
	// count them (the sim board); nil otherwise.
	Drives *uint64
}

// New builds a Bank over log. Actuator names must be unique and non-empty,
// and every Spec needs a Pin.
func New(log *fencelog.Log, specs []Spec, opts *Options) (*Bank, error) {
	b := &Bank{log: log, outs: make(map[string]*output), locks: make(map[string]*sync.Mutex)}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.Logger == nil {
		b.opts.Logger = slog.New(slog.DiscardHandler)
	}
	for _, s := range specs {
		if s.Name == "" {
			return nil, errors.New("actuator: empty actuator name")
		}
		if _, dup := b.outs[s.Name]; dup {
			return nil, fmt.Errorf("actuator: duplicate actuator %q", s.Name)
		}
		if s.Pin == nil {
			return nil, fmt.Errorf("actuator: %s: no pin", s.Name)
		}
		if s.Scope == "" {
			s.Scope = s.Name
		}
		switch s.Boot {
		case "":
			s.Boot = BootLast
		case BootLast, BootOff, BootOn:
		default:
			return nil, fmt.Errorf("actuator: %s: unknown boot policy %q", s.Name, s.Boot)
		}
		b.outs[s.Name] = &output{Spec: s}
		b.order = append(b.order, s.Name)
		if b.locks[s.Scope] == nil {
			b.locks[s.Scope] = new(sync.Mutex)
		}
	}
	return b, nil
}

// Names returns the actuator names in configuration order.
func (b *Bank) Names() []string { return append([]string(nil), b.order...) }

// Reconcile binds every actuator to its scope in the store (an actuator
// the configuration moved brings its old scope's fence along, see
// fencelog.Log.Bind), then drives every output according to its boot
// policy. Call it once at start, before handling commands. It stops at the
// first failure.
func (b *Bank) Reconcile() error {
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
	for _, name := range b.order {
		o := b.outs[name]
		mu := b.locks[o.Scope]
		mu.Lock()
		err := b.reconcile(o)
		mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func (b *Bank) reconcile(o *output) error {
	var state fence.State
	switch o.Boot {
	case BootLast:
		rec, err := b.log.Output(o.Scope, o.Name)
		if err != nil {
			return fmt.Errorf("actuator: %s: %w", o.Name, err)
		}
		state = rec.State
		if state == fence.StateNone {
			// Never commanded: off, and recorded so, so that the state
			// topic and the API say what the output does.
			state = fence.StateOff
			if _, err := b.log.SetState(o.Scope, o.Name, state, "boot"); err != nil {
				return fmt.Errorf("actuator: %s: %w", o.Name, err)
			}
		}
	case BootOff, BootOn:
		state = fence.StateOff
		if o.Boot == BootOn {
			state = fence.StateOn
		}
		if _, err := b.log.SetState(o.Scope, o.Name, state, "boot"); err != nil {
			return fmt.Errorf("actuator: %s: %w", o.Name, err)
		}
	}
	if err := o.Pin.Out(o.level(state)); err != nil {
		return fmt.Errorf("actuator: %s: drive %s at boot: %w", o.Name, state, err)
	}
	return nil
}

func (o *output) level(s fence.State) bool { return (s == fence.StateOn) != o.ActiveLow }

// Handle takes c through admission, durable record and drive, and returns the
// answer. It never panics on bad input; an unknown actuator is rejected.
func (b *Bank) Handle(ctx context.Context, c fence.Command) fence.Result {
	o, ok := b.outs[c.Actuator]
	if !ok {
		return b.Reject(c, fmt.Errorf("unknown actuator %q", c.Actuator))
	}
	mu := b.locks[o.Scope]
	mu.Lock()
	res := b.handle(o, c)
	mu.Unlock()
	b.emit(c, o.Scope, res)
	return res
}

func (b *Bank) handle(o *output, c fence.Command) fence.Result {
	res := fence.Result{ID: c.ID, Actuator: c.Actuator, Command: c.Fence}
	adm, err := b.log.Admit(o.Scope, c)
	if err != nil {
		res.Outcome = fence.Failed
		res.Error = "fence not recorded, nothing driven: " + err.Error()
		if cur, err := b.log.Output(o.Scope, o.Name); err == nil {
			res.Fence, res.State = cur.Fence, cur.State
		}
		return res
	}
	res.Outcome = adm.Outcome
	res.Fence, res.State = adm.Output.Fence, adm.Output.State
	switch adm.Outcome {
	case fence.Duplicate:
		res.Fence, res.State = adm.Original.Fence, adm.Original.State
		if res.State == fence.StateNone {
			res.State = adm.Output.State
		}
	case fence.Stale:
		res.Error = adm.Reason
	case fence.Applied:
		if b.opts.AfterCommit != nil {
			b.opts.AfterCommit(c)
		}
		if c.State == fence.StateNone {
			break
		}
		if err := o.Pin.Out(o.level(c.State)); err != nil {
			res.Outcome = fence.Failed
			res.Error = fmt.Sprintf("fence %s recorded but %s could not be driven %s: %v", c.Fence, o.Name, c.State, err)
			b.opts.Logger.Error("drive failed", "actuator", o.Name, "pin", o.PinName, "state", c.State.String(), "err", err)
			b.log.Record(fencelog.Entry{Scope: o.Scope, Actuator: o.Name, ID: c.ID, Holder: c.Holder,
				Command: c.Fence, State: c.State, Outcome: fence.Failed, Fence: res.Fence, Error: res.Error})
		}
	}
	return res
}

// Reject answers c as rejected for reason, audits it, and changes nothing.
// The answer carries the actuator's current fence and state when the
// actuator exists.
func (b *Bank) Reject(c fence.Command, reason error) fence.Result {
	res := fence.Result{ID: c.ID, Actuator: c.Actuator, Command: c.Fence, Outcome: fence.Rejected, Error: reason.Error()}
	e := fencelog.Entry{Actuator: c.Actuator, ID: c.ID, Holder: c.Holder, Command: c.Fence, State: c.State,
		Outcome: fence.Rejected, Error: res.Error}
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

// Audit returns up to n of the newest audit entries, oldest first.
func (b *Bank) Audit(n int) ([]fencelog.Entry, error) { return b.log.Audit(n) }

// Output returns the recorded state of the named actuator.
func (b *Bank) Output(name string) (fence.Output, error) {
	o, ok := b.outs[name]
	if !ok {
		return fence.Output{}, fmt.Errorf("actuator: unknown actuator %q", name)
	}
	return b.log.Output(o.Scope, o.Name)
}

// Peers returns the actuators in the named actuator's fence scope, itself
// included, in configuration order; nil for an unknown actuator.
func (b *Bank) Peers(name string) []string {
	o, ok := b.outs[name]
	if !ok {
		return nil
	}
	var peers []string
	for _, n := range b.order {
		if b.outs[n].Scope == o.Scope {
			peers = append(peers, n)
		}
	}
	return peers
}

// Statuses returns every actuator's recorded state and read-back level, in
// configuration order. Each actuator's pair is read under its scope's lock,
// so it never shows a command between its record and its drive.
func (b *Bank) Statuses() ([]Status, error) {
	out := make([]Status, 0, len(b.order))
	for _, name := range b.order {
		o := b.outs[name]
		mu := b.locks[o.Scope]
		mu.Lock()
		rec, err := b.log.Output(o.Scope, o.Name)
		st := Status{Output: rec, PinName: o.PinName, ActiveLow: o.ActiveLow}
		if err == nil {
			st.High, st.LevelErr = o.Pin.Level()
			if c, ok := o.Pin.(interface{ Drives() uint64 }); ok {
				n := c.Drives()
				st.Drives = &n
			}
		}
		mu.Unlock()
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
