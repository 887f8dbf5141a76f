package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// answers collects a gateway's answers by command id, on a connection that
// subscribes again after every reconnect (answers published while it is
// away are lost to it: they are QoS 0).
type answers struct {
	mu  sync.Mutex
	got map[string][]fence.Outcome
}

func collectAnswers(t *testing.T, broker string, topics wire.Topics) *answers {
	t.Helper()
	a := &answers{got: map[string][]fence.Outcome{}}
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "answers")).
		SetAutoReconnect(true).SetMaxReconnectInterval(time.Second).
		SetOnConnectHandler(func(c mqtt.Client) {
			c.Subscribe(topics.ResultFilter(), 1, func(_ mqtt.Client, m mqtt.Message) {
				if r, err := wire.DecodeResult(m.Payload()); err == nil {
					a.mu.Lock()
					a.got[r.ID] = append(a.got[r.ID], r.Outcome)
					a.mu.Unlock()
				}
			}).Wait()
		}))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("answers: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return a
}

// count returns how many commands whose ids start with prefix were
// answered.
func (a *answers) count(prefix string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for id := range a.got {
		if strings.HasPrefix(id, prefix) {
			n++
		}
	}
	return n
}

func (a *answers) of(id string) []fence.Outcome {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got[id])
}

// sender is a controller that publishes commands at QoS 1 and, like a
// controller whose publish failed, publishes again until the broker
// acknowledges it.
type sender struct {
	t      *testing.T
	c      mqtt.Client
	topics wire.Topics
}

func newSender(t *testing.T, broker string, topics wire.Topics) *sender {
	t.Helper()
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "ctl")).
		SetAutoReconnect(true).SetMaxReconnectInterval(time.Second).SetConnectRetry(true))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("controller: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return &sender{t: t, c: c, topics: topics}
}

func (s *sender) send(c fence.Command) {
	s.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		tok := s.c.Publish(s.topics.Set(c.Actuator), 1, false, wire.EncodeCommand(c))
		if tok.WaitTimeout(5*time.Second) && tok.Error() == nil && s.c.IsConnectionOpen() {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the broker did not take %s within 60 s: %v", c.ID, tok.Error())
		}
	}
}

// pumpCommand is the i-th command of the test's stream: token 1, seq i,
// on and off in turn, so that each one applied drives the pin once.
func pumpCommand(i int) fence.Command {
	return fence.Command{ID: fmt.Sprint("s-", i), Actuator: "pump", Fence: fence.Fence{Token: 1, Seq: uint64(i)}, State: fence.State(i%2 + 1)}
}

// TestBrokerLossUnderLoad: Mosquitto stops in the middle of a
// stream of commands from a controller (publishing without waiting for the
// answers) and starts again. The gateway process reconnects and goes on;
// nothing is applied twice (the sim board counts the pin's drives, GET
// /api/actuators) and nothing the broker acknowledged is lost.
//
// With persistence, the broker keeps the gateway's session, the commands
// queued or unacknowledged in it, and delivers them after the restart:
// without any resend, the pump's fence reaches the last command and the
// pin is driven exactly once per command. Without persistence, the broker
// forgets them: the controller resends every command it has no answer for
// (by hand here; package client's resend is another branch's), and each
// command answered applied or duplicate drove the pin exactly once.
func TestBrokerLossUnderLoad(t *testing.T) {
	for _, b := range testenv.RestartableBrokers() {
		t.Run(b.Name, func(t *testing.T) { brokerLossUnderLoad(t, b.Start(t), b.Persistent) })
	}
}

func brokerLossUnderLoad(t *testing.T, b *testenv.PersistentBroker, persistent bool) {
	const n, stopAt = 120, 60
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
	cfg := writeConfig(t, t.TempDir(), b.URL, httpAddr)
	p := startProc(t, nil, "run", "--config", cfg, "--init", "--log-level", "info")
	p.waitLog(t, "gateway ready", 20*time.Second)
	topics := wire.Topics{GatewayID: gatewayID(t)}
	got := collectAnswers(t, b.URL, topics)
	ctl := newSender(t, b.URL, topics)
	before := *apiStatus(t, httpAddr)["pump"].Drives

	for i := 1; i <= n; i++ {
		ctl.send(pumpCommand(i))
		if i != stopAt {
			continue
		}
		b.Stop(t, syscall.SIGTERM)
		waitStatus(t, p, httpAddr, "the broker connection lost", func(s httpapi.Status) bool { return !s.Broker.Connected })
		b.Start(t)
	}
	waitStatus(t, p, httpAddr, "taking commands again", func(s httpapi.Status) bool { return s.Broker.Subscribed })

	last := fence.Fence{Token: 1, Seq: n}
	pump := func() httpapi.Actuator { return apiStatus(t, httpAddr)["pump"] }
	if persistent {
		// Every command the broker acknowledged is delivered: the fence
		// reaches the last, without any resend.
		for deadline := time.Now().Add(60 * time.Second); pump().Fence != last; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the pump's fence is %s 60 s after the restart, want %s: a command the broker acknowledged was lost\n%s", pump().Fence, last, p.output())
			}
		}
	} else {
		// The broker forgot what it had not delivered: resend what has no
		// answer, until all have one.
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
			var missing []int
			for i := 1; i <= n; i++ {
				if len(got.of(pumpCommand(i).ID)) == 0 {
					missing = append(missing, i)
				}
			}
			if len(missing) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("commands %v still have no answer 90 s after the restart\n%s", missing, p.output())
			}
			for _, i := range missing {
				ctl.send(pumpCommand(i))
			}
		}
	}

	// The gateway's record of its decisions (GET /api/audit) against the
	// sim board's drive count: each command decided, none applied twice,
	// one drive per command applied.
	// The audit is read until it has every command (or for 10 s): a read
	// can miss the stale and duplicate entries the store is writing just
	// then (fencelog.Store.Audit reads the buffered ones after the written
	// ones, and the background flush moves them in between).
	var audit []fencelog.Entry
	var outcomes map[string][]fence.Outcome
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		audit = nil
		getJSON(t, "http://"+httpAddr+"/api/audit?n=10000", &audit)
		outcomes = map[string][]fence.Outcome{}
		for _, e := range audit {
			if e.Actuator == "pump" && strings.HasPrefix(e.ID, "s-") {
				outcomes[e.ID] = append(outcomes[e.ID], e.Outcome)
			}
		}
		if len(outcomes) == n || time.Now().After(deadline) {
			break
		}
	}
	count := map[fence.Outcome]int{}
	defer func() {
		if t.Failed() {
			t.Logf("audit (%d entries): %+v\n%s", len(audit), audit, p.output())
		}
	}()
	for i := 1; i <= n; i++ {
		id := pumpCommand(i).ID
		outs := outcomes[id]
		if len(outs) == 0 {
			t.Errorf("%s was never decided (answers %v): a command the broker acknowledged was lost", id, got.of(id))
		}
		if c := countOf(outs, fence.Applied); c > 1 {
			t.Errorf("%s was applied %d times: %v", id, c, outs)
		}
		for _, o := range outs {
			count[o]++
		}
	}
	d := *pump().Drives - before
	t.Logf("%d commands: %d decisions applied, %d duplicate, %d stale (delivered again after the duplicate window, or after a newer one); %d drives",
		n, count[fence.Applied], count[fence.Duplicate], count[fence.Stale], d)
	if d != uint64(count[fence.Applied]) {
		t.Errorf("the pin was driven %d times for %d commands applied, want once each", d, count[fence.Applied])
	}
}

func countOf[T comparable](s []T, v T) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}
