// Package testctl is a minimal MQTT controller for fencegate's tests: a real
// paho client that publishes commands and collects answers, state and
// status messages.
package testctl

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/mqttlink"
)

// Timeout bounds every wait.
const Timeout = 10 * time.Second

var clientSeq atomic.Int64

// Controller is a connected test controller.
type Controller struct {
	Topics mqttlink.Topics
	c      mqtt.Client

	mu      sync.Mutex
	cond    *sync.Cond
	results []fence.Result
	states  map[string]fence.Output
	status  string
}

// Connect connects a controller to broker for the gateway topics t; it
// disconnects when tb ends.
func Connect(tb testing.TB, broker string, t mqttlink.Topics) *Controller {
	tb.Helper()
	ctl := &Controller{Topics: t, states: make(map[string]fence.Output)}
	ctl.cond = sync.NewCond(&ctl.mu)
	id := fmt.Sprintf("testctl-%d-%d", time.Now().UnixNano(), clientSeq.Add(1))
	o := mqtt.NewClientOptions().AddBroker(broker).SetClientID(id).SetCleanSession(true).
		SetAutoReconnect(true).SetConnectTimeout(5 * time.Second).SetOrderMatters(true)
	ctl.c = mqtt.NewClient(o)
	if tok := ctl.c.Connect(); !tok.WaitTimeout(Timeout) || tok.Error() != nil {
		tb.Fatalf("testctl: connect %s: %v", broker, tok.Error())
	}
	tb.Cleanup(func() { ctl.c.Disconnect(100) })
	subs := map[string]byte{
		t.Prefix + "/" + t.GatewayID + "/+/result": 1,
		t.Prefix + "/" + t.GatewayID + "/+/state":  1,
		t.Status(): 1,
	}
	tok := ctl.c.SubscribeMultiple(subs, func(_ mqtt.Client, m mqtt.Message) {
		ctl.mu.Lock()
		defer ctl.mu.Unlock()
		defer ctl.cond.Broadcast()
		switch topic := m.Topic(); {
		case topic == t.Status():
			ctl.status = string(m.Payload())
		case len(topic) > 6 && topic[len(topic)-6:] == "/state":
			if o, err := mqttlink.DecodeState(m.Payload()); err == nil {
				ctl.states[o.Actuator] = o
			}
		default:
			if r, err := mqttlink.DecodeResult(m.Payload()); err == nil {
				ctl.results = append(ctl.results, r)
			}
		}
	})
	if !tok.WaitTimeout(Timeout) || tok.Error() != nil {
		tb.Fatalf("testctl: subscribe: %v", tok.Error())
	}
	return ctl
}

// Publish publishes a raw payload to actuator's command topic with QoS 1.
func (ctl *Controller) Publish(tb testing.TB, actuator string, payload []byte, retained bool) {
	tb.Helper()
	tok := ctl.c.Publish(ctl.Topics.Set(actuator), 1, retained, payload)
	if !tok.WaitTimeout(Timeout) || tok.Error() != nil {
		tb.Fatalf("testctl: publish: %v", tok.Error())
	}
}

// Send publishes c and waits for its answer (matched by c.ID, which should
// be unique in the test).
func (ctl *Controller) Send(tb testing.TB, c fence.Command) fence.Result {
	tb.Helper()
	ctl.Publish(tb, c.Actuator, mqttlink.EncodeCommand(c), false)
	return ctl.Result(tb, c.ID)
}

// Result waits for the first answer with the given id and removes it.
func (ctl *Controller) Result(tb testing.TB, id string) fence.Result {
	tb.Helper()
	r, ok := ctl.TryResult(id, Timeout)
	if !ok {
		tb.Fatalf("testctl: no answer for id %q within %v", id, Timeout)
	}
	return r
}

// TryResult is Result without failing: ok is false after d.
func (ctl *Controller) TryResult(id string, d time.Duration) (fence.Result, bool) {
	return wait(ctl, d, func() (fence.Result, bool) {
		for i, r := range ctl.results {
			if r.ID == id {
				ctl.results = append(ctl.results[:i], ctl.results[i+1:]...)
				return r, true
			}
		}
		return fence.Result{}, false
	})
}

// State waits until actuator's retained state satisfies ok and returns it.
func (ctl *Controller) State(tb testing.TB, actuator string, ok func(fence.Output) bool) fence.Output {
	tb.Helper()
	o, found := wait(ctl, Timeout, func() (fence.Output, bool) {
		o, have := ctl.states[actuator]
		return o, have && (ok == nil || ok(o))
	})
	if !found {
		tb.Fatalf("testctl: state of %s not as expected within %v; last %+v", actuator, Timeout, o)
	}
	return o
}

// WaitStatus waits until the gateway's status is want.
func (ctl *Controller) WaitStatus(tb testing.TB, want string) {
	tb.Helper()
	if _, ok := wait(ctl, Timeout, func() (string, bool) { return ctl.status, ctl.status == want }); !ok {
		tb.Fatalf("testctl: status is %q, want %q", ctl.status, want)
	}
}

// Drain discards collected answers.
func (ctl *Controller) Drain() {
	ctl.mu.Lock()
	ctl.results = nil
	ctl.mu.Unlock()
}

func wait[T any](ctl *Controller, d time.Duration, f func() (T, bool)) (T, bool) {
	deadline := time.Now().Add(d)
	stop := time.AfterFunc(d, func() {
		ctl.mu.Lock()
		ctl.cond.Broadcast()
		ctl.mu.Unlock()
	})
	defer stop.Stop()
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	for {
		if v, ok := f(); ok {
			return v, true
		}
		if !time.Now().Before(deadline) {
			v, _ := f()
			return v, false
		}
		ctl.cond.Wait()
	}
}
