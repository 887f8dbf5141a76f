package actuator_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// ventActs are a motor's two direction relays, in one scope, and a lamp
// in the same scope outside the interlock.
var ventActs = []act{
	{name: "vent-open", pin: "GPIO5", scope: "vent"},
	{name: "vent-close", pin: "GPIO6", scope: "vent"},
	{name: "vent-lamp", pin: "GPIO13", scope: "vent"},
}

func ventLock(bbm bool, dead time.Duration) *actuator.Options {
	return &actuator.Options{Interlocks: []fence.Interlock{{Name: "vent", Members: []string{"vent-open", "vent-close"},
		BreakBeforeMake: bbm, DeadTime: dead}}}
}

// drives records every drive with its time and what the store held at
// that moment.
type drives struct {
	mu   sync.Mutex
	list []drive
	log  func() *fencelog.Store
	now  func() time.Time
}

type drive struct {
	name     string
	high     bool
	at       time.Time
	recorded map[string]fence.State // vent-open and vent-close as recorded when the pin moved
}

func (d *drives) onDrive(name string, high bool) {
	rec := map[string]fence.State{}
	if l := d.log(); l != nil {
		sc, _ := l.ScopeRecord("vent")
		for _, n := range []string{"vent-open", "vent-close"} {
			rec[n] = sc.Output(n).State
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.list = append(d.list, drive{name, high, d.now(), rec})
}

func (d *drives) since(i int) []drive {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]drive(nil), d.list[i:]...)
}

func (d *drives) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.list)
}

func newVentRig(t *testing.T, dir string, opts *actuator.Options) (*rig, *drives) {
	t.Helper()
	if opts == nil {
		opts = &actuator.Options{}
	}
	clock := rigClock(opts)
	clock.auto = true // the dead times' sleeps move it
	d := &drives{now: clock.Now}
	var r *rig
	d.log = func() *fencelog.Store {
		if r == nil {
			return nil
		}
		return r.log
	}
	r = newRigWrapped(t, dir, ventActs, opts, d.onDrive)
	return r, d
}

// At most one member on: a command that would turn a second one on is
// rejected with reason interlock and the state of the one that is on,
// moves no pin, and still raises the fence, so the displaced holder's
// older token is stale from then on.
func TestInterlockRejects(t *testing.T) {
	r, d := newVentRig(t, "", ventLock(false, 0))
	r.send(t, command("a-1", "vent-close", 41, 0, fence.StateOn), fence.Applied)
	n := d.len()
	res := r.send(t, command("b-1", "vent-open", 42, 0, fence.StateOn), fence.Rejected)
	if res.Reason != fence.ReasonInterlock || res.Blocking == nil || res.Blocking.Actuator != "vent-close" || res.Blocking.State != fence.StateOn {
		t.Errorf("answer = %+v (blocking %+v), want reason interlock, vent-close on", res, res.Blocking)
	}
	if res.Fence != (fence.Fence{Token: 42}) || res.State != fence.StateOff {
		t.Errorf("answer fence %s state %s, want the raised fence 42/0 and vent-open still off", res.Fence, res.State)
	}
	if got := d.since(n); len(got) != 0 {
		t.Errorf("a refused command drove %+v", got)
	}
	if r.level(t, "GPIO5") || !r.level(t, "GPIO6") {
		t.Error("pins moved: want vent-open low, vent-close high")
	}
	// The displaced holder (token 41) is stale now, even on its own actuator.
	r.send(t, command("a-2", "vent-close", 41, 1, fence.StateOff), fence.Stale)
	// A redelivery of the refused command is refused the same way.
	if again := r.send(t, command("b-1", "vent-open", 42, 0, fence.StateOn), fence.Rejected); again.Reason != fence.ReasonInterlock {
		t.Errorf("redelivery = %+v, want rejected (interlock) again", again)
	}
	// Off first, then on: the holder's normal way.
	r.send(t, command("b-2", "vent-close", 42, 1, fence.StateOff), fence.Applied)
	r.send(t, command("b-3", "vent-open", 42, 2, fence.StateOn), fence.Applied)
	if !r.level(t, "GPIO5") || r.level(t, "GPIO6") {
		t.Error("want vent-open high, vent-close low")
	}
	// A member outside the interlock is free.
	r.send(t, command("b-4", "vent-lamp", 42, 3, fence.StateOn), fence.Applied)
	es, _ := r.log.Audit(20)
	var refused bool
	for _, e := range es {
		refused = refused || (e.ID == "b-1" && e.Outcome == fence.Rejected && e.Reason == fence.ReasonInterlock && e.Fence == fence.Fence{Token: 42})
	}
	if !refused {
		t.Error("the refused command is not in the audit trail as rejected (interlock) with its raised fence")
	}
}

// Break-before-make: both states and the fence are recorded before either
// pin moves, the other member goes off first, and the on waits the dead
// time.
func TestInterlockBreakBeforeMake(t *testing.T) {
	const dead = 80 * time.Millisecond
	r, d := newVentRig(t, "", ventLock(true, dead))
	r.send(t, command("a-1", "vent-close", 41, 0, fence.StateOn), fence.Applied)
	n := d.len()
	res := r.send(t, command("b-1", "vent-open", 42, 0, fence.StateOn), fence.Applied)
	if res.State != fence.StateOn || res.Fence != (fence.Fence{Token: 42}) {
		t.Errorf("answer = %+v", res)
	}
	got := d.since(n)
	if len(got) != 2 || got[0].name != "vent-close" || got[0].high || got[1].name != "vent-open" || !got[1].high {
		t.Fatalf("drives = %+v, want vent-close low, then vent-open high", got)
	}
	for _, dr := range got {
		if dr.recorded["vent-open"] != fence.StateOn || dr.recorded["vent-close"] != fence.StateOff {
			t.Errorf("when %s moved the store held %v; want both states recorded before either pin moves", dr.name, dr.recorded)
		}
	}
	if gap := got[1].at.Sub(got[0].at); gap != dead {
		t.Errorf("vent-open came on %v after vent-close went off; the dead time is %v", gap, dead)
	}
	if !r.level(t, "GPIO5") || r.level(t, "GPIO6") {
		t.Error("want vent-open high, vent-close low")
	}
	es, _ := r.log.Audit(5)
	if last := es[len(es)-1]; last.Outcome != fence.OutcomeInterlock || last.Actuator != "vent-close" {
		t.Errorf("last audit entry = %+v, want vent-close switched off by the interlock", last)
	}

	// Without break-before-make the dead time still holds: off, then at
	// once on, waits.
	r.send(t, command("b-2", "vent-open", 42, 1, fence.StateOff), fence.Applied)
	n = d.len()
	r.send(t, command("b-3", "vent-close", 42, 2, fence.StateOn), fence.Applied)
	got = d.since(n - 1)
	if gap := got[1].at.Sub(got[0].at); gap != dead {
		t.Errorf("vent-close came on %v after vent-open went off; the dead time is %v", gap, dead)
	}
}

// A failed off stops the sequence: nothing comes on next to an output that
// may still be on.
func TestInterlockFailedBreak(t *testing.T) {
	r, _ := newVentRig(t, "", ventLock(true, 0))
	r.send(t, command("a-1", "vent-close", 41, 0, fence.StateOn), fence.Applied)
	r.sim.SetFault("GPIO6", errors.New("relay stuck"))
	res := r.send(t, command("b-1", "vent-open", 42, 0, fence.StateOn), fence.Failed)
	if r.level(t, "GPIO5") {
		t.Errorf("vent-open was driven on although vent-close could not be switched off: %s", res.Error)
	}
	r.sim.SetFault("GPIO6", nil)
	// The record says vent-close off, its pin says on: with the fault gone,
	// the next command switches it off again before vent-open comes on.
	r.send(t, command("b-2", "vent-open", 42, 1, fence.StateOn), fence.Applied)
	if !r.level(t, "GPIO5") || r.level(t, "GPIO6") {
		t.Error("want vent-open high, vent-close low after the retry")
	}
}

// A member whose pin reads on counts as on, whatever its record says: in
// reject mode the command is refused.
func TestInterlockTrustsThePin(t *testing.T) {
	r, _ := newVentRig(t, "", ventLock(false, 0))
	r.send(t, command("a-1", "vent-close", 41, 0, fence.StateOn), fence.Applied)
	r.sim.SetFault("GPIO6", errors.New("relay stuck"))
	r.send(t, command("a-2", "vent-close", 41, 1, fence.StateOff), fence.Failed) // recorded off, still on
	r.sim.SetFault("GPIO6", nil)
	res := r.send(t, command("a-3", "vent-open", 41, 2, fence.StateOn), fence.Rejected)
	if res.Reason != fence.ReasonInterlock || r.level(t, "GPIO5") {
		t.Errorf("answer = %+v; want refused while vent-close's pin reads on", res)
	}
}

// The boot rule with interlocks: a store from before the interlock with
// both members on starts with both off, recorded; an interlocked member
// recorded on is taken over off and comes on after the dead time.
func TestInterlockBoot(t *testing.T) {
	dir := t.TempDir()
	r, _ := newVentRig(t, dir, nil) // no interlock yet
	r.send(t, command("a-1", "vent-open", 41, 0, fence.StateOn), fence.Applied)
	r.send(t, command("a-2", "vent-close", 41, 1, fence.StateOn), fence.Applied)
	r.log.Close()

	r2, _ := newVentRig(t, dir, ventLock(false, 0))
	for _, name := range []string{"vent-open", "vent-close"} {
		if o, _ := r2.bank.Output(name); o.State != fence.StateOff || o.Holder != "boot" {
			t.Errorf("%s after a start with the interlock = %+v, want recorded off by the boot rule", name, o)
		}
	}
	if r2.level(t, "GPIO5") || r2.level(t, "GPIO6") {
		t.Error("both members must be off")
	}
	r2.send(t, command("a-3", "vent-open", 41, 2, fence.StateOn), fence.Applied)
	r2.log.Close()

	const dead = 150 * time.Millisecond
	l, err := fencelog.Open(filepath.Join(dir, "fence.db"), &fencelog.Options{AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	opts := ventLock(false, dead)
	clock := rigClock(opts)
	clock.auto = true
	b, err := actuator.New(l, []actuator.Spec{{Name: "vent-open", Scope: "vent", PinName: "GPIO5"},
		{Name: "vent-close", Scope: "vent", PinName: "GPIO6"}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range b.Lines() {
		if line.High {
			t.Errorf("line %+v: an interlocked output with a dead time must be taken over off", line)
		}
	}
	sim, _ := boards.OpenSim(boards.LatchPath(filepath.Join(dir, "fence.db")))
	var onAt time.Time
	began := clock.Now()
	err = b.Start(func(name string) (actuator.Pin, error) {
		p, err := sim.Pin(name)
		return recordingPin{Pin: p, name: name, onDrive: func(n string, high bool) {
			if high && onAt.IsZero() {
				onAt = clock.Now()
			}
		}}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if onAt.IsZero() || onAt.Sub(began) != dead {
		t.Errorf("vent-open came on %v after start; want after the dead time %v", onAt.Sub(began), dead)
	}
	if m, _ := boards.ReadLatch(sim.Path()); !m["GPIO5"] || m["GPIO6"] {
		t.Errorf("latch after start = %v, want vent-open high, vent-close low", m)
	}
}

// The boot rule decides the line levels after the store bound the
// actuators to their scopes: an actuator the
// configuration moved into another scope is taken over at the level of
// its recorded state, which came along with it, so nothing clicks.
func TestBootLevelsAfterScopeBinding(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, dir, []act{{name: "pump", pin: "GPIO17"}, {name: "valve", pin: "GPIO27", activeLow: true}}, nil)
	r.send(t, command("b-1", "pump", 42, 0, fence.StateOn), fence.Applied)
	r.send(t, command("b-2", "valve", 7, 0, fence.StateOn), fence.Applied)
	r.log.Close()

	l, err := fencelog.Open(filepath.Join(dir, "fence.db"), &fencelog.Options{AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, err := actuator.New(l, []actuator.Spec{{Name: "pump", Scope: "water", PinName: "GPIO17"},
		{Name: "valve", Scope: "water", PinName: "GPIO27", ActiveLow: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"pump": true, "valve": false} // on; on with active_low
	for _, line := range b.Lines() {
		if line.High != want[line.Actuator] {
			t.Errorf("line %+v: taken over at high=%v, but its recorded state says %v", line, line.High, want[line.Actuator])
		}
	}
	if o, _ := b.Output("pump"); o.State != fence.StateOn || o.Fence.Token != 42 {
		t.Errorf("moved pump = %+v, want on at fence 42 (the old scope's, the higher)", o)
	}
}

// Handle gives up waiting for its scope when its context ends, and the
// command is not decided.
func TestHandleHonoursContext(t *testing.T) {
	hold := make(chan struct{})
	entered := make(chan struct{}, 1)
	var once sync.Once
	r := newRigWrapped(t, "", defaultActs, nil, func(name string, high bool) {
		if name == "pump" && high {
			once.Do(func() { entered <- struct{}{}; <-hold })
		}
	})
	go r.bank.Handle(context.Background(), command("b-1", "pump", 42, 0, fence.StateOn))
	<-entered // b-1 holds the pump's scope, inside its drive
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.bank.Handle(ctx, command("b-2", "pump", 43, 0, fence.StateOff))
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Handle with a cancelled context = %v, want context.Canceled", err)
	}
	close(hold)
	r.send(t, command("b-3", "pump", 42, 1, fence.StateOn), fence.Applied) // b-2 (43) was never decided
	es, _ := r.log.Audit(20)
	for _, e := range es {
		if e.ID == "b-2" {
			t.Errorf("the abandoned command was decided: %+v", e)
		}
	}
}
