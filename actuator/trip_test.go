package actuator_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// settableInput is an input whose level the test sets at the moments it
// chooses: the sim board's inputs (a file the board polls, tested in
// package boards and on real gateways in cmd/gateway) cannot be moved
// between two steps a hook holds apart.
type settableInput struct{ high atomic.Bool }

func (f *settableInput) Level() (bool, error) { return f.high.Load(), nil }

// gatePin blocks an Out while gate is set, telling entered.
type gatePin struct {
	actuator.Pin
	name    string
	r       *pulseRig
	gate    *atomic.Pointer[chan struct{}]
	entered chan string
}

func (p gatePin) Out(high bool) error {
	if g := p.gate.Load(); g != nil && high {
		p.entered <- p.name
		<-*g
	}
	return timedPin{Pin: p.Pin, name: p.name, r: p.r}.Out(high)
}

type inRig struct {
	*pulseRig
	gate    atomic.Pointer[chan struct{}]
	entered chan string
}

func newInputRig(t *testing.T, store string, specs []actuator.Spec, opts *actuator.Options, ins map[string]*settableInput) (*inRig, func()) {
	t.Helper()
	if store == "" {
		store = filepath.Join(t.TempDir(), "fence.db")
	}
	r := &inRig{pulseRig: &pulseRig{store: store, changed: make(chan []fence.Output, 100)}, entered: make(chan string, 10)}
	l, err := fencelog.Open(store, &fencelog.Options{Create: fencelog.Fresh(), AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := boards.OpenSim(boards.LatchPath(store))
	if err != nil {
		t.Fatal(err)
	}
	b, err := actuator.New(l, specs, opts)
	if err != nil {
		t.Fatal(err)
	}
	level := func(n string) (bool, error) { return ins[n].Level() }
	if err := b.TripAtStart(level); err != nil {
		t.Fatal(err)
	}
	if err := b.AttachInputs(func(n string) (actuator.Input, error) { return ins[n], nil }); err != nil {
		t.Fatal(err)
	}
	err = b.Start(func(name string) (actuator.Pin, error) {
		p, err := sim.Pin(name)
		return gatePin{Pin: p, name: name, r: r.pulseRig, gate: &r.gate, entered: r.entered}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	r.bank, r.log, r.sim = b, l, sim
	closed := false
	stop := func() {
		if !closed {
			closed = true
			b.Stop()
			l.Close()
			sim.Close()
		}
	}
	t.Cleanup(stop)
	return r, stop
}

func heaterSpecs(boot actuator.Boot) []actuator.Spec {
	return []actuator.Spec{{Name: "heater", PinName: "GPIO23", Scope: "climate", Boot: boot}, {Name: "fan", PinName: "GPIO22", Scope: "climate"}}
}

var overheat = map[string]actuator.InputLevel{"climate": {Input: "overheat", High: true}}

// A tripped scope stays at its safe state until a reset: a restart does
// not switch a boot: on output on while the record says tripped.
func TestTripHeldAcrossRestart(t *testing.T) {
	hot := &settableInput{}
	ins := map[string]*settableInput{"overheat": hot}
	r, stop := newInputRig(t, "", heaterSpecs(actuator.BootOn), &actuator.Options{Trips: overheat}, ins)
	r.bank.InputChanged("overheat", true) // not at level: nothing
	hot.high.Store(true)
	r.bank.InputChanged("overheat", true)
	if out, _ := r.bank.Output("heater"); out.State != fence.StateOff {
		t.Fatalf("heater %v after the trip, want off", out.State)
	}
	stop()
	r2, _ := newInputRig(t, r.store, heaterSpecs(actuator.BootOn), &actuator.Options{Trips: overheat}, ins)
	rec, _ := r2.log.ScopeRecord("climate")
	out, _ := r2.bank.Output("heater")
	m, _ := boards.ReadLatch(r2.sim.Path())
	if rec.Trip() != "" && (out.State == fence.StateOn || m["GPIO23"]) {
		t.Errorf("after a restart the scope is tripped (%q) but the heater is %v, line high %v", rec.Trip(), out.State, m["GPIO23"])
	}
}

// An input at its trip level when the gateway starts: the heater, recorded
// on, is taken over at the safe state and never driven on first.
func TestTripAtStart(t *testing.T) {
	hot := &settableInput{}
	ins := map[string]*settableInput{"overheat": hot}
	r, stop := newInputRig(t, "", heaterSpecs(""), &actuator.Options{Trips: overheat}, ins)
	r.send(t, command("h-1", "heater", 5, 0, fence.StateOn), fence.Applied)
	stop()
	hot.high.Store(true)
	r2, _ := newInputRig(t, r.store, heaterSpecs(""), &actuator.Options{Trips: overheat}, ins)
	for _, d := range r2.drivesOf("GPIO23") {
		if d.high {
			t.Errorf("overheat at start, yet the heater was driven on: %+v", r2.drivesOf("GPIO23"))
		}
	}
	for _, l := range r2.bank.Lines() {
		if l.Actuator == "heater" && l.High {
			t.Errorf("overheat at start, yet the heater's line is taken over high")
		}
	}
}

// A trip to safe state on holds the scope there: an off is refused until
// a reset.
func TestTripHoldsSafeOn(t *testing.T) {
	gas := &settableInput{}
	specs := []actuator.Spec{{Name: "vent", PinName: "GPIO23", Scope: "air"}}
	opts := &actuator.Options{Trips: map[string]actuator.InputLevel{"air": {Input: "gas", High: true}},
		Safe: map[string]actuator.Safe{"air": {State: fence.StateOn}}}
	r, _ := newInputRig(t, "", specs, opts, map[string]*settableInput{"gas": gas})
	gas.high.Store(true)
	r.bank.InputChanged("gas", true)
	if out, _ := r.bank.Output("vent"); out.State != fence.StateOn {
		t.Fatalf("vent %v after the trip, want on (the safe state)", out.State)
	}
	res := must(r.bank.Handle(context.Background(), command("v-1", "vent", 5, 0, fence.StateOff)))
	rec, _ := r.log.ScopeRecord("air")
	if out, _ := r.bank.Output("vent"); rec.Trip() != "" && out.State != fence.StateOn {
		t.Errorf("tripped scope (%q) left its safe state: an off answered %v, vent %v", rec.Trip(), res.Outcome, out.State)
	}
}

// A trip level that InputChanged reports trips the scope even if the input
// went back before the scope's lock was free (a momentary contact, or a
// lock held by a slow command): the hook holds the trip behind a drive.
func TestMomentaryTrip(t *testing.T) {
	hot := &settableInput{}
	r, _ := newInputRig(t, "", heaterSpecs(""), &actuator.Options{Trips: overheat}, map[string]*settableInput{"overheat": hot})
	waiting := make(chan string, 10)
	actuator.OnLockWait(r.bank, func(s string) { waiting <- s })
	gate := make(chan struct{})
	r.gate.Store(&gate)
	done := make(chan fence.Result)
	go func() { done <- must(r.bank.Handle(context.Background(), command("f-1", "fan", 5, 0, fence.StateOn))) }()
	<-r.entered // the fan's drive holds the scope's lock
	r.gate.Store(nil)
	hot.high.Store(true)
	tripped := make(chan struct{})
	go func() { r.bank.InputChanged("overheat", true); close(tripped) }()
	<-waiting
	hot.high.Store(false) // the contact opens again
	close(gate)
	<-done
	<-tripped
	if rec, _ := r.log.ScopeRecord("climate"); rec.Trip() == "" {
		t.Error("InputChanged(overheat, high) did not trip the scope: the level was read again after the lock and had gone back")
	}
}

// A pulse's end does not wait for an interlock's dead time in its scope:
// the output goes back to rest at its width.
func TestPulseEndsWhileTheScopeIsBusy(t *testing.T) {
	specs := []actuator.Spec{
		{Name: "door", PinName: "GPIO5", Scope: "s", Kind: actuator.KindPulse, Pulse: 50 * time.Millisecond, MaxPulse: 100 * time.Millisecond},
		{Name: "a", PinName: "GPIO17", Scope: "s"}, {Name: "b", PinName: "GPIO22", Scope: "s"},
	}
	opts := &actuator.Options{Interlocks: []fence.Interlock{{Name: "ab", Members: []string{"a", "b"}, DeadTime: time.Second, BreakBeforeMake: true}}}
	r, _ := newInputRig(t, "", specs, opts, nil)
	time.Sleep(time.Second) // the start's dead time
	r.send(t, command("a-1", "a", 5, 1, fence.StateOn), fence.Applied)
	r.send(t, pulse("p-1", 5, 2, 50*time.Millisecond), fence.Applied)
	r.send(t, command("b-1", "b", 5, 3, fence.StateOn), fence.Applied) // a off, 1 s dead time under the lock, b on
	for i := 0; i < 500; i++ {
		if out, _ := r.bank.Output("door"); out.Pulse != nil && out.Pulse.Status == fence.PulseDone {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ds := r.drivesOf("GPIO5")
	if len(ds) < 3 {
		t.Fatalf("door drives %+v", ds)
	}
	if w := ds[len(ds)-1].at.Sub(ds[len(ds)-2].at); w > 100*time.Millisecond+50*time.Millisecond {
		t.Errorf("a pulse of 50ms (max_pulse 100ms) held the door on for %v", w)
	}
}
