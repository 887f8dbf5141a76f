package mqttlink

import (
	"bytes"
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// logHandler applies every command and notes the ids in the order the core
// got them; before[id], if set, runs first (an error leaves the command
// undecided).
type logHandler struct {
	countHandler
	before  map[string]func(context.Context) error
	mu      sync.Mutex
	ids     []string
	changed chan struct{} // closed and replaced at every note
}

func newLogHandler() *logHandler {
	return &logHandler{before: map[string]func(context.Context) error{}, changed: make(chan struct{})}
}

func (h *logHandler) HandleBatch(ctx context.Context, cmds []fence.Command) ([]fence.Result, error) {
	var res []fence.Result
	for _, c := range cmds {
		if f := h.before[c.ID]; f != nil {
			if err := f(ctx); err != nil {
				return res, err
			}
		}
		h.mu.Lock()
		h.ids = append(h.ids, c.ID)
		close(h.changed)
		h.changed = make(chan struct{})
		h.mu.Unlock()
		res = append(res, h.countHandler.apply(c))
	}
	return res, nil
}

// waitFor waits until the core got id, and returns the ids so far.
func (h *logHandler) waitFor(t *testing.T, id string) []string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		h.mu.Lock()
		ids, changed := slices.Clone(h.ids), h.changed
		h.mu.Unlock()
		if slices.Contains(ids, id) {
			return ids
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the core did not get %s within 30 s (it got %v)", id, ids)
		}
	}
}

func idOf(payload []byte) string {
	c, _ := wire.DecodeCommand("", payload)
	return c.ID
}

func command(id string, seq uint64) fence.Command {
	return fence.Command{ID: id, Actuator: "a", Fence: fence.Fence{Token: 1, Seq: seq}, State: fence.StateOn}
}

// TestRetainedCommandRefused: a command the broker delivers with the
// retain flag (a stored retained message, sent to a new subscription) is
// answered rejected (retained) and never reaches the core.
func TestRetainedCommandRefused(t *testing.T) {
	for bname, start := range testenv.Brokers() {
		t.Run(bname, func(t *testing.T) {
			broker := start(t)
			topics := wire.Topics{GatewayID: testenv.ID(t, "retained")}
			ctl := testctl.Connect(t, broker, topics)
			ctl.Publish(t, "a", wire.EncodeCommand(command("r-1", 1)), true)
			h := &countHandler{}
			startLink(t, Options{Broker: broker, Topics: topics, Actuators: []string{"a"}, Store: "s"}, h)
			res := ctl.Result(t, "r-1")
			if res.Outcome != fence.Rejected || res.Reason != fence.ReasonRetained {
				t.Errorf("a retained command: %s (%s) %s; want rejected (%s)", res.Outcome, res.Reason, res.Error, fence.ReasonRetained)
			}
			if n := h.n.Load(); n != 0 {
				t.Errorf("the core decided %d commands, want none", n)
			}
			ctl.Publish(t, "a", nil, true) // clear it
		})
	}
}

// TestUndecidedCommandDeliveredAgain: a command the gateway took but did
// not decide (it stopped first) is not acknowledged, so the broker
// delivers it again to the next process, from the session, right after its
// connect: before that process subscribes. A hook holds the next process
// until the command is in its actuator's queue: a link that acknowledged
// commands before deciding them, or that had no handler for messages on
// topics it has not subscribed to yet (paho drops those), would lose it,
// and the core would get the next commands first. The hook knows at once
// when it is lost: u-m, queued behind u-1 in the first process and never
// taken, comes from the session after it; once the next process has read
// u-m from its connection, u-1 is queued within deliveryGrace or never.
func TestUndecidedCommandDeliveredAgain(t *testing.T) {
	broker := testenv.Mosquitto(t)
	topics := wire.Topics{GatewayID: testenv.ID(t, "undecided")}
	opts := Options{Broker: broker, Topics: topics, Actuators: []string{"a"}, Store: "s"}
	ctl := testctl.Connect(t, broker, topics)

	// u-1 is queued once in each process, u-m at least in the first.
	var u1 atomic.Int32
	queued, markerQueued := make(chan struct{}), make(chan struct{})
	var markerOnce sync.Once
	testHookQueued = func(_ string, payload []byte) {
		switch idOf(payload) {
		case "u-1":
			if u1.Add(1) == 2 {
				close(queued)
			}
		case "u-m":
			markerOnce.Do(func() { close(markerQueued) })
		}
	}
	t.Cleanup(func() { testHookQueued, testHookEstablish, testHookConn = nil, nil, nil }) // after the links stop
	taken := make(chan struct{})
	first := newLogHandler()
	first.before["u-1"] = func(ctx context.Context) error {
		close(taken)
		<-ctx.Done() // the process stops while it decides
		return ctx.Err()
	}
	a := startLink(t, opts, first)
	ctl.Publish(t, "a", wire.EncodeCommand(command("u-1", 1)), false)
	select {
	case <-taken:
	case <-time.After(20 * time.Second):
		t.Fatal("u-1 did not reach the core within 20 s")
	}
	marker := wire.EncodeCommand(command("u-m", 2))
	ctl.Publish(t, "a", marker, false)
	select {
	case <-markerQueued:
	case <-time.After(20 * time.Second):
		t.Fatal("u-m was not queued behind u-1 within 20 s")
	}
	if err, _ := a.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}

	markerRead := make(chan struct{})
	var readOnce sync.Once
	testHookConn = func(c net.Conn) net.Conn {
		return &readWatch{Conn: c, want: marker, seen: func() { readOnce.Do(func() { close(markerRead) }) }}
	}
	testHookEstablish = func(int) {
		select {
		case <-queued:
			return
		case <-markerRead:
		case <-time.After(10 * time.Second):
			return
		}
		select {
		case <-queued:
		case <-time.After(deliveryGrace):
		}
	}
	second := newLogHandler()
	startLink(t, opts, second)
	ctl.Publish(t, "a", wire.EncodeCommand(command("u-2", 3)), false)
	if ids := second.waitFor(t, "u-2"); !slices.Equal(ids, []string{"u-1", "u-m", "u-2"}) {
		t.Errorf("the next process's core got %v, want [u-1 u-m u-2]: u-1, taken but not decided, was lost", ids)
	}
}

// deliveryGrace bounds how long after the link read a command from its
// connection paho may take to hand it to the link.
const deliveryGrace = 2 * time.Second

// readWatch is a connection that calls seen once what it has read holds
// want.
type readWatch struct {
	net.Conn
	want []byte
	seen func()
	mu   sync.Mutex
	read []byte
}

func (c *readWatch) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read = append(c.read, p[:n]...)
	found := bytes.Contains(c.read, c.want)
	c.mu.Unlock()
	if found {
		c.seen()
	}
	return n, err
}

// TestActuatorOrder: one actuator's commands are decided in the order they
// arrived. Hooks hold the worker's first command (u-1) before its decision
// until the second (u-2) is in the actuator's queue, or has reached the
// core: a link that handled each message in a goroutine of its own would
// let u-2 overtake u-1.
func TestActuatorOrder(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	topics := wire.Topics{GatewayID: testenv.ID(t, "order")}
	queued, decided := make(chan struct{}), make(chan struct{})
	testHookQueued = func(_ string, payload []byte) {
		if idOf(payload) == "o-2" {
			close(queued)
		}
	}
	testHookServe = func(_ string, payload []byte) {
		if idOf(payload) == "o-1" {
			select {
			case <-queued:
			case <-decided:
			case <-time.After(20 * time.Second):
			}
		}
	}
	t.Cleanup(func() { testHookQueued, testHookServe = nil, nil }) // after the link stops
	h := newLogHandler()
	h.before["o-2"] = func(context.Context) error {
		close(decided)
		return nil
	}
	startLink(t, Options{Broker: broker, Topics: topics, Actuators: []string{"a"}, Store: "s"}, h)
	ctl := testctl.Connect(t, broker, topics)
	ctl.Publish(t, "a", wire.EncodeCommand(command("o-1", 1)), false)
	ctl.Publish(t, "a", wire.EncodeCommand(command("o-2", 2)), false)
	h.waitFor(t, "o-1")
	if ids := h.waitFor(t, "o-2"); !slices.Equal(ids, []string{"o-1", "o-2"}) {
		t.Errorf("the core got %v, want [o-1 o-2] (their order of arrival)", ids)
	}
}
