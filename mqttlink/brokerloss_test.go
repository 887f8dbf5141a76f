package mqttlink

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// recorder is a Handler that notes the outcome of every command the core
// decided, by id.
type recorder struct {
	Handler
	mu      sync.Mutex
	got     map[string][]fence.Outcome
	changed chan struct{} // closed and replaced at every note
}

func newRecorder(h Handler) *recorder {
	return &recorder{Handler: h, got: map[string][]fence.Outcome{}, changed: make(chan struct{})}
}

func (r *recorder) HandleBatch(ctx context.Context, cmds []fence.Command) ([]fence.Result, error) {
	res, err := r.Handler.HandleBatch(ctx, cmds)
	r.mu.Lock()
	for i, x := range res {
		r.got[cmds[i].ID] = append(r.got[cmds[i].ID], x.Outcome)
	}
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	return res, err
}

// wait waits until the core decided id n times, and returns the outcomes.
func (r *recorder) wait(t *testing.T, id string, n int) []fence.Outcome {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		got, changed := slices.Clone(r.got[id]), r.changed
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s was decided %d times %v within 30 s, want %d", id, len(got), got, n)
		}
	}
}

// drives returns how often the pump's pin was driven.
func drives(t *testing.T, bank *actuator.Bank) uint64 {
	t.Helper()
	st, err := bank.Statuses()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Actuator == "pump" && s.Drives != nil {
			return *s.Drives
		}
	}
	t.Fatal("no drive count for the pump")
	return 0
}

// TestBrokerLoss: the broker stops while a command is being
// decided: recorded and driven, its answer and acknowledgement not yet
// out (a hook holds it after its commit until the broker is gone). The
// link reconnects with backoff; once the broker is back it marks itself
// offline, then online again (retained), and takes commands. With a
// persistent broker (Mosquitto, persistence true, stopped with SIGTERM) the
// gateway's session survives: the broker delivers the command again, which
// is answered duplicate. A broker without persistence forgot it: the
// controller resends it (by hand here, as package client would), and it is
// answered duplicate. Either way the pin is driven once for it.
func TestBrokerLoss(t *testing.T) {
	for _, b := range testenv.RestartableBrokers() {
		t.Run(b.Name, func(t *testing.T) { brokerLoss(t, b.Start(t), b.Persistent) })
	}
}

func brokerLoss(t *testing.T, b *testenv.PersistentBroker, persistent bool) {
	topics := wire.Topics{GatewayID: testenv.ID(t, "loss")}
	// The observer of the gateway's status subscribes again on every
	// connect; the link's reconnect waits for it, so that it sees every
	// status message the link publishes then.
	observed := make(chan struct{}, 4)
	statuses := make(chan string, 16)
	obs := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(b.URL).SetClientID(testenv.ID(t, "obs")).
		SetAutoReconnect(true).SetMaxReconnectInterval(time.Second).SetOrderMatters(true).
		SetOnConnectHandler(func(c mqtt.Client) {
			c.Subscribe(topics.Status(), 1, func(_ mqtt.Client, m mqtt.Message) { statuses <- string(m.Payload()) }).Wait()
			observed <- struct{}{}
		}))
	if tok := obs.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("observer: %v", tok.Error())
	}
	defer obs.Disconnect(100)
	<-observed
	testHookEstablish = func(gen int) {
		if gen == 2 {
			select {
			case <-observed:
			case <-time.After(30 * time.Second):
			}
		}
	}
	t.Cleanup(func() { testHookEstablish = nil }) // after the link stops

	flog, sim := openStore(t)
	held, release := make(chan struct{}), make(chan struct{})
	bank, err := actuator.New(flog, []actuator.Spec{{Name: "pump", Scope: "pump", PinName: "GPIO17"}}, &actuator.Options{AfterCommit: func(c fence.Command) {
		if c.ID == "c-2" {
			close(held)
			<-release
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bank.Start(sim.Pin); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(bank)
	link := startLink(t, Options{Broker: b.URL, Topics: topics, Actuators: []string{"pump"}, Store: flog.ID()}, rec)

	publish := func(id string, seq uint64, s fence.State) {
		t.Helper()
		pub := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(b.URL).SetClientID(testenv.ID(t, "pub")))
		if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("controller: %v", tok.Error())
		}
		defer pub.Disconnect(100)
		c := wire.EncodeCommand(fence.Command{ID: id, Actuator: "pump", Fence: fence.Fence{Token: 1, Seq: seq}, State: s})
		if tok := pub.Publish(topics.Set("pump"), 1, false, c); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", id, tok.Error())
		}
	}
	publish("c-1", 1, fence.StateOn)
	if got := rec.wait(t, "c-1", 1); got[0] != fence.Applied {
		t.Fatalf("c-1: %v", got)
	}
	before := drives(t, bank)
	publish("c-2", 2, fence.StateOff)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("c-2 was not committed within 30 s")
	}

	b.Stop(t, syscall.SIGTERM)
	lost := time.Now()
	close(release)
	if got := rec.wait(t, "c-2", 1); got[0] != fence.Applied {
		t.Fatalf("c-2: %v", got)
	}
	// Backoff: paho waits 1 s, then 2 s, … between attempts.
	for link.Status().Failures < 3 {
		if time.Since(lost) > 30*time.Second {
			t.Fatalf("no third failed connection attempt within 30 s of the broker's stop: %+v", link.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if took := time.Since(lost); took < 2*time.Second {
		t.Errorf("three connection attempts failed within %v of the broker's stop: no backoff", took)
	}
	if st := link.Status(); st.Connected || st.LastError == "" {
		t.Errorf("status while the broker is down = %+v, want not connected, with the reason", st)
	}
	for len(statuses) > 0 {
		<-statuses // before the broker's stop
	}
	b.Start(t)

	// After the restart: offline (retained "online" may come first, kept by
	// a persistent broker), then online, last.
	var seen []string
	for len(seen) == 0 || seen[len(seen)-1] != wire.StatusOnline || !slices.Contains(seen, wire.StatusOffline) {
		select {
		case s := <-statuses:
			seen = append(seen, s)
		case <-time.After(10 * time.Second):
			t.Fatalf("status messages %v; want offline, then online, since the broker's restart", seen)
		}
	}
	t.Logf("status since the broker's restart: %v", seen)
	if !persistent {
		// The broker forgot the command: its controller, unanswered, sends
		// it again once the gateway is back.
		publish("c-2", 2, fence.StateOff)
	}
	if got := rec.wait(t, "c-2", 2); got[1] != fence.Duplicate {
		t.Errorf("c-2 after the broker's restart: %v, want applied, then duplicate", got)
	}
	if n := drives(t, bank); n != before+1 {
		t.Errorf("the pin was driven %d times for c-2, want once", n-before)
	}
	publish("c-3", 3, fence.StateOn)
	if got := rec.wait(t, "c-3", 1); got[0] != fence.Applied {
		t.Errorf("c-3 after the broker's restart: %v, want applied", got)
	}

	if st := link.Status(); !st.Connected || !st.Subscribed {
		t.Errorf("status after the broker's restart = %+v, want connected and subscribed", st)
	}
}
