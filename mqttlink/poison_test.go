package mqttlink

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// poisonHandler applies every command, and answers those whose id starts
// with "poison" with an error text longer than the test broker takes in
// one packet: their answers make the broker close the gateway's
// connection, as a topic it refuses would.
type poisonHandler struct {
	mu      sync.Mutex
	decided map[string]int
}

func (h *poisonHandler) HandleBatch(_ context.Context, cmds []fence.Command) ([]fence.Result, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	res := make([]fence.Result, len(cmds))
	for i, c := range cmds {
		h.decided[c.ID]++
		res[i] = fence.Result{ID: c.ID, Actuator: c.Actuator, Outcome: fence.Applied, Fence: c.Fence}
		if strings.HasPrefix(c.ID, "poison") {
			res[i].Error = strings.Repeat("x", 4000)
		}
	}
	return res, nil
}

func (h *poisonHandler) MaxBatch(string) int { return 8 }

func (h *poisonHandler) Reject(c fence.Command, reason string, err error) fence.Result {
	return fence.Result{ID: c.ID, Actuator: c.Actuator, Outcome: fence.Rejected, Reason: reason, Error: err.Error()}
}

func (h *poisonHandler) times(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.decided[id]
}

// TestPoisonMessageDoesNotLoop: a command whose answer the broker refuses
// (here: larger than its max_packet_size; Mosquitto closes the connection
// of a client that sends one) costs the gateway at most two connections.
// Then it is acknowledged without its answer, Status says so, and the
// commands around it, before and after, in the same batch, are answered
// as usual; the broker does not deliver it again.
func TestPoisonMessageDoesNotLoop(t *testing.T) {
	broker := testenv.MosquittoConf(t, "allow_anonymous true\nset_tcp_nodelay true\nmax_packet_size 2048\n")
	topics := wire.Topics{GatewayID: testenv.ID(t, "poison")}
	h := &poisonHandler{decided: map[string]int{}}
	l := startLink(t, Options{Broker: broker, Topics: topics, Actuators: []string{"pump", "valve"}, Store: "s"}, h)

	answers := make(chan fence.Result, 64)
	ctl := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "ctl")))
	if tok := ctl.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("controller: connect: %v", tok.Error())
	}
	t.Cleanup(func() { ctl.Disconnect(0) })
	if tok := ctl.Subscribe(topics.ResultFilter(), 1, func(_ mqtt.Client, m mqtt.Message) {
		if r, err := wire.DecodeResult(m.Payload()); err == nil {
			answers <- r
		}
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("controller: subscribe: %v", tok.Error())
	}
	pub := func(actuator, id string, token uint64) {
		t.Helper()
		c := fence.Command{ID: id, Actuator: actuator, Fence: fence.Fence{Token: token}, State: fence.StateOn}
		if tok := ctl.Publish(topics.Set(actuator), 1, false, wire.EncodeCommand(c)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", id, tok.Error())
		}
	}
	// One batch: a good command, the poison, a good one after it.
	pub("pump", "before", 1)
	pub("pump", "poison-1", 2)
	pub("pump", "after", 3)

	want := map[string]bool{"before": true, "after": true}
	deadline := time.After(30 * time.Second)
	for len(want) > 0 {
		select {
		case r := <-answers:
			if strings.HasPrefix(r.ID, "poison") {
				t.Errorf("the poison's answer went out: %+v", r)
			}
			delete(want, r.ID)
		case <-deadline:
			t.Fatalf("not answered within 30 s: %v; status %+v", want, l.Status())
		}
	}
	waitFor(t, 30*time.Second, "the poison set aside", func() bool { return l.Status().Poison == 1 })
	st := l.Status()
	if !strings.Contains(st.LastPoison, `"poison-1"`) || !strings.Contains(st.LastPoison, "pump") {
		t.Errorf("LastPoison %q does not name the command and its actuator", st.LastPoison)
	}
	if strings.Contains(st.LastError, "took over") {
		t.Errorf("the loss is blamed on a take-over: %q", st.LastError)
	}
	if !strings.Contains(st.LastError, "poison-1") {
		t.Errorf("the last loss does not name the answer it was lost on: %q", st.LastError)
	}
	if n := h.times("poison-1"); n > 3 {
		t.Errorf("the poison was decided %d times; at most 3 (first, alone, set aside)", n)
	}
	// The gateway stays on the broker: another actuator's command is
	// answered on the same connection, and the poison does not come again.
	connects := st.Connects
	pub("valve", "later", 1)
	select {
	case r := <-answers:
		if r.ID != "later" {
			t.Errorf("answer %+v, want later's", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("a later command was not answered within 5 s; status %+v", l.Status())
	}
	time.Sleep(500 * time.Millisecond)
	if st := l.Status(); st.Connects != connects || !st.Connected {
		t.Errorf("the gateway reconnected after the poison was set aside: %d connects, then %d (connected %v)", connects, st.Connects, st.Connected)
	}
	if st.Connects > 3 {
		t.Errorf("the poison cost %d connections; at most 3 (the first and two reconnects)", st.Connects)
	}
	if n := h.times("poison-1"); n > 3 {
		t.Errorf("the poison was decided %d times after it was set aside", n)
	}
}

// waitFor polls ok every 20 ms until it holds, or fails t after d.
func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// TestSendRefusesWhatTheBrokerWould: a publish on a topic the broker
// refuses is not made, its token says why, and the connection stays up;
// a good topic still goes through.
func TestSendRefusesWhatTheBrokerWould(t *testing.T) {
	broker := testenv.Mosquitto(t)
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "send")))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(0) })
	for _, topic := range []string{"a/b\nc", "a/\x01", "a/\x1b[2J", "a/\u0085", "a/\uffff", "a/\xff", "a/+", "a/#", ""} {
		tok := send(c, topic, 1, false, "x")
		if !tok.WaitTimeout(time.Second) || tok.Error() == nil {
			t.Errorf("%q: published", topic)
		}
	}
	if tok := send(c, "fencegate/é/reply/ctl", 1, false, "x"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("a good topic after them: %v", tok.Error())
	}
	if !c.IsConnectionOpen() {
		t.Error("the connection was lost")
	}
}
