package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// fakeGateway answers every command on topics' command topics with the
// answers that answer returns, published in order (QoS 1, so none is lost
// and they arrive in that order) where the gateway would: on the reply
// topic the command names, else on the shared result topic.
func fakeGateway(t *testing.T, broker string, topics wire.Topics, answer func(fence.Command) []fence.Result) {
	t.Helper()
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "fake")).SetOrderMatters(true))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("fake gateway: connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	handler := func(c mqtt.Client, m mqtt.Message) {
		name, ok := topics.Actuator(m.Topic())
		if !ok {
			return
		}
		req, err := wire.DecodeRequest(name, m.Payload())
		if err != nil {
			t.Errorf("fake gateway: %s: %v", m.Payload(), err)
			return
		}
		for _, r := range answer(req.Command) {
			to := req.Reply // where the gateway answers: the reply topic, else the shared one
			if to == "" {
				to = topics.Result(r.Actuator)
			}
			c.Publish(to, 1, false, wire.EncodeResult(r))
		}
	}
	if tok := c.Subscribe(topics.SetFilter(), 1, handler); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("fake gateway: subscribe: %v", tok.Error())
	}
}

// TestSendMatchesActuatorAndPair: a reply topic hears the answers to
// every command that names it (a resend, a command of another actuator,
// another controller's that names it), and an id may be reused for
// another actuator or pair, so Send takes only an answer with its command's id, actuator,
// token and seq (docs/protocol.md, Answers). Each case's foreign answer
// comes first, then the true one; Send must return the true one.
func TestSendMatchesActuatorAndPair(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	topics := wire.Topics{Prefix: wire.DefaultPrefix, GatewayID: testenv.ID(t, "gw")}
	pair := fence.Fence{Token: 42, Seq: 7}
	stale := func(actuator string, pair fence.Fence) fence.Result {
		return fence.Result{Actuator: actuator, Outcome: fence.Stale, Command: pair, Fence: fence.Fence{Token: 99}, State: fence.StateOff}
	}
	invalid := func(read fence.Fence) fence.Result {
		return fence.Result{Actuator: "pump", Outcome: fence.Rejected, Reason: fence.ReasonInvalid, Command: read, Fence: fence.Fence{Token: 99}, Error: "holder too long"}
	}
	cases := []struct {
		name    string
		otherID bool
		foreign fence.Result // its ID is the command's, unless otherID
		taken   bool         // the foreign answer is an answer to the command after all
	}{
		{"another actuator", false, stale("valve", pair), false},
		{"another token", false, stale("pump", fence.Fence{Token: 43, Seq: 7}), false},
		{"another seq", false, stale("pump", fence.Fence{Token: 42, Seq: 8}), false},
		{"another id", true, stale("pump", pair), false},
		{"the same command", false, stale("pump", pair), true},
		{"rejected before the token was read", false, invalid(fence.Fence{}), true},
		{"rejected after the token was read", false, invalid(fence.Fence{Token: 42}), true},
		{"rejected with another token", false, invalid(fence.Fence{Token: 41}), false},
	}
	var mu sync.Mutex
	foreign := map[string]fence.Result{} // by command id
	fakeGateway(t, broker, topics, func(c fence.Command) []fence.Result {
		mu.Lock()
		defer mu.Unlock()
		return []fence.Result{foreign[c.ID], {ID: c.ID, Actuator: c.Actuator, Outcome: fence.Applied, Command: c.Fence, Fence: c.Fence, State: c.State}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: topics.GatewayID})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := fence.Command{ID: fmt.Sprint("m-", i), Actuator: "pump", Fence: pair, State: fence.StateOn}
			f := tc.foreign
			f.ID = cmd.ID
			if tc.otherID {
				f.ID += "x"
			}
			mu.Lock()
			foreign[cmd.ID] = f
			mu.Unlock()
			if got := client.Answers(cmd, f); got != tc.taken {
				t.Errorf("Answers(%+v, %+v) = %v, want %v", cmd, f, got, tc.taken)
			}
			want := fence.Result{ID: cmd.ID, Actuator: "pump", Outcome: fence.Applied, Command: pair, Fence: pair, State: fence.StateOn}
			if tc.taken {
				want = f
			}
			if got, _ := c.Send(ctx, cmd); got != want {
				t.Errorf("Send took %+v, want %+v", got, want)
			}
		})
	}
}
