package mqttlink

import (
	"context"
	"fmt"
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

// poisonRig is a link on a Mosquitto whose max_packet_size is smaller
// than a poison command's answer, and a controller that hears every
// answer.
type poisonRig struct {
	l       *testLink
	h       *poisonHandler
	topics  wire.Topics
	ctl     mqtt.Client
	answers chan fence.Result
}

func newPoisonRig(t *testing.T, actuators ...string) *poisonRig {
	broker := testenv.MosquittoConf(t, "allow_anonymous true\nset_tcp_nodelay true\nmax_packet_size 2048\nmax_queued_messages 1000\n")
	r := &poisonRig{h: &poisonHandler{decided: map[string]int{}}, topics: wire.Topics{GatewayID: testenv.ID(t, "poison")}, answers: make(chan fence.Result, 256)}
	r.l = startLink(t, Options{Broker: broker, Topics: r.topics, Actuators: actuators, Store: "s"}, r.h)
	r.ctl = mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "ctl")))
	if tok := r.ctl.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("controller: connect: %v", tok.Error())
	}
	t.Cleanup(func() { r.ctl.Disconnect(0) })
	if tok := r.ctl.Subscribe(r.topics.ResultFilter(), 1, func(_ mqtt.Client, m mqtt.Message) {
		if res, err := wire.DecodeResult(m.Payload()); err == nil {
			r.answers <- res
		}
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("controller: subscribe: %v", tok.Error())
	}
	return r
}

func (r *poisonRig) pub(t *testing.T, actuator, id string, token uint64) {
	t.Helper()
	c := fence.Command{ID: id, Actuator: actuator, Fence: fence.Fence{Token: token}, State: fence.StateOn}
	if tok := r.ctl.Publish(r.topics.Set(actuator), 1, false, wire.EncodeCommand(c)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish %s: %v", id, tok.Error())
	}
}

// await waits for an answer to each of ids (an answer may come twice: a
// command the broker delivered again is answered again), failing on a
// poison command's answer.
func (r *poisonRig) await(t *testing.T, d time.Duration, ids ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.After(d)
	for len(want) > 0 {
		select {
		case res := <-r.answers:
			if strings.HasPrefix(res.ID, "poison") {
				t.Errorf("a poison command's answer went out: %+v", res)
			}
			delete(want, res.ID)
		case <-deadline:
			t.Fatalf("not answered within %v: %v; status %+v", d, want, r.l.Status())
		}
	}
}

// stays checks that the link answers a command to actuator on the
// connection it has, and keeps it for a while.
func (r *poisonRig) stays(t *testing.T, actuator string) {
	t.Helper()
	connects := r.l.Status().Connects
	r.pub(t, actuator, "later", 100)
	// 20 s, not 5: CI's two cores, shared with the emulated Pi, once took
	// longer on a connection that stayed; the link taken off the broker
	// for minutes (what this guards against) still fails it.
	r.await(t, 20*time.Second, "later")
	time.Sleep(time.Second)
	if st := r.l.Status(); st.Connects != connects || !st.Connected {
		t.Errorf("the gateway reconnected after the poison was set aside: %d connects, then %d (connected %v, last error %q)", connects, st.Connects, st.Connected, st.LastError)
	}
}

// TestPoisonMessageDoesNotLoop: a command whose answer the broker refuses
// (here: larger than its max_packet_size; Mosquitto closes the connection
// of a client that sends one) costs the gateway two connections. Then it
// is acknowledged without its answer, Status says so, and the commands
// around it, before and after, in the same batch, are answered; the
// broker does not deliver it again.
func TestPoisonMessageDoesNotLoop(t *testing.T) {
	r := newPoisonRig(t, "pump", "valve")
	r.pub(t, "pump", "before", 1)
	r.pub(t, "pump", "poison-1", 2)
	r.pub(t, "pump", "after", 3)
	r.await(t, 30*time.Second, "before", "after")
	waitFor(t, 30*time.Second, "the poison set aside", func() bool { return r.l.Status().Poison == 1 })
	st := r.l.Status()
	if !strings.Contains(st.LastPoison, `"poison-1"`) || !strings.Contains(st.LastPoison, "pump") {
		t.Errorf("LastPoison %q does not name the command and its actuator", st.LastPoison)
	}
	if strings.Contains(st.LastError, "took over") {
		t.Errorf("the loss is blamed on a take-over: %q", st.LastError)
	}
	if !strings.Contains(st.LastError, "poison-1") {
		t.Errorf("the last loss does not name the answer it was lost on: %q", st.LastError)
	}
	if st.Connects > 3 {
		t.Errorf("the poison cost %d connections; at most 3 (the first and two reconnects)", st.Connects)
	}
	r.stays(t, "valve")
	if n := r.h.times("poison-1"); n > 3 {
		t.Errorf("the poison was decided %d times; at most 3 (first, alone, set aside)", n)
	}
}

// TestPoisonBurstDoesNotLoop: many poison commands at once, to several
// actuators and among good ones, cost the gateway a bounded number of
// connections (one each, with paho's backoff doubling between them, took
// it off the broker for minutes): after the second loss on an answer
// alone, what comes again is set aside unanswered. None of their answers
// goes out, and the gateway then stays on the broker and answers.
func TestPoisonBurstDoesNotLoop(t *testing.T) {
	r := newPoisonRig(t, "pump", "valve", "fan", "heater")
	const n = 30
	for i := range n {
		r.pub(t, []string{"pump", "fan", "heater"}[i%3], fmt.Sprintf("poison-%d", i), uint64(1+i))
		r.pub(t, []string{"pump", "fan", "heater"}[i%3], fmt.Sprintf("good-%d", i), uint64(1+i))
	}
	start := time.Now()
	waitFor(t, 60*time.Second, "every poison set aside", func() bool {
		for i := range n {
			if r.h.times(fmt.Sprintf("poison-%d", i)) == 0 {
				return false
			}
		}
		st := r.l.Status()
		return st.Connected && st.Subscribed && st.Poison >= n
	})
	t.Logf("set aside after %v", time.Since(start).Round(time.Millisecond))
	if st := r.l.Status(); st.Connects > 8 {
		t.Errorf("%d poison commands cost %d connections; at most 8", n, st.Connects)
	} else {
		t.Logf("%d poison commands to 3 actuators cost %d connections", n, st.Connects)
	}
	r.stays(t, "valve")
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
