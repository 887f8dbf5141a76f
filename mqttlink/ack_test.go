package mqttlink

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// stopHandler applies every command; on the one named stopAt it stops
// its link (cancel) before it answers, as a SIGTERM arriving mid-decision.
type stopHandler struct {
	countHandler
	stopAt string
	cancel context.CancelFunc
	mu     sync.Mutex
	seen   []string
}

func (h *stopHandler) HandleBatch(ctx context.Context, cmds []fence.Command) ([]fence.Result, error) {
	for _, c := range cmds {
		h.mu.Lock()
		h.seen = append(h.seen, c.ID)
		h.mu.Unlock()
		if c.ID == h.stopAt {
			h.cancel()
		}
	}
	return h.countHandler.HandleBatch(ctx, cmds)
}

// TestAnsweredIsAcknowledged: a command the gateway decided and answered
// is acknowledged before the connection closes, even when the stop comes
// while it is being decided, so that the next process does not get it
// again (on another store, a replaced one, it would be decided afresh).
func TestAnsweredIsAcknowledged(t *testing.T) {
	for bname, start := range testenv.Brokers() {
		t.Run(bname, func(t *testing.T) {
			broker := start(t)
			id := testenv.ID(t, "ack")
			topics := wire.Topics{GatewayID: id}
			ctl := testctl.Connect(t, broker, topics)
			run := func(h *stopHandler) (stop func()) {
				ctx, cancel := context.WithCancel(context.Background())
				h.cancel = cancel
				ready := make(chan struct{})
				var once sync.Once
				l := New(Options{Broker: broker, Topics: topics, Actuators: []string{"a"}, Store: "s",
					Ready: func() { once.Do(func() { close(ready) }) }}, h)
				done := make(chan error, 1)
				go func() { done <- l.Run(ctx) }()
				select {
				case <-ready:
				case <-time.After(20 * time.Second):
					t.Fatal("the link did not take commands")
				}
				return func() {
					cancel()
					select {
					case <-done:
					case <-time.After(10 * time.Second):
						t.Fatal("Run did not return")
					}
				}
			}
			first := &stopHandler{stopAt: "c-1"}
			stop := run(first)
			if res := ctl.Send(t, fence.Command{ID: "c-1", Actuator: "a", Fence: fence.Fence{Token: 1}, State: fence.StateOn}); res.Outcome != fence.Applied {
				t.Fatalf("c-1: %+v", res)
			}
			stop()
			second := &stopHandler{}
			defer run(second)()
			if res := ctl.Send(t, fence.Command{ID: "c-2", Actuator: "a", Fence: fence.Fence{Token: 2}, State: fence.StateOn}); res.Outcome != fence.Applied {
				t.Fatalf("c-2: %+v", res)
			}
			second.mu.Lock()
			defer second.mu.Unlock()
			if len(second.seen) != 1 || second.seen[0] != "c-2" {
				t.Errorf("the next link was given %v, want only c-2: c-1 was answered but not acknowledged", second.seen)
			}
		})
	}
}
