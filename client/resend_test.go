package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/service"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// process is a gateway run in this test process, as its own process would
// run it: stop is a clean stop (SIGTERM's path).
type process struct {
	cancel context.CancelFunc
	done   chan error
}

// start runs the gateway of cfg until stop or the end of the test.
func start(t *testing.T, cfg *config.Config) *process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &process{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		p.done <- service.Run(ctx, cfg, service.Options{Init: true, Ready: func(service.Info) { close(ready) }})
	}()
	t.Cleanup(p.stop)
	select {
	case <-ready:
	case err := <-p.done:
		p.done <- err
		t.Fatalf("gateway stopped at start: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("gateway not ready within 15 s")
	}
	return p
}

func (p *process) stop() {
	p.cancel()
	err := <-p.done
	p.done <- err
}

// drives returns how often the gateway at httpAddr drove each actuator's
// pin since it started.
func drives(t *testing.T, httpAddr string) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for _, a := range testctl.Actuators(t, httpAddr) {
		if a.Drives == nil {
			t.Fatalf("%s: the API counts no drives (not the sim board?)", a.Name)
		}
		m[a.Name] = *a.Drives
	}
	return m
}

// copies counts the copies of each command (by id) published on a
// gateway's command topics.
type copies struct {
	mu      sync.Mutex
	n       map[string]int
	changed chan struct{}
}

// watchCommands starts counting the copies of the commands to topics'
// gateway.
func watchCommands(t *testing.T, broker string, topics wire.Topics) *copies {
	t.Helper()
	w := &copies{n: map[string]int{}, changed: make(chan struct{})}
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "watch")).SetOrderMatters(true))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("watch: connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	tok := c.Subscribe(topics.SetFilter(), 1, func(_ mqtt.Client, m mqtt.Message) {
		var cmd struct{ ID string }
		json.Unmarshal(m.Payload(), &cmd)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.n[cmd.ID]++
		close(w.changed)
		w.changed = make(chan struct{})
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("watch: subscribe: %v", tok.Error())
	}
	return w
}

// wait waits up to d until at least n copies of id were published, and
// returns how many were.
func (w *copies) wait(id string, n int, d time.Duration) int {
	timeout := time.After(d)
	for {
		w.mu.Lock()
		got, ch := w.n[id], w.changed
		w.mu.Unlock()
		if got >= n {
			return got
		}
		select {
		case <-ch:
		case <-timeout:
			return got
		}
	}
}

// TestSendResendsUnanswered: a gateway that stopped cleanly has removed
// its subscription, so the broker drops the commands published until it
// is back (docs/protocol.md, Clean stop), as a broker drops them when its
// queue for the gateway is full or its session lost. Send publishes its
// command again until it is answered: the command is applied once, after
// the gateway is back, and a later copy of it is answered duplicate and
// drives nothing (the sim board counts the drives).
func TestSendResendsUnanswered(t *testing.T) {
	for name, startBroker := range testenv.Brokers() {
		t.Run(name, func(t *testing.T) {
			broker := startBroker(t)
			id := testenv.ID(t, "gw")
			httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
			cfg, err := config.Parse(fmt.Appendf(nil, "id: %s\nmqtt: {broker: %s}\nstore: %s\nboard: sim\nhttp: %q\nactuators:\n  - {name: pump, pin: GPIO17}\n",
				id, broker, filepath.Join(t.TempDir(), "fence.db"), httpAddr))
			if err != nil {
				t.Fatal(err)
			}
			topics := wire.Topics{Prefix: wire.DefaultPrefix, GatewayID: id}
			watch := watchCommands(t, broker, topics)
			gw := start(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: id, Resend: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.WaitStatus(ctx, wire.StatusOnline); err != nil {
				t.Fatal(err)
			}
			gw.stop()
			if err := c.WaitStatus(ctx, wire.StatusOffline); err != nil {
				t.Fatal(err)
			}

			cmd := fence.Command{ID: "r-1", Actuator: "pump", Fence: fence.Fence{Token: 5}, State: fence.StateOn, Holder: "ctl"}
			type answer struct {
				res fence.Result
				err error
			}
			answered := make(chan answer, 1)
			go func() {
				res, err := c.Send(ctx, cmd)
				answered <- answer{res, err}
			}()
			if n := watch.wait(cmd.ID, 1, 10*time.Second); n < 1 {
				t.Fatalf("%s was not published within 10 s", cmd.ID)
			}
			start(t, cfg)
			a := <-answered
			if a.err != nil || a.res.Outcome != fence.Applied || a.res.Fence != cmd.Fence || a.res.State != fence.StateOn {
				t.Fatalf("Send of a command published while the gateway was stopped = %+v, %v (%d copies published); want applied at %s, on",
					a.res, a.err, watch.wait(cmd.ID, 0, 0), cmd.Fence)
			}
			want := map[string]uint64{"pump": 2} // at start, and the command
			if got := drives(t, httpAddr); got["pump"] != want["pump"] {
				t.Errorf("drives after the command = %v, want %v", got, want)
			}
			res, err := c.Send(ctx, cmd)
			if err != nil || res.Outcome != fence.Duplicate || res.Fence != cmd.Fence || res.State != fence.StateOn {
				t.Errorf("the same command again = %+v, %v; want duplicate at %s, on", res, err, cmd.Fence)
			}
			if got := drives(t, httpAddr); got["pump"] != want["pump"] {
				t.Errorf("drives after the command's copy = %v, want %v: driven twice", got, want)
			}
		})
	}
}

// TestSendWithoutResend: Options.Resend < 0 publishes a command once; an
// unanswered one is ErrTimeout when the context's deadline passes.
func TestSendWithoutResend(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	topics := wire.Topics{Prefix: wire.DefaultPrefix, GatewayID: testenv.ID(t, "absent")}
	watch := watchCommands(t, broker, topics)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: topics.GatewayID, Resend: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	short, cancel2 := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel2()
	cmd := fence.Command{ID: "once", Actuator: "pump", Fence: fence.Fence{Token: 1}}
	if _, err := c.Send(short, cmd); !errors.Is(err, client.ErrTimeout) {
		t.Errorf("Send to an absent gateway = %v, want ErrTimeout", err)
	}
	if n := watch.wait(cmd.ID, 2, 500*time.Millisecond); n != 1 {
		t.Errorf("%d copies published with Resend -1, want 1", n)
	}
}

// TestSendPublishesOnce: the gateway's retained "online", which a new
// client receives when it subscribes, tells the gateway's status, not that
// it came back: a command published to a gateway that stayed online is
// published once, however late that retained status is taken. The hook
// holds it back until the command was published, as a fresh gateway send
// often sees it.
func TestSendPublishesOnce(t *testing.T) {
	for name, startBroker := range testenv.Brokers() {
		t.Run(name, func(t *testing.T) {
			broker := startBroker(t)
			id := testenv.ID(t, "gw")
			cfg, err := config.Parse(fmt.Appendf(nil, "id: %s\nmqtt: {broker: %s}\nstore: %s\nboard: sim\nhttp: \"\"\nactuators:\n  - {name: pump, pin: GPIO17}\n",
				id, broker, filepath.Join(t.TempDir(), "fence.db")))
			if err != nil {
				t.Fatal(err)
			}
			topics := wire.Topics{Prefix: wire.DefaultPrefix, GatewayID: id}
			watch := watchCommands(t, broker, topics)
			start(t, cfg)
			cmd := fence.Command{ID: testenv.ID(t, "once"), Actuator: "pump", Fence: fence.Fence{Token: 5}, State: fence.StateOn, Holder: "ctl"}
			var held sync.Once
			client.SetStatusHook(func(retained bool) {
				held.Do(func() {
					if !retained {
						t.Errorf("the first status message this client took was not the retained one")
					}
					watch.wait(cmd.ID, 1, 10*time.Second)
				})
			})
			t.Cleanup(func() { client.SetStatusHook(nil) })
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: id})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if res, err := c.Send(ctx, cmd); err != nil || res.Outcome != fence.Applied {
				t.Fatalf("Send = %+v, %v; want applied", res, err)
			}
			// A later command on the same topic comes after every copy of
			// the first one.
			next := cmd
			next.ID, next.Fence.Seq = testenv.ID(t, "next"), 1
			if _, err := c.Send(ctx, next); err != nil {
				t.Fatal(err)
			}
			if watch.wait(next.ID, 1, 10*time.Second) < 1 {
				t.Fatalf("%s was not seen on the command topic", next.ID)
			}
			if n := watch.wait(cmd.ID, 0, 0); n != 1 {
				t.Errorf("%s was published %d times to a gateway that stayed online, want once", cmd.ID, n)
			}
		})
	}
}
