package actuator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/modbusio"
	"github.com/fencegate/fencegate/modbusio/modbusconf"
	"github.com/fencegate/fencegate/modbusio/modbussim"
	"github.com/fencegate/fencegate/tests/testenv"
)

// The watched outputs are tested on a relay module in this process over
// real Modbus TCP: the power cuts, the buttons on the board and the
// retries are the real requests' failures and answers; the manual clock
// decides when the watch looks.

const watchPoll = 2 * time.Second

type watchRig struct {
	bank    *actuator.Bank
	log     *fencelog.Store
	mod     *modbussim.Module
	clock   *manualClock
	mu      sync.Mutex
	watched []string // what Observer.Watched was told: "fan down", "fan up", "fan out-of-band 1"
}

// newWatchRig is a bank of specs whose PinName is a coil ("coil3") or a
// holding register ("register3") of the module; the module's power is off at the start if off.
func newWatchRig(t *testing.T, specs []actuator.Spec, off bool, interlocks ...fence.Interlock) *watchRig {
	t.Helper()
	addr := fmt.Sprintf("tcp://127.0.0.1:%d", testenv.Port(t))
	mod, err := modbussim.Start(addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close() })
	if off {
		mod.PowerCut()
	}
	bus, err := modbusio.NewBus(modbusconf.Bus{URL: addr, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bus.Close() })
	clock := newManualClock()
	l, err := fencelog.Open(filepath.Join(t.TempDir(), "fence.db"), &fencelog.Options{Create: fencelog.Fresh(), AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r := &watchRig{log: l, mod: mod, clock: clock}
	r.clock.auto = true // an interlock's dead time passes by itself
	for i := range specs {
		specs[i].Poll = watchPoll
	}
	opts := &actuator.Options{Clock: r.clock, Interlocks: interlocks, Observer: &actuator.Observer{Watched: func(name string, h actuator.Health) {
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case h.Down != "":
			r.watched = append(r.watched, name+" down")
		case h.OutOfBand > 0 && !slicesContain(r.watched, fmt.Sprintf("%s out-of-band %d", name, h.OutOfBand)):
			r.watched = append(r.watched, fmt.Sprintf("%s out-of-band %d", name, h.OutOfBand))
		default:
			r.watched = append(r.watched, name+" up")
		}
	}}}
	b, err := actuator.New(l, alone(specs...), opts)
	if err != nil {
		t.Fatal(err)
	}
	err = b.AttachSetpoints(func(name string) (actuator.Setpoint, error) {
		var n uint16
		if _, err := fmt.Sscanf(name, "setpoint%d", &n); err != nil {
			return nil, err
		}
		// a dimmer's register: 0 to 1000 (per mille)
		return bus.Output(modbusconf.Output{Unit: 1, Table: modbusconf.HoldingRegisters, Address: n, Full: 1000})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start(func(name string) (actuator.Pin, error) {
		var n uint16
		if _, err := fmt.Sscanf(name, "register%d", &n); err == nil {
			// as the common RS-485 relay boards: 0x0100 closes, 0x0200 opens
			return bus.Output(modbusconf.Output{Unit: 1, Table: modbusconf.HoldingRegisters, Address: n, OnValue: 0x100, OffValue: 0x200})
		}
		if _, err := fmt.Sscanf(name, "coil%d", &n); err != nil {
			return nil, err
		}
		return bus.Output(modbusconf.Output{Unit: 1, Table: modbusconf.Coils, Address: n})
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(b.Stop)
	r.bank = b
	return r
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// tick advances the clock by d and waits for the checks it ran.
func (r *watchRig) tick(d time.Duration) {
	if ran := r.clock.Advance(d); ran != nil {
		<-ran
	}
}

func (r *watchRig) send(t *testing.T, c fence.Command, want fence.Outcome) fence.Result {
	t.Helper()
	res := must(r.bank.Handle(context.Background(), c))
	if res.Outcome != want {
		t.Fatalf("Handle(%s %s) = %v (%s), want %v", c.Actuator, c.State, res.Outcome, res.Error, want)
	}
	return res
}

func (r *watchRig) health(t *testing.T, name string) actuator.Health {
	t.Helper()
	h, ok := r.bank.Health(name)
	if !ok {
		t.Fatalf("%s is not a watched output", name)
	}
	return h
}

func (r *watchRig) recorded(t *testing.T, name string) fence.Output {
	t.Helper()
	rec, err := r.log.ScopeRecord(name)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Output(name)
}

func (r *watchRig) saw(t *testing.T, want ...string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.Join(r.watched, ", ") != strings.Join(want, ", ") {
		t.Fatalf("Observer.Watched was told %q; want %q", r.watched, want)
	}
}

// A module that does not answer at start does not stop the gateway: its
// output is down, a command to it is answered failed with its fence
// recorded, and once the module answers, the next retry drives it to the
// record (boot: last).
func TestWatchedOutputDownAtStart(t *testing.T) {
	r := newWatchRig(t, []actuator.Spec{{Name: "fan", PinName: "coil0"}}, true)
	if h := r.health(t, "fan"); h.Down == "" || h.Since.IsZero() {
		t.Fatalf("health with the module off = %+v; want down", h)
	}
	r.saw(t, "fan down")
	res := r.send(t, command("w-1", "fan", 7, 0, fence.StateOn), fence.Failed)
	if !strings.Contains(res.Error, "cannot connect") || !strings.Contains(res.Error, "recorded") {
		t.Fatalf("failed answer = %q; want the bus's reason and that the fence was recorded", res.Error)
	}
	r.send(t, command("w-0", "fan", 6, 0, fence.StateOff), fence.Stale)
	sts, err := r.bank.Statuses()
	if err != nil {
		t.Fatal(err)
	}
	if sts[0].Health == nil || sts[0].Health.Down == "" || sts[0].LevelErr == nil {
		t.Fatalf("status of the down output: health %+v, level error %v; want down and no level", sts[0].Health, sts[0].LevelErr)
	}
	// Retries back off while it stays down: 250ms, 500ms, 1s, ...
	r.tick(250 * time.Millisecond)
	r.tick(500 * time.Millisecond)
	if err := r.mod.PowerOn(); err != nil {
		t.Fatal(err)
	}
	r.tick(time.Second - time.Millisecond)
	if r.mod.Coil(0) {
		t.Fatal("retried before its backoff")
	}
	r.tick(time.Millisecond)
	if !r.mod.Coil(0) {
		t.Fatal("the module answers again but its coil was not driven to the recorded on")
	}
	if h := r.health(t, "fan"); h.Down != "" || h.OutOfBand != 0 {
		t.Fatalf("health after it came back = %+v; want up, no out-of-band change", h)
	}
	r.saw(t, "fan down", "fan up")
	if got := r.recorded(t, "fan"); got.State != fence.StateOn || got.Fence != (fence.Fence{Token: 7}) {
		t.Fatalf("record after it came back = %+v; want on at 7/0", got)
	}
	r.send(t, command("w-2", "fan", 7, 1, fence.StateOff), fence.Applied)
	if r.mod.Coil(0) {
		t.Fatal("the coil is on after an applied off")
	}
}

// A module that lost its power (and its coils) is driven back as the
// boot rule says: boot: last to the record, boot: off off, boot: on on;
// the fences stay.
func TestWatchedPowerCycle(t *testing.T) {
	r := newWatchRig(t, []actuator.Spec{
		{Name: "fan", PinName: "coil0"},
		{Name: "pump", PinName: "coil1", Boot: actuator.BootOff},
		{Name: "light", PinName: "coil2", Boot: actuator.BootOn},
	}, false)
	if !r.mod.Coil(2) {
		t.Fatal("boot: on did not switch the light on at start")
	}
	r.send(t, command("p-1", "fan", 5, 0, fence.StateOn), fence.Applied)
	r.send(t, command("p-2", "pump", 5, 0, fence.StateOn), fence.Applied)
	r.send(t, command("p-3", "light", 5, 0, fence.StateOff), fence.Applied)
	r.mod.PowerCut()
	r.tick(watchPoll)
	for _, n := range []string{"fan", "pump", "light"} {
		if h := r.health(t, n); h.Down == "" {
			t.Fatalf("%s up with its module's power cut: %+v", n, h)
		}
	}
	// A command while it is down: failed, its fence recorded.
	r.send(t, command("p-4", "fan", 6, 0, fence.StateOn), fence.Failed)
	if err := r.mod.PowerOn(); err != nil {
		t.Fatal(err)
	}
	r.tick(250 * time.Millisecond)
	if !r.mod.Coil(0) || r.mod.Coil(1) || !r.mod.Coil(2) {
		t.Fatalf("after the module came back: fan %v pump %v light %v; want on (last), off (boot: off), on (boot: on)",
			r.mod.Coil(0), r.mod.Coil(1), r.mod.Coil(2))
	}
	for n, want := range map[string]fence.Output{
		"fan":   {State: fence.StateOn, Fence: fence.Fence{Token: 6}},
		"pump":  {State: fence.StateOff, Fence: fence.Fence{Token: 5}},
		"light": {State: fence.StateOn, Fence: fence.Fence{Token: 5}},
	} {
		if got := r.recorded(t, n); got.State != want.State || got.Fence != want.Fence {
			t.Errorf("%s recorded %s at %s; want %s at %s (the boot rule moves the state, never the fence)", n, got.State, got.Fence, want.State, want.Fence)
		}
		if h := r.health(t, n); h.Down != "" || h.OutOfBand != 0 {
			t.Errorf("%s health %+v; want up", n, h)
		}
	}
	r.send(t, command("p-5", "pump", 5, 1, fence.StateOn), fence.Applied)
	r.send(t, command("p-6", "pump", 4, 9, fence.StateOff), fence.Stale)
}

// An output switched behind the gateway's back (a button on the board,
// another master) is found at the next poll, reported, and driven back to
// its record (boot: last); a trip holds it at its scope's safe state.
func TestWatchedOutOfBand(t *testing.T) {
	r := newWatchRig(t, []actuator.Spec{{Name: "fan", PinName: "coil0"}}, false)
	if sts, err := r.bank.Statuses(); err != nil || sts[0].LevelErr != nil || sts[0].High {
		t.Fatalf("status at start: %+v, %v; want read back low before the first poll", sts, err)
	}
	r.send(t, command("o-1", "fan", 3, 0, fence.StateOff), fence.Applied)
	r.mod.SetCoil(0, true)
	r.tick(watchPoll - time.Millisecond)
	if !r.mod.Coil(0) {
		t.Fatal("read back before its poll")
	}
	r.tick(time.Millisecond)
	if r.mod.Coil(0) {
		t.Fatal("the coil switched on behind the gateway's back was not driven back off")
	}
	if h := r.health(t, "fan"); h.OutOfBand != 1 || h.Down != "" {
		t.Fatalf("health = %+v; want one out-of-band change, up", h)
	}
	r.saw(t, "fan out-of-band 1")
	// Left alone, the next polls change nothing.
	writes := r.mod.Writes()
	r.tick(watchPoll)
	r.tick(watchPoll)
	if r.mod.Writes() != writes {
		t.Fatal("the watch wrote to an output that was as recorded")
	}
	if got := r.recorded(t, "fan"); got.State != fence.StateOff || got.Fence != (fence.Fence{Token: 3}) {
		t.Fatalf("record = %+v; want off at 3/0", got)
	}
}

// A register used as a coil that holds neither its on nor its off value
// (its module's power came back, and it holds 0; another master wrote to
// it) is driven as the boot rule says.
func TestWatchedRegisterAtNeitherValue(t *testing.T) {
	r := newWatchRig(t, []actuator.Spec{{Name: "valve", PinName: "register4"}}, false)
	if got := r.mod.Register(4); got != 0x200 {
		t.Fatalf("register at start = %#x; want off, 0x200", got)
	}
	r.send(t, command("v-1", "valve", 3, 0, fence.StateOn), fence.Applied)
	r.mod.SetRegister(4, 7)
	r.tick(watchPoll)
	if got := r.mod.Register(4); got != 0x100 {
		t.Fatalf("register holding 7 = %#x after a poll; want driven back on, 0x100", got)
	}
	if h := r.health(t, "valve"); h.OutOfBand != 1 || h.Down != "" {
		t.Fatalf("health = %+v; want one out-of-band change, up", h)
	}
	r.mod.PowerCut()
	r.tick(watchPoll)
	if err := r.mod.PowerOn(); err != nil {
		t.Fatal(err)
	}
	r.tick(250 * time.Millisecond)
	if got := r.mod.Register(4); got != 0x100 {
		t.Fatalf("register after a power cycle = %#x; want on, 0x100, as recorded", got)
	}
	if h := r.health(t, "valve"); h.Down != "" {
		t.Fatalf("health after the power came back = %+v; want up", h)
	}
}

// An interlocked output is never switched on by the watch while another
// member of its interlock is on: after a power cycle, boot: on gives way
// to the member the record says is on.
func TestWatchedInterlock(t *testing.T) {
	specs := alone(
		actuator.Spec{Name: "up", PinName: "coil0", Scope: "door", Boot: actuator.BootOn},
		actuator.Spec{Name: "down", PinName: "coil1", Scope: "door"},
	)
	r := newWatchRig(t, specs, false, fence.Interlock{Name: "door", Members: []string{"up", "down"}})
	if !r.mod.Coil(0) || r.mod.Coil(1) {
		t.Fatal("boot: on did not switch up on at start")
	}
	r.send(t, command("i-1", "up", 9, 0, fence.StateOff), fence.Applied)
	r.send(t, command("i-2", "down", 9, 1, fence.StateOn), fence.Applied)
	r.mod.PowerCut()
	r.tick(watchPoll)
	for _, n := range []string{"up", "down"} {
		if h := r.health(t, n); h.Down == "" {
			t.Fatalf("%s up with its module's power cut", n)
		}
	}
	if err := r.mod.PowerOn(); err != nil {
		t.Fatal(err)
	}
	r.tick(250 * time.Millisecond)
	if r.mod.Coil(0) || !r.mod.Coil(1) {
		t.Fatalf("after a power cycle: up %v down %v; want up off (down is on), down on (last)", r.mod.Coil(0), r.mod.Coil(1))
	}
}

// Stop ends the watch: no read and no drive after it.
func TestWatchStops(t *testing.T) {
	r := newWatchRig(t, []actuator.Spec{{Name: "fan", PinName: "coil0"}}, false)
	r.bank.Stop()
	r.mod.SetCoil(0, true)
	writes := r.mod.Writes()
	r.tick(10 * watchPoll)
	if !r.mod.Coil(0) || r.mod.Writes() != writes {
		t.Fatal("the watch drove an output after Stop")
	}
}
