// Package testctl is the controller of fencegate's tests: package client,
// the controllers' own library, with every wait bounded and every failure
// reported through testing.TB.
package testctl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/wire"
)

// Timeout bounds every wait.
const Timeout = 10 * time.Second

// Controller is a connected test controller.
type Controller struct {
	Topics wire.Topics
	*client.Client
}

// Connect connects a controller to broker for the gateway topics t; it
// disconnects when tb ends.
func Connect(tb testing.TB, broker string, t wire.Topics) *Controller {
	tb.Helper()
	return ConnectAs(tb, broker, t, "", "")
}

// ConnectAs is Connect with a user name and password.
func ConnectAs(tb testing.TB, broker string, t wire.Topics, user, password string) *Controller {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Broker: broker, Prefix: t.Prefix, GatewayID: t.GatewayID, Username: user, Password: password,
		WatchShared: true})
	if err != nil {
		tb.Fatalf("testctl: %v", err)
	}
	tb.Cleanup(c.Close)
	return &Controller{Topics: t, Client: c}
}

// Publish publishes a raw payload to actuator's command topic with QoS 1.
func (ctl *Controller) Publish(tb testing.TB, actuator string, payload []byte, retained bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := ctl.PublishRaw(ctx, actuator, payload, retained); err != nil {
		tb.Fatalf("testctl: %v", err)
	}
}

// Send publishes c, naming the controller's reply topic, and waits for its
// answer (matched by c.ID, which should be unique in the test), once: no
// resend. Stale, rejected and failed answers are returned, not failures.
func (ctl *Controller) Send(tb testing.TB, c fence.Command) fence.Result {
	tb.Helper()
	ctl.Publish(tb, c.Actuator, wire.EncodeRequest(wire.Request{Command: c, Reply: ctl.ReplyTopic()}), false)
	return ctl.Result(tb, c.ID)
}

// Result waits for the answer with the given id.
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
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	r, err := ctl.Await(ctx, id)
	return r, r.Outcome != "" || err == nil
}

// State waits until actuator's retained state satisfies ok and returns it.
func (ctl *Controller) State(tb testing.TB, actuator string, ok func(fence.Output) bool) fence.Output {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	o, err := ctl.WaitState(ctx, actuator, ok)
	if err != nil {
		tb.Fatalf("testctl: state of %s not as expected within %v; last %+v", actuator, Timeout, o)
	}
	return o
}

// Input waits until input name's retained level satisfies ok and returns
// it.
func (ctl *Controller) Input(tb testing.TB, name string, ok func(wire.InputState) bool) wire.InputState {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	in, err := ctl.WaitInput(ctx, name, ok)
	if err != nil {
		tb.Fatalf("testctl: input %s not as expected within %v; last %+v", name, Timeout, in)
	}
	return in
}

// WaitStatus waits until the gateway's status is want.
func (ctl *Controller) WaitStatus(tb testing.TB, want string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := ctl.Client.WaitStatus(ctx, want); err != nil {
		tb.Fatalf("testctl: %v", err)
	}
}

// Drain discards answers nobody waited for.
func (ctl *Controller) Drain() { ctl.Discard() }

// Actuators returns what the gateway's HTTP API at addr (host:port) says of
// its actuators (GET /api/actuators).
func Actuators(tb testing.TB, addr string) []httpapi.Actuator {
	tb.Helper()
	list, err := ReadActuators(addr)
	if err != nil {
		tb.Fatalf("testctl: %v", err)
	}
	return list
}

// ReadActuators is Actuators without a test: for a goroutine of its own,
// or a gateway that may not answer.
func ReadActuators(addr string) ([]httpapi.Actuator, error) {
	var list []httpapi.Actuator
	return list, getJSON(addr, "/api/actuators", &list)
}

// ReadAudit returns what the gateway's HTTP API at addr (host:port) says of
// its audit trail (GET /api/audit) for the query q (e.g. "outcome=applied&n=10000").
func ReadAudit(addr, q string) ([]fencelog.Entry, error) {
	var list []fencelog.Entry
	return list, getJSON(addr, "/api/audit?"+q, &list)
}

// getJSON decodes into v the JSON that a GET of path on the HTTP API at
// addr answers.
func getJSON(addr, path string, v any) error {
	c := http.Client{Timeout: Timeout}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %v", path, err)
	}
	return nil
}
