package actuator_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// pulseRig is a bank with a pulse output (door, GPIO5, default 50 ms,
// at most 5 s) and a switch (pump, GPIO17), over a real store and the sim
// board; drives records every drive of a pin, with its time.
type pulseRig struct {
	bank    *actuator.Bank
	log     *fencelog.Store
	sim     *boards.Sim
	store   string
	mu      sync.Mutex
	drives  []pinDrive
	changed chan []fence.Output
	// clock times the bank's pulses and liveness rules, and the drives
	// in drives.
	clock *manualClock
}

// rigClock gives opts a manual clock unless it has one, and returns it.
func rigClock(opts *actuator.Options) *manualClock {
	if c, ok := opts.Clock.(*manualClock); ok {
		return c
	}
	c := newManualClock()
	opts.Clock = c
	return c
}

type pinDrive struct {
	pin  string
	high bool
	at   time.Time
}

var pulseSpecs = []actuator.Spec{
	{Name: "door", PinName: "GPIO5", Kind: actuator.KindPulse, Pulse: 50 * time.Millisecond, MaxPulse: 5 * time.Second},
	{Name: "pump", PinName: "GPIO17"},
}

func newPulseRig(t *testing.T, store string) *pulseRig {
	t.Helper()
	return newSpecRig(t, store, pulseSpecs, nil)
}

// newSpecRig is a rig of specs, with opts (its Changed is the rig's).
func newSpecRig(t *testing.T, store string, specs []actuator.Spec, opts *actuator.Options) *pulseRig {
	t.Helper()
	if store == "" {
		store = filepath.Join(t.TempDir(), "fence.db")
	}
	r := &pulseRig{store: store, changed: make(chan []fence.Output, 100)}
	l, err := fencelog.Open(store, &fencelog.Options{Create: fencelog.Fresh(), AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sim, err := boards.OpenSim(boards.LatchPath(store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	o := actuator.Options{}
	if opts != nil {
		o = *opts
	}
	r.clock = rigClock(&o)
	o.Changed = func(outs []fence.Output) {
		select {
		case r.changed <- outs:
		default:
		}
	}
	b, err := actuator.New(l, alone(specs...), &o)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start(func(name string) (actuator.Pin, error) {
		p, err := sim.Pin(name)
		return timedPin{Pin: p, name: name, r: r}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	r.bank, r.log, r.sim = b, l, sim
	return r
}

type timedPin struct {
	actuator.Pin
	name string
	r    *pulseRig
}

func (p timedPin) Out(high bool) error {
	p.r.mu.Lock()
	p.r.drives = append(p.r.drives, pinDrive{p.name, high, p.r.clock.Now()})
	p.r.mu.Unlock()
	return p.Pin.Out(high)
}

func (r *pulseRig) drivesOf(pin string) []pinDrive {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []pinDrive
	for _, d := range r.drives {
		if d.pin == pin {
			out = append(out, d)
		}
	}
	return out
}

// waitPulse waits until door's recorded pulse has status; to see a
// running pulse done, it first advances the clock by its width, and once
// the pulse's end has run (the rigs that call it arm no other timer), its
// record must say done at once.
func (r *pulseRig) waitPulse(t *testing.T, status string) fence.Output {
	t.Helper()
	ended := false
	if out, err := r.bank.Output("door"); err == nil && out.Pulse != nil && out.Pulse.Status == fence.PulseRunning && status == fence.PulseDone {
		if ran := r.clock.Advance(out.Pulse.Width); ran != nil { // else its end is already under way
			select {
			case <-ran:
				ended = true
			case <-time.After(10 * time.Second):
				t.Fatalf("the end of door's pulse %+v did not return within 10 s", out.Pulse)
			}
		}
	}
	deadline := time.After(10 * time.Second)
	for {
		out, err := r.bank.Output("door")
		if err != nil {
			t.Fatal(err)
		}
		if out.Pulse != nil && out.Pulse.Status == status {
			return out
		}
		if ended {
			t.Fatalf("the end of door's pulse has run, and its pulse is recorded %+v, want it %s", out.Pulse, status)
		}
		select {
		case <-r.changed:
		case <-time.After(10 * time.Millisecond): // a rig without Changed
		case <-deadline:
			t.Fatalf("door's pulse is %+v, want it %s", out.Pulse, status)
		}
	}
}

func (r *pulseRig) send(t *testing.T, c fence.Command, want fence.Outcome) fence.Result {
	t.Helper()
	res := must(r.bank.Handle(context.Background(), c))
	if res.Outcome != want {
		t.Fatalf("Handle(%+v) = %v (%s), want %v", c, res.Outcome, res.Error, want)
	}
	return res
}

func pulse(id string, token, seq uint64, width time.Duration) fence.Command {
	c := command(id, "door", token, seq, fence.StateOn)
	c.Pulse = width
	return c
}

// A pulse is recorded running before the output moves, drives it on for
// its width and back to rest, and is recorded done; a redelivery is a
// duplicate that says so and drives nothing.
func TestPulse(t *testing.T) {
	r := newPulseRig(t, "")
	res := must(r.bank.Handle(context.Background(), pulse("p-1", 7, 1, 120*time.Millisecond)))
	if res.Outcome != fence.Applied || res.Pulse == nil || res.Pulse.Status != fence.PulseRunning || res.Pulse.Width != 120*time.Millisecond || res.State != fence.StateOn {
		t.Fatalf("pulse answered %+v (pulse %+v), want applied, on, running 120ms", res, res.Pulse)
	}
	if m, _ := boards.ReadLatch(r.sim.Path()); !m["GPIO5"] {
		t.Fatal("the door's line is low right after the pulse was answered; want high")
	}
	out := r.waitPulse(t, fence.PulseDone)
	if out.State != fence.StateOff {
		t.Errorf("after the pulse the door is recorded %v, want off", out.State)
	}
	ds := r.drivesOf("GPIO5")
	// Start drove it to rest; then the pulse: on, off.
	if len(ds) != 3 || ds[0].high || !ds[1].high || ds[2].high {
		t.Fatalf("drives of the door %+v, want rest, on, off", ds)
	}
	if w := ds[2].at.Sub(ds[1].at); w != 120*time.Millisecond {
		t.Errorf("the pulse lasted %v, want 120ms (and not much more)", w)
	}
	if m, _ := boards.ReadLatch(r.sim.Path()); m["GPIO5"] {
		t.Error("the door's line is high after the pulse; want low")
	}
	again := must(r.bank.Handle(context.Background(), pulse("p-1", 7, 1, 120*time.Millisecond)))
	if again.Outcome != fence.Duplicate || again.Pulse == nil || again.Pulse.Status != fence.PulseDone || again.State != fence.StateOff {
		t.Errorf("redelivery answered %+v (pulse %+v), want duplicate, off, pulse done", again, again.Pulse)
	}
	if n := len(r.drivesOf("GPIO5")); n != 3 {
		t.Errorf("the redelivery drove the door (%d drives, want 3)", n)
	}
	// The same pair with another width is another command: stale.
	r.send(t, pulse("p-1", 7, 1, 200*time.Millisecond), fence.Stale)
	es, err := r.log.FindAudit(fencelog.AuditQuery{Actuator: "door", Outcome: fence.OutcomePulse, Limit: 10})
	if err != nil || len(es) != 1 || !strings.HasPrefix(es[0].Why, "done") || es[0].Error != "" {
		t.Errorf("audit of the pulse's end = %+v, %v; want one entry, done", es, err)
	}
}

// A pulse that arrives while one runs is refused busy, never queued: its
// pair raises the fence (so a stale holder stays stale) and its
// redelivery is refused the same; the running pulse ends as it would
// have.
func TestPulseBusy(t *testing.T) {
	r := newPulseRig(t, "")
	r.send(t, pulse("p-1", 7, 1, 300*time.Millisecond), fence.Applied)
	res := r.send(t, pulse("p-2", 8, 0, 100*time.Millisecond), fence.Rejected)
	if res.Reason != fence.ReasonBusy || res.Fence != (fence.Fence{Token: 8}) {
		t.Errorf("second pulse answered %+v, want rejected busy at fence 8/0", res)
	}
	again := r.send(t, pulse("p-2", 8, 0, 100*time.Millisecond), fence.Rejected)
	if again.Reason != fence.ReasonBusy {
		t.Errorf("redelivery of the refused pulse answered %+v, want rejected busy", again)
	}
	r.send(t, pulse("p-3", 7, 2, 100*time.Millisecond), fence.Stale)
	r.waitPulse(t, fence.PulseDone)
	if ds := r.drivesOf("GPIO5"); len(ds) != 3 {
		t.Errorf("drives of the door %+v, want rest, on, off: the refused pulse drove nothing", ds)
	}
	r.send(t, pulse("p-4", 8, 1, 10*time.Millisecond), fence.Applied)
	r.waitPulse(t, fence.PulseDone)
}

// What a pulse output takes, and a switch does not: bad commands are
// rejected before the fence, and change nothing.
func TestPulseCommandShape(t *testing.T) {
	r := newPulseRig(t, "")
	for _, c := range []struct {
		cmd  fence.Command
		frag string
	}{
		{command("x-1", "door", 9, 0, fence.StateOff), "rests off by itself"},
		{pulse("x-2", 9, 0, 5001*time.Millisecond), "longer than door's max_pulse (5000 ms)"},
		{func() fence.Command {
			c := command("x-3", "pump", 9, 0, fence.StateOn)
			c.Pulse = time.Second
			return c
		}(), "pump is not a pulse output"},
	} {
		res := r.send(t, c.cmd, fence.Rejected)
		if res.Reason != fence.ReasonInvalid || !strings.Contains(res.Error, c.frag) {
			t.Errorf("%+v answered %q (%s), want invalid: %q", c.cmd, res.Error, res.Reason, c.frag)
		}
	}
	if f, _ := r.log.Fences(); f["door"] != (fence.Fence{}) || f["pump"] != (fence.Fence{}) {
		t.Errorf("fences after bad commands: %v, want none moved", f)
	}
	// State on is a pulse of the default width; fence-only moves nothing.
	res := r.send(t, command("d-1", "door", 9, 0, fence.StateOn), fence.Applied)
	if res.Pulse == nil || res.Pulse.Width != 50*time.Millisecond {
		t.Errorf("state on answered pulse %+v, want the default 50ms", res.Pulse)
	}
	r.waitPulse(t, fence.PulseDone)
	r.send(t, command("h-1", "door", 9, 1, fence.StateNone), fence.Applied)
	if ds := r.drivesOf("GPIO5"); len(ds) != 3 {
		t.Errorf("drives %+v, want rest, on, off: the heartbeat drove nothing", ds)
	}
	// The redelivery of the default pulse is its duplicate.
	if again := r.send(t, command("d-1", "door", 9, 0, fence.StateOn), fence.Duplicate); again.Pulse == nil || again.Pulse.Status != fence.PulseDone {
		t.Errorf("redelivery of the default pulse answered pulse %+v, want done", again.Pulse)
	}
}

// A restart while a pulse runs (a crash: the bank is never stopped) ends
// it at rest, recorded interrupted, and it is never resumed: the line is
// taken over low, and a redelivery is a duplicate that says interrupted
// and drives nothing.
func TestPulseInterruptedByRestart(t *testing.T) {
	r := newPulseRig(t, "")
	r.send(t, pulse("p-1", 7, 1, 5*time.Second), fence.Applied)
	r.log.Close() // the crash: its timer may fire later, on a closed store
	r.sim.Close()

	r2 := newPulseRig(t, r.store)
	out, err := r2.bank.Output("door")
	if err != nil {
		t.Fatal(err)
	}
	if out.State != fence.StateOff || out.Pulse == nil || out.Pulse.Status != fence.PulseInterrupted {
		t.Fatalf("after the restart the door is %v with pulse %+v, want off, interrupted", out.State, out.Pulse)
	}
	for _, l := range r2.bank.Lines() {
		if l.Actuator == "door" && l.High {
			t.Error("the restart takes the door's line over high; want low (rest)")
		}
	}
	if ds := r2.drivesOf("GPIO5"); len(ds) != 1 || ds[0].high {
		t.Errorf("drives after the restart %+v, want one, to rest", ds)
	}
	again := must(r2.bank.Handle(context.Background(), pulse("p-1", 7, 1, 5*time.Second)))
	if again.Outcome != fence.Duplicate || again.Pulse == nil || again.Pulse.Status != fence.PulseInterrupted {
		t.Errorf("redelivery after the restart answered %+v (pulse %+v), want duplicate, interrupted", again, again.Pulse)
	}
	if ds := r2.drivesOf("GPIO5"); len(ds) != 1 {
		t.Errorf("the redelivery drove the door: %+v", ds)
	}
	es, _ := r2.log.FindAudit(fencelog.AuditQuery{Actuator: "door", Outcome: fence.OutcomePulse, Limit: 10})
	if len(es) != 1 || !strings.HasPrefix(es[0].Why, "interrupted") || es[0].Error != "" || es[0].Holder != "ctl-p-1" {
		t.Errorf("audit of the pulse's end = %+v, want one entry, interrupted, by the pulse's holder", es)
	}
}

// Stop ends a running pulse at once, at rest, recorded interrupted; a
// pulse decided while the bank stops is cut short the same way.
func TestStopInterruptsPulse(t *testing.T) {
	r := newPulseRig(t, "")
	r.send(t, pulse("p-1", 7, 1, 5*time.Second), fence.Applied)
	r.bank.Stop()
	out, _ := r.bank.Output("door")
	if out.State != fence.StateOff || out.Pulse == nil || out.Pulse.Status != fence.PulseInterrupted {
		t.Fatalf("after Stop the door is %v with pulse %+v, want off, interrupted", out.State, out.Pulse)
	}
	if m, _ := boards.ReadLatch(r.sim.Path()); m["GPIO5"] {
		t.Error("the door's line is high after Stop")
	}
	res := r.send(t, pulse("p-2", 7, 2, 5*time.Second), fence.Applied)
	if res.Pulse == nil || res.Pulse.Status != fence.PulseInterrupted || res.State != fence.StateOff {
		t.Errorf("a pulse while stopping answered state %v, pulse %+v; want off, interrupted", res.State, res.Pulse)
	}
	if m, _ := boards.ReadLatch(r.sim.Path()); m["GPIO5"] {
		t.Error("the door's line is high after a pulse while stopping")
	}
}

// A pulse output's configuration: a max_pulse, a default within it, never
// boot: on, never in an interlock.
func TestPulseSpecs(t *testing.T) {
	for _, c := range []struct {
		spec  actuator.Spec
		locks []fence.Interlock
		frag  string
	}{
		{actuator.Spec{Name: "d", PinName: "GPIO5", Kind: actuator.KindPulse}, nil, "max_pulse 0s"},
		{actuator.Spec{Name: "d", PinName: "GPIO5", Kind: actuator.KindPulse, MaxPulse: time.Hour}, nil, "max_pulse 1h0m0s"},
		{actuator.Spec{Name: "d", PinName: "GPIO5", Kind: actuator.KindPulse, MaxPulse: time.Second, Pulse: 2 * time.Second}, nil, "at most max_pulse"},
		{actuator.Spec{Name: "d", PinName: "GPIO5", Kind: actuator.KindPulse, MaxPulse: time.Second, Boot: actuator.BootOn}, nil, "boot: on"},
		{actuator.Spec{Name: "d", PinName: "GPIO5", Pulse: time.Second}, nil, "for kind: pulse"},
		{actuator.Spec{Name: "d", PinName: "GPIO5", Kind: "toggle"}, nil, `kind "toggle"`},
		{actuator.Spec{Name: "d", PinName: "GPIO5", Kind: actuator.KindPulse, MaxPulse: time.Second},
			[]fence.Interlock{{Name: "x", Members: []string{"d", "pump"}}}, "d is a pulse output"},
	} {
		l, err := fencelog.Open(filepath.Join(t.TempDir(), "f.db"), &fencelog.Options{Create: fencelog.Fresh()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = actuator.New(l, alone(c.spec, actuator.Spec{Name: "pump", PinName: "GPIO17"}), &actuator.Options{Interlocks: c.locks})
		l.Close()
		if err == nil || !strings.Contains(err.Error(), c.frag) {
			t.Errorf("New(%+v) = %v, want an error saying %q", c.spec, err, c.frag)
		}
	}
}
