package client_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/service"
	"github.com/fencegate/fencegate/tests/testenv"
)

// gateway runs gateway gw with actuator pump on broker until the test
// ends, or until the function it returns stops it cleanly.
func gateway(t *testing.T, broker string) (stop func()) {
	t.Helper()
	return run(t, fmt.Sprintf("id: gw\nmqtt: {broker: %s}\nstore: %s\nboard: sim\nhttp: \"\"\nactuators:\n  - {name: pump, pin: GPIO17}\n",
		broker, filepath.Join(t.TempDir(), "fence.db")))
}

// run runs a gateway with the configuration doc until the test ends, or
// until the function it returns stops it cleanly.
func run(t *testing.T, doc string) (stop func()) {
	t.Helper()
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- service.Run(ctx, cfg, service.Options{Init: true, Ready: func(service.Info) { close(ready) }})
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(15 * time.Second):
		t.Fatal("gateway not ready")
	}
	return stop
}

func TestTypedAnswers(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	gateway(t, broker)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitStatus(ctx, "online"); err != nil {
		t.Fatal(err)
	}
	on := fence.Command{ID: "b-1", Actuator: "pump", Holder: "b", Fence: fence.Fence{Token: 42}, State: fence.StateOn}
	if res, err := c.Send(ctx, on); err != nil || res.Outcome != fence.Applied {
		t.Fatalf("Send(applied) = %v, %v", res.Outcome, err)
	}
	if res, err := c.Send(ctx, on); err != nil || res.Outcome != fence.Duplicate {
		t.Fatalf("Send(redelivery) = %v, %v; want duplicate and no error", res.Outcome, err)
	}
	_, err = c.Send(ctx, fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 41}, State: fence.StateOff})
	var se *client.StaleError
	if !errors.As(err, &se) || se.Fence() != (fence.Fence{Token: 42}) || se.State() != fence.StateOn {
		t.Fatalf("Send(old token) error = %v, want *StaleError with fence 42/0 and state on", err)
	}
	// No token: refused before anything is sent (a sent one would be rejected, and answered).
	if _, err := c.Send(ctx, fence.Command{ID: "no-token", Actuator: "pump", State: fence.StateOff}); err == nil || !strings.Contains(err.Error(), "not sent: a command needs a token") {
		t.Errorf("Send(no token) error = %v, want not sent", err)
	}
	quiet, cancelQuiet := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelQuiet()
	if r, err := c.Await(quiet, "no-token"); err == nil {
		t.Errorf("a command without a token was sent: answered %+v", r)
	}
	_, err = c.Send(ctx, fence.Command{Actuator: "nope", Fence: fence.Fence{Token: 50}, State: fence.StateOff})
	var re *client.RejectedError
	if !errors.As(err, &re) {
		t.Fatalf("Send(unknown actuator) error = %v, want *RejectedError", err)
	}
	if o, err := c.WaitState(ctx, "pump", func(o fence.Output) bool { return o.Fence.Token == 42 }); err != nil || o.State != fence.StateOn {
		t.Errorf("WaitState = %+v, %v", o, err)
	}
	short, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	other, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: "absent"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Send(short, on); !errors.Is(err, client.ErrTimeout) {
		t.Errorf("Send to an absent gateway = %v, want ErrTimeout", err)
	}
}

// Heartbeat keeps a scope's dead-man from firing while the lease is held:
// fence-only commands with seq numbers shared with the holder's commands;
// it stops with a *StaleError once another holder raised the fence.
// deadManPump runs a gateway on broker with one actuator, pump, whose
// scope has a dead-man of after, and dials it; the context ends with t.
func deadManPump(t *testing.T, broker, after string) (context.Context, *client.Client) {
	t.Helper()
	run(t, fmt.Sprintf("id: gw\nmqtt: {broker: %s}\nstore: %s\nboard: sim\nhttp: \"\"\nactuators:\n  - {name: pump, pin: GPIO17}\nscopes:\n  - {name: pump, safe: {after: %s}}\n",
		broker, filepath.Join(t.TempDir(), "fence.db"), after))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return ctx, c
}

func TestHeartbeat(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	ctx, c := deadManPump(t, broker, "600ms")
	var seq client.Seq
	on := fence.Command{ID: "a-1", Actuator: "pump", Holder: "a", Fence: fence.Fence{Token: 7, Seq: seq.Next()}, State: fence.StateOn}
	if _, err := c.Send(ctx, on); err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.Heartbeat(hctx, client.Heartbeat{Actuator: "pump", Holder: "a", Token: 7, Seq: &seq, Every: 100 * time.Millisecond})
	}()
	time.Sleep(1500 * time.Millisecond) // 2.5 dead-man times
	if o, _ := c.State("pump"); o.State != fence.StateOn || o.Fence.Seq < 5 {
		t.Errorf("pump after heartbeats = %+v, want still on, fence seq moved by the heartbeats", o)
	}
	// A command of the holder between heartbeats takes the next seq. A
	// heartbeat that took a later one may reach the gateway first: the
	// command is then stale under the holder's own token, and goes again
	// above the fence (as docs/controllers.md says, and examples/controller
	// does).
	between := fence.Command{ID: "a-2", Actuator: "pump", Holder: "a", Fence: fence.Fence{Token: 7, Seq: seq.Next()}, State: fence.StateOn}
	for try := 0; ; try++ {
		_, err := c.Send(ctx, between)
		var own *client.StaleError
		if errors.As(err, &own) && own.Fence().Token == 7 && try < 5 {
			seq.Pass(own.Fence().Seq)
			between.Fence.Seq = seq.Next()
			between.ID = fmt.Sprintf("a-2-%d", try)
			continue
		}
		if err != nil {
			t.Errorf("a command between heartbeats: %v", err)
		}
		break
	}
	// Another holder: the heartbeat stops, stale.
	if _, err := c.Send(ctx, fence.Command{ID: "b-1", Actuator: "pump", Holder: "b", Fence: fence.Fence{Token: 8}, State: fence.StateOn}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var se *client.StaleError
		if !errors.As(err, &se) {
			t.Errorf("Heartbeat after another holder = %v, want a *StaleError", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Heartbeat goes on after another holder raised the fence")
	}
	hcancel()
	// Without heartbeats, the dead-man fires.
	if o, err := c.WaitState(ctx, "pump", func(o fence.Output) bool { return o.State == fence.StateOff }); err != nil || o.Fence != (fence.Fence{Token: 8}) {
		t.Errorf("pump without heartbeats = %+v, %v; want off at fence 8/0", o, err)
	}
}

// A heartbeat that the holder's own command overtook (its seq is below
// the fence, under the holder's token) is not a lost lease: the
// heartbeats go on above the fence.
func TestHeartbeatOvertakenByOwnCommand(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	ctx, c := deadManPump(t, broker, "5s")
	// The command with seq 5 arrives before the heartbeat with seq 1,
	// as it can when two goroutines share the Seq.
	if _, err := c.Send(ctx, fence.Command{ID: "a-5", Actuator: "pump", Holder: "a", Fence: fence.Fence{Token: 7, Seq: 5}, State: fence.StateOn}); err != nil {
		t.Fatal(err)
	}
	var seq client.Seq
	hctx, hcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.Heartbeat(hctx, client.Heartbeat{Actuator: "pump", Holder: "a", Token: 7, Seq: &seq, Every: 50 * time.Millisecond})
	}()
	o, err := c.WaitState(ctx, "pump", func(o fence.Output) bool { return o.Fence.Seq > 5 })
	select {
	case err := <-done:
		t.Fatalf("Heartbeat overtaken by its holder's own command ended: %v", err)
	default:
	}
	if err != nil || o.Fence.Token != 7 || o.State != fence.StateOn {
		t.Errorf("pump = %+v, %v; want on, the heartbeats' fence above 7/5", o, err)
	}
	if n := seq.Next(); n <= o.Fence.Seq {
		t.Errorf("the Seq after the heartbeats gives %d, not above the fence %v", n, o.Fence)
	}
	hcancel()
	if err := <-done; err != nil {
		t.Errorf("Heartbeat after its context ended = %v, want nil", err)
	}
}

// A heartbeat answered later than Every, while the broker is stalled,
// still counts; one unanswered for its Timeout ends Heartbeat with
// ErrTimeout.
func TestHeartbeatLateAnswer(t *testing.T) {
	broker, proc := testenv.EmbeddedBrokerProcess(t)
	ctx, c := deadManPump(t, broker, "5s")
	var seq client.Seq
	if _, err := c.Send(ctx, fence.Command{ID: "a-1", Actuator: "pump", Holder: "a", Fence: fence.Fence{Token: 7, Seq: seq.Next()}, State: fence.StateOn}); err != nil {
		t.Fatal(err)
	}
	if err := testenv.Pause(proc); err != nil {
		t.Skip(err)
	}
	testenv.Resume(proc)
	stall := func(d time.Duration) {
		testenv.Pause(proc)
		time.Sleep(d)
		testenv.Resume(proc)
	}
	beat := func(timeout time.Duration) (context.CancelFunc, chan error) {
		hctx, hcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- c.Heartbeat(hctx, client.Heartbeat{Actuator: "pump", Holder: "a", Token: 7, Seq: &seq, Every: 100 * time.Millisecond, Timeout: timeout})
		}()
		return hcancel, done
	}

	hcancel, done := beat(3 * time.Second)
	stall(time.Second) // ten times Every, a third of Timeout
	before := seq.Next()
	if _, err := c.WaitState(ctx, "pump", func(o fence.Output) bool { return o.Fence.Seq > before+2 }); err != nil {
		t.Fatalf("no heartbeat applied after the broker's stall: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Heartbeat ended after a stall shorter than its Timeout: %v", err)
	default:
	}
	hcancel()
	if err := <-done; err != nil {
		t.Fatalf("Heartbeat at its context's end = %v, want nil", err)
	}

	_, done = beat(300 * time.Millisecond)
	go stall(2 * time.Second)
	select {
	case err := <-done:
		if !errors.Is(err, client.ErrTimeout) {
			t.Errorf("Heartbeat after a stall longer than its Timeout = %v, want ErrTimeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Heartbeat goes on without answers for longer than its Timeout")
	}
}
