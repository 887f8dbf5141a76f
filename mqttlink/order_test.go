package mqttlink

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// openStore creates a fence store and a sim board beside it, closed when
// t ends.
func openStore(t *testing.T) (*fencelog.Store, *boards.Sim) {
	t.Helper()
	store := filepath.Join(t.TempDir(), "fence.db")
	flog, err := fencelog.Open(store, &fencelog.Options{Create: fencelog.Fresh()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flog.Close() })
	sim, err := boards.OpenSim(boards.LatchPath(store))
	if err != nil {
		t.Fatal(err)
	}
	return flog, sim
}

// TestStatesFollowFenceOrder: the retained state of an
// actuator in a shared scope must end at the scope's newest fence, however
// the publication of an older state is delayed. A hook holds the heater's
// state message of the fan's decision (fence 10) just before it is
// published while the heater's own decision (fence 11) goes through; when
// the hold is released, the retained heater state must carry fence 11.
func TestStatesFollowFenceOrder(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	flog, sim := openStore(t)
	var link *Link
	specs := []actuator.Spec{{Name: "fan", Scope: "climate", PinName: "GPIO22"}, {Name: "heater", Scope: "climate", PinName: "GPIO23"}}
	bank, err := actuator.New(flog, specs, &actuator.Options{Changed: func(o []fence.Output) { link.Changed(o) }})
	if err != nil {
		t.Fatal(err)
	}
	topics := wire.Topics{GatewayID: "order"}
	link = New(Options{Broker: broker, Topics: topics, Actuators: []string{"fan", "heater"}, Store: flog.ID()}, bank)
	if err := bank.Start(sim.Pin); err != nil {
		t.Fatal(err)
	}

	held := make(chan fence.Output, 1)
	release := make(chan struct{})
	var once sync.Once
	testHookStatePublish = func(o fence.Output) {
		if o.Actuator == "heater" && o.Fence.Token == 10 {
			once.Do(func() {
				held <- o
				<-release
			})
		}
	}
	defer func() { testHookStatePublish = nil }()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- link.Run(ctx) }()
	defer func() { cancel(); <-done }()
	ctl := testctl.Connect(t, broker, topics)
	ctl.WaitStatus(t, wire.StatusOnline)

	if res := ctl.Send(t, fence.Command{ID: "b-1", Actuator: "fan", Fence: fence.Fence{Token: 10}, State: fence.StateOn}); res.Outcome != fence.Applied {
		t.Fatalf("fan 10/0: %s %s", res.Outcome, res.Error)
	}
	select {
	case <-held:
	case <-time.After(testctl.Timeout):
		t.Fatal("no state message of fence 10 reached the hook")
	}
	// The heater's command goes through while fence 10's states are held;
	// its answer may or may not come before the release.
	ctl.Publish(t, "heater", wire.EncodeCommand(fence.Command{ID: "c-1", Actuator: "heater", Fence: fence.Fence{Token: 11}, State: fence.StateOn}), false)
	early, answered := ctl.TryResult("c-1", time.Second)
	close(release)
	if !answered {
		early = ctl.Result(t, "c-1")
	}
	if early.Outcome != fence.Applied {
		t.Fatalf("heater 11/0: %s %s", early.Outcome, early.Error)
	}
	// Every state message published from now on is seen in order; the
	// retained heater state must settle at fence 11.
	late := testctl.Connect(t, broker, topics)
	o := late.State(t, "heater", func(o fence.Output) bool { return o.Fence.Token == 11 })
	ctl.State(t, "heater", func(o fence.Output) bool { return o.Fence.Token == 11 })
	// Give a held, older message every chance to land after it: publish a
	// marker through the same client and wait for it (messages of one
	// client reach a subscriber in order).
	if res := ctl.Send(t, fence.Command{ID: "c-2", Actuator: "heater", Fence: fence.Fence{Token: 11, Seq: 1}}); res.Outcome != fence.Applied {
		t.Fatalf("heater 11/1 fence only: %s", res.Outcome)
	}
	final := ctl.State(t, "heater", func(o fence.Output) bool { return o.Fence == (fence.Fence{Token: 11, Seq: 1}) })
	if final.State != fence.StateOn || o.State != fence.StateOn {
		t.Errorf("retained heater state = %+v, want on at fence 11", final)
	}
	// A fresh subscriber gets the retained messages: the newest of both.
	fresh := testctl.Connect(t, broker, topics)
	for _, name := range []string{"fan", "heater"} {
		o := fresh.State(t, name, nil)
		if o.Fence != (fence.Fence{Token: 11, Seq: 1}) {
			t.Errorf("retained %s state has fence %s, want 11/1 (an older state was published last)", name, o.Fence)
		}
	}
}
