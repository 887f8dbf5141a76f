package actuator_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/tests/testenv"
)

// rig is a bank over a real bbolt store and the real sim board.
type rig struct {
	bank  *actuator.Bank
	log   *fencelog.Store
	sim   *boards.Sim
	store string
}

type act struct {
	name, pin, scope string
	activeLow        bool
	boot             actuator.Boot
}

var defaultActs = []act{
	{name: "pump", pin: "GPIO17"},
	{name: "valve", pin: "GPIO27"},
	{name: "fan", pin: "GPIO22", scope: "climate"},
	{name: "heater", pin: "GPIO23", scope: "climate"},
}

func newRig(t *testing.T, dir string, acts []act, opts *actuator.Options) *rig {
	return newRigWrapped(t, dir, acts, opts, nil)
}

// recordingPin passes every drive to the real sim pin and reports it.
type recordingPin struct {
	actuator.Pin
	name    string
	onDrive func(name string, high bool)
}

func (p recordingPin) Out(high bool) error {
	runtime.Gosched() // widen the window a broken lock would leave open
	p.onDrive(p.name, high)
	return p.Pin.Out(high)
}

func newRigWrapped(t *testing.T, dir string, acts []act, opts *actuator.Options, onDrive func(name string, high bool)) *rig {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	store := filepath.Join(dir, "fence.db")
	l, err := fencelog.Open(store, &fencelog.Options{Create: fencelog.Fresh(), AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sim, err := boards.OpenSim(store + ".pins")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	var specs []actuator.Spec
	names := map[string]string{} // pin → actuator
	for _, a := range acts {
		specs = append(specs, actuator.Spec{Name: a.name, Scope: a.scope, PinName: a.pin, ActiveLow: a.activeLow, Boot: a.boot})
		names[a.pin] = a.name
	}
	b, err := actuator.New(l, specs, opts)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start(func(name string) (actuator.Pin, error) {
		pin, err := sim.Pin(name)
		if err != nil || onDrive == nil {
			return pin, err
		}
		return recordingPin{Pin: pin, name: names[name], onDrive: onDrive}, nil
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return &rig{bank: b, log: l, sim: sim, store: store}
}

// level reads the latch file, as another process would.
func (r *rig) level(t *testing.T, pin string) bool {
	t.Helper()
	m, err := boards.ReadLatch(r.sim.Path())
	if err != nil {
		t.Fatal(err)
	}
	return m[pin]
}

func (r *rig) send(t *testing.T, c fence.Command, want fence.Outcome) fence.Result {
	t.Helper()
	res := must(r.bank.Handle(context.Background(), c))
	if res.Outcome != want {
		t.Fatalf("Handle(%+v) = %v (%s), want %v", c, res.Outcome, res.Error, want)
	}
	return res
}

func command(id, actuator string, token, seq uint64, s fence.State) fence.Command {
	return fence.Command{ID: id, Actuator: actuator, Holder: "ctl-" + id, Fence: fence.Fence{Token: token, Seq: seq}, State: s}
}

func TestHandle(t *testing.T) {
	r := newRig(t, "", defaultActs, nil)
	res := r.send(t, command("b-7", "pump", 42, 0, fence.StateOn), fence.Applied)
	if res.Fence != (fence.Fence{Token: 42}) || res.State != fence.StateOn || res.ID != "b-7" || res.Command.Token != 42 {
		t.Errorf("applied answer = %+v", res)
	}
	if !r.level(t, "GPIO17") {
		t.Error("pump latch is low after applied on")
	}
	res = r.send(t, command("a-1", "pump", 41, 0, fence.StateOff), fence.Stale)
	if res.Fence.Token != 42 || res.State != fence.StateOn || res.Error == "" {
		t.Errorf("stale answer = %+v, want current fence 42, state on, a reason", res)
	}
	if !r.level(t, "GPIO17") {
		t.Error("stale command moved the pump")
	}
	r.send(t, command("b-8", "pump", 42, 1, fence.StateOff), fence.Applied)
	res = r.send(t, command("b-7", "pump", 42, 0, fence.StateOn), fence.Duplicate)
	if res.Fence != (fence.Fence{Token: 42}) || res.State != fence.StateOff || res.Actual != "" {
		t.Errorf("duplicate answer = %+v, want the original decision's fence 42/0 and the state now, off", res)
	}
	if r.level(t, "GPIO17") {
		t.Error("duplicate drove the pump again")
	}
	res = r.send(t, command("x", "nope", 99, 0, fence.StateOn), fence.Rejected)
	if !strings.Contains(res.Error, "unknown actuator") {
		t.Errorf("unknown actuator error = %q", res.Error)
	}
	res = r.bank.Reject(command("y", "pump", 99, 0, fence.StateOn), fence.ReasonInvalid, errors.New("bad"))
	if res.Outcome != fence.Rejected || res.Fence != (fence.Fence{Token: 42, Seq: 1}) || res.State != fence.StateOff {
		t.Errorf("Reject = %+v, want rejected with current fence 42/1 and state off", res)
	}
	if fs, _ := r.log.Fences(); fs["pump"] != (fence.Fence{Token: 42, Seq: 1}) {
		t.Errorf("fence after rejects = %v, want 42/1", fs["pump"])
	}
	// Fence-only: raises the fence, drives nothing.
	res = r.send(t, command("c-0", "pump", 50, 0, fence.StateNone), fence.Applied)
	if res.Fence.Token != 50 || res.State != fence.StateOff || r.level(t, "GPIO17") {
		t.Errorf("fence-only answer = %+v, level %v; want fence 50, state off, pin low", res, r.level(t, "GPIO17"))
	}
	r.send(t, command("b-9", "pump", 42, 2, fence.StateOn), fence.Stale)
	es, _ := r.log.Audit(100)
	var outcomes []string
	for _, e := range es {
		if e.Actuator == "pump" || e.Actuator == "nope" {
			outcomes = append(outcomes, string(e.Outcome))
		}
	}
	want := "boot applied stale applied duplicate rejected rejected applied stale"
	if got := strings.Join(outcomes, " "); got != want {
		t.Errorf("audit outcomes = %q, want %q", got, want)
	}
}

// The seed's failure: A holds 41 and is paused after its grant and before
// its publish; B acquires 42 and commits; A's command is released. It must be
// stale every time, whatever else runs concurrently, and the output must
// show B's state. Interlocked actuators share the fence: B touching the fan
// fences A's command to the heater.
func TestPausedControllerInterleavings(t *testing.T) {
	r := newRig(t, "", defaultActs, nil)
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	pins := map[string]string{"pump": "GPIO17", "valve": "GPIO27", "fan": "GPIO22", "heater": "GPIO23"}
	var noiseTok sync.Mutex
	valveTok := uint64(0)
	for i := range 150 {
		tokA := uint64(2*i + 1)
		tokB := tokA + 1
		bAct, aAct := "pump", "pump"
		if i%2 == 1 {
			bAct, aAct = "fan", "heater"
		}
		stateB := fence.State(rng.IntN(2) + 1)
		stateA := fence.StateOn
		if stateB == fence.StateOn {
			stateA = fence.StateOff
		}
		release := make(chan struct{})
		var wg sync.WaitGroup
		var resA fence.Result
		yields := rng.IntN(3)
		wg.Add(1)
		go func() { // A: granted tokA, paused before its publish
			defer wg.Done()
			<-release
			for range yields {
				runtime.Gosched()
			}
			resA = must(r.bank.Handle(context.Background(), command(fmt.Sprint("a", i), aAct, tokA, 0, stateA)))
		}()
		stopNoise := make(chan struct{})
		wg.Add(1)
		go func() { // noise: an independent scope, and redeliveries in B's scope
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stopNoise:
					return
				default:
				}
				noiseTok.Lock()
				valveTok++
				c := command(fmt.Sprint("v", valveTok), "valve", valveTok, 0, fence.State(j%2+1))
				noiseTok.Unlock()
				must(r.bank.Handle(context.Background(), c))
				if i > 0 {
					must(r.bank.Handle(context.Background(), command(fmt.Sprint("b", i-1, "-0"), bAct, tokB-2, 0, stateB)))
				}
			}
		}()
		// B acquires tokB, raises the fence, and commits one or more commands.
		n := rng.IntN(3) + 1
		for s := range n {
			st := stateB
			if s == 0 && rng.IntN(2) == 0 {
				st = fence.StateNone
			}
			res := must(r.bank.Handle(context.Background(), command(fmt.Sprint("b", i, "-", s), bAct, tokB, uint64(s), st)))
			if res.Outcome != fence.Applied {
				t.Fatalf("iteration %d: B's command %d = %v (%s), want applied", i, s, res.Outcome, res.Error)
			}
		}
		// B's last command always sets its state.
		res := must(r.bank.Handle(context.Background(), command(fmt.Sprint("b", i, "-set"), bAct, tokB, uint64(n), stateB)))
		if res.Outcome != fence.Applied {
			t.Fatalf("iteration %d: B's set = %v", i, res.Outcome)
		}
		close(release)
		time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		close(stopNoise)
		wg.Wait()
		if resA.Outcome != fence.Stale {
			t.Fatalf("iteration %d: A's command with token %d to %s = %v (%s), want stale", i, tokA, aAct, resA.Outcome, resA.Error)
		}
		if resA.Fence.Token != tokB {
			t.Errorf("iteration %d: A's stale answer carries fence %v, want token %d", i, resA.Fence, tokB)
		}
		if got := r.level(t, pins[bAct]); got != (stateB == fence.StateOn) {
			t.Fatalf("iteration %d: %s latch = %v, want B's state %v", i, bAct, got, stateB)
		}
	}
}

// Per scope, drives happen in fence order: the AfterCommit hook and a
// recorder around the real sim pins must see, for every scope, each commit
// immediately followed by its drive, with strictly increasing fences, however
// many goroutines race.
func TestDrivesFollowFenceOrder(t *testing.T) {
	type event struct {
		commit bool
		fence  fence.Fence
		name   string
	}
	var mu sync.Mutex
	events := map[string][]event{} // per scope
	scopeOf := map[string]string{"pump": "pump", "valve": "valve", "fan": "climate", "heater": "climate"}
	record := func(e event) {
		mu.Lock()
		events[scopeOf[e.name]] = append(events[scopeOf[e.name]], e)
		mu.Unlock()
	}
	r := newRigWrapped(t, "", defaultActs, &actuator.Options{AfterCommit: func(c fence.Command) {
		record(event{commit: true, fence: c.Fence, name: c.Actuator})
		time.Sleep(time.Duration(c.Fence.Seq*50) * time.Microsecond) // uneven gaps between record and drive
	}}, func(name string, high bool) { record(event{name: name}) })
	mu.Lock()
	events = map[string][]event{} // forget the boot drives
	mu.Unlock()
	var wg sync.WaitGroup
	var nextTok atomic.Uint64
	var appliedMu sync.Mutex
	highest := map[string]fence.Command{}
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			names := []string{"pump", "valve", "fan", "heater"}
			for i := range 60 {
				// Mostly fresh tokens, so that most commands are applied and
				// record/drive pairs overlap as much as they can; some old ones.
				tok := nextTok.Add(1)
				if rng.IntN(4) == 0 {
					tok = uint64(rng.IntN(int(tok)) + 1)
				}
				c := command(fmt.Sprint(g, "-", i), names[rng.IntN(4)], tok, uint64(rng.IntN(4)), fence.State(rng.IntN(2)+1))
				res := must(r.bank.Handle(context.Background(), c))
				if res.Outcome == fence.Applied {
					appliedMu.Lock()
					if h, ok := highest[c.Actuator]; !ok || h.Fence.Less(c.Fence) {
						highest[c.Actuator] = c
					}
					appliedMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for scope, evs := range events {
		var last fence.Fence
		if len(evs)%2 != 0 || len(evs) == 0 {
			t.Errorf("scope %s: %d events, want commit/drive pairs", scope, len(evs))
		}
		for i := 0; i+1 < len(evs); i += 2 {
			c, d := evs[i], evs[i+1]
			if !c.commit || d.commit || c.name != d.name {
				t.Fatalf("scope %s: events %d,%d = %+v, %+v; want a commit then its own drive", scope, i, i+1, c, d)
			}
			if !last.Less(c.fence) {
				t.Errorf("scope %s: commit %v after %v", scope, c.fence, last)
			}
			last = c.fence
		}
	}
	pins := map[string]string{"pump": "GPIO17", "valve": "GPIO27", "fan": "GPIO22", "heater": "GPIO23"}
	for name, c := range highest {
		if got := r.level(t, pins[name]); got != (c.State == fence.StateOn) {
			t.Errorf("%s latch = %v, want the state of its highest applied command %+v", name, got, c)
		}
	}
}

func TestReconcile(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "fence.db")
	// A crash between the fsync and the drive: the record says on, the latch low.
	l, err := fencelog.Open(store, &fencelog.Options{Create: fencelog.Fresh(), AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []fence.Command{
		command("1", "pump", 42, 0, fence.StateOn),
		command("2", "fan", 7, 0, fence.StateOn),
		command("3", "heater", 7, 1, fence.StateOn),
	} {
		scope := c.Actuator
		if scope != "pump" {
			scope = "climate"
		}
		if adm, err := l.Admit(scope, c, fence.Rules{}, nil); err != nil || adm.Outcome != fence.Applied {
			t.Fatalf("Admit = %v, %v", adm.Outcome, err)
		}
	}
	l.Close()
	acts := []act{
		{name: "pump", pin: "GPIO17"},                                                            // last: reconciled on
		{name: "valve", pin: "GPIO27", activeLow: true},                                          // never set: off = high
		{name: "fan", pin: "GPIO22", scope: "climate", boot: actuator.BootOff},                   // recorded on, boots off
		{name: "heater", pin: "PIN16", scope: "climate", boot: actuator.BootOn, activeLow: true}, // GPIO23, on = low
	}
	r := newRig(t, dir, acts, nil)
	for pin, want := range map[string]bool{"GPIO17": true, "GPIO27": true, "GPIO22": false, "GPIO23": false} {
		if got := r.level(t, pin); got != want {
			t.Errorf("after reconcile %s = %v, want %v", pin, got, want)
		}
	}
	sts, err := r.bank.Statuses()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		state fence.State
		fence fence.Fence
	}{
		"pump":   {fence.StateOn, fence.Fence{Token: 42}},
		"valve":  {fence.StateOff, fence.Fence{}},
		"fan":    {fence.StateOff, fence.Fence{Token: 7, Seq: 1}}, // boot: off does not touch the fence
		"heater": {fence.StateOn, fence.Fence{Token: 7, Seq: 1}},
	}
	for _, s := range sts {
		w := want[s.Actuator]
		if s.State != w.state || s.Fence != w.fence || s.LevelErr != nil {
			t.Errorf("status %s = %v at %v (level err %v), want %v at %v", s.Actuator, s.State, s.Fence, s.LevelErr, w.state, w.fence)
		}
		if s.High != ((s.State == fence.StateOn) != s.ActiveLow) {
			t.Errorf("status %s: level high=%v does not match state %v with active_low=%v", s.Actuator, s.High, s.State, s.ActiveLow)
		}
	}
	// Old commands are still stale after the restart.
	r.send(t, command("4", "heater", 7, 0, fence.StateOff), fence.Stale)
}

func TestDriveFailure(t *testing.T) {
	r := newRig(t, "", defaultActs, nil)
	r.sim.SetFault("GPIO17", errors.New("relay board unplugged"))
	res := r.send(t, command("b-1", "pump", 42, 0, fence.StateOn), fence.Failed)
	if !strings.Contains(res.Error, "relay board unplugged") || !strings.Contains(res.Error, "recorded") {
		t.Errorf("failed answer error = %q, want the cause and that the fence was recorded", res.Error)
	}
	if r.level(t, "GPIO17") {
		t.Error("pin high after a failed drive")
	}
	if res.State != fence.StateOn || res.Actual != "off" {
		t.Errorf("failed answer state %q actual %q, want the recorded on and the actual off", res.State, res.Actual)
	}
	// The fence was recorded: the same pair is not admitted again, and its
	// redelivery says that the output is not as it asked; the holder
	// retries with a higher seq once the fault is gone.
	res = r.send(t, command("b-1", "pump", 42, 0, fence.StateOn), fence.Duplicate)
	if res.State != fence.StateOn || res.Actual != "off" {
		t.Errorf("duplicate of the failed drive: state %q actual %q, want the recorded on and the actual off", res.State, res.Actual)
	}
	r.sim.SetFault("GPIO17", nil)
	r.send(t, command("b-2", "pump", 42, 1, fence.StateOn), fence.Applied)
	if !r.level(t, "GPIO17") {
		t.Error("pin low after the retry")
	}
	es, _ := r.log.Audit(10)
	var failed bool
	for _, e := range es {
		failed = failed || (e.Outcome == fence.Failed && e.ID == "b-1")
	}
	if !failed {
		t.Error("no failed entry in the audit trail")
	}
}

// A fence that cannot be made durable is never driven: on a full real
// filesystem the answer is failed and the pin does not move.
func TestRecordFailureNeverDrives(t *testing.T) {
	dir := testenv.SmallFS(t, "256k")
	acts := make([]act, 0, 20)
	for i := range 20 {
		acts = append(acts, act{name: fmt.Sprint("out", i), pin: fmt.Sprint("GPIO", i+2)})
	}
	r := newRig(t, dir, acts, nil)
	testenv.Fill(t, dir)
	var failed fence.Result
	holder := strings.Repeat("h", 120)
	for i := 0; i < 5000 && failed.Outcome == ""; i++ {
		name := fmt.Sprint("out", i%20)
		c := command(fmt.Sprint(i), name, uint64(i+1), 0, fence.State(i%2+1))
		c.Holder = holder
		before := r.level(t, fmt.Sprint("GPIO", i%20+2))
		res := must(r.bank.Handle(context.Background(), c))
		switch res.Outcome {
		case fence.Applied:
		case fence.Failed:
			failed = res
			if got := r.level(t, fmt.Sprint("GPIO", i%20+2)); got != before {
				t.Fatalf("pin moved from %v to %v although its fence was not recorded", before, got)
			}
		default:
			t.Fatalf("command %d = %v (%s)", i, res.Outcome, res.Error)
		}
	}
	if failed.Outcome != fence.Failed {
		t.Skip("filesystem never filled up") // cannot happen with 256k, but never pass silently
	}
	if !strings.Contains(failed.Error, "not recorded") {
		t.Errorf("failed answer error = %q, want it to say the fence was not recorded", failed.Error)
	}
	if !errors.Is(r.log.Err(), fencelog.ErrBroken) {
		t.Errorf("log.Err() = %v, want ErrBroken", r.log.Err())
	}
}

func TestNewRejectsBadSpecs(t *testing.T) {
	l, err := fencelog.Open(filepath.Join(t.TempDir(), "f.db"), &fencelog.Options{Create: fencelog.Fresh()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, specs := range [][]actuator.Spec{
		{{Name: "", PinName: "GPIO17"}},
		{{Name: "a", PinName: "GPIO17"}, {Name: "a", PinName: "GPIO27"}},
		{{Name: "a", PinName: "GPIO17", Boot: "sometimes"}},
	} {
		if _, err := actuator.New(l, specs, nil); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", specs)
		}
	}
	// A pin the board does not have fails Start.
	b, err := actuator.New(l, []actuator.Spec{{Name: "a", PinName: "GPIO99"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sim, _ := boards.OpenSim(filepath.Join(t.TempDir(), "pins"))
	if err := b.Start(sim.Pin); err == nil {
		t.Error("Start with a pin the board does not have succeeded")
	}
}

// must returns Handle's answer; an error (a cancelled context) is a test bug.
func must(res fence.Result, err error) fence.Result {
	if err != nil {
		panic(fmt.Sprintf("Handle: %v", err))
	}
	return res
}

// A command committed just before a crash, whose actuator boots off: the
// restart drives it off, and its redelivery is a duplicate that says so.
// With boot: last it is on, as asked.
func TestDuplicateSaysTheOutputNow(t *testing.T) {
	for _, tt := range []struct {
		boot actuator.Boot
		want fence.State
	}{{actuator.BootOff, fence.StateOff}, {actuator.BootLast, fence.StateOn}} {
		dir := t.TempDir()
		l, err := fencelog.Open(filepath.Join(dir, "fence.db"), &fencelog.Options{Create: fencelog.Fresh(), AuditFlush: -1})
		if err != nil {
			t.Fatal(err)
		}
		on := command("c-1", "pump", 42, 0, fence.StateOn)
		if adm, err := l.Admit("pump", on, fence.Rules{}, nil); err != nil || adm.Outcome != fence.Applied {
			t.Fatalf("Admit = %v, %v", adm.Outcome, err)
		}
		l.Close() // the crash: recorded, never driven
		r := newRig(t, dir, []act{{name: "pump", pin: "GPIO17", boot: tt.boot}}, nil)
		res := r.send(t, on, fence.Duplicate)
		if res.Fence != on.Fence || res.State != tt.want || res.Actual != "" {
			t.Errorf("boot %s: redelivery = %+v, want duplicate at %v, state %v and no other actual state", tt.boot, res, on.Fence, tt.want)
		}
		if got := r.level(t, "GPIO17"); got != (tt.want == fence.StateOn) {
			t.Errorf("boot %s: pump level high = %v, want %v", tt.boot, got, tt.want)
		}
	}
}
