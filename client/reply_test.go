package client_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// TestEachControllerHearsItsOwnAnswers: two controllers command the same
// actuator of a real gateway; each command's answer is delivered once, on
// the reply topic of the controller that sent it, and nothing goes to the
// shared result topic. A controller with SharedAnswers names no reply
// topic and hears its answers on the shared topic, as before reply topics.
func TestEachControllerHearsItsOwnAnswers(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	gateway(t, broker)
	topics := wire.Topics{GatewayID: "gw"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A listener on every answer topic of the gateway counts what is
	// delivered where.
	var mu sync.Mutex
	heard := map[string][]string{} // topic → ids
	obs := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "observer")))
	if tok := obs.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("observer: %v", tok.Error())
	}
	defer obs.Disconnect(0)
	tok := obs.SubscribeMultiple(map[string]byte{topics.ResultFilter(): 1, topics.ReplyFilter(): 1}, func(_ mqtt.Client, m mqtt.Message) {
		r, err := wire.DecodeResult(m.Payload())
		if err != nil {
			t.Errorf("%s: %v", m.Topic(), err)
		}
		mu.Lock()
		heard[m.Topic()] = append(heard[m.Topic()], r.ID)
		mu.Unlock()
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("observer: %v", tok.Error())
	}

	dial := func(o client.Options) *client.Client {
		o.Broker, o.GatewayID = broker, "gw"
		c, err := client.Dial(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	a := dial(client.Options{ClientID: testenv.ID(t, "ctl-a")})
	b := dial(client.Options{ClientID: testenv.ID(t, "ctl-b"), Reply: topics.Reply(testenv.ID(t, "ctl-b")) + "/run-1"})
	old := dial(client.Options{SharedAnswers: true})
	var tokn uint64
	send := func(c *client.Client, id string) {
		t.Helper()
		tokn++
		// Seconds, not the test's 30: an answer that goes elsewhere
		// fails the test soon.
		one, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := c.Send(one, fence.Command{ID: id, Actuator: "pump", Fence: fence.Fence{Token: tokn}, State: fence.StateOn}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	send(a, "a-1")
	send(b, "b-1")
	send(a, "a-2")
	send(old, "o-1")
	send(b, "b-2") // the last: the observer has the others' answers once it has this one
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := 0
		for _, ids := range heard {
			n += len(ids)
		}
		mu.Unlock()
		if n >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string][]string{
		topics.Reply(testenv.ID(t, "ctl-a")):            {"a-1", "a-2"},
		topics.Reply(testenv.ID(t, "ctl-b")) + "/run-1": {"b-1", "b-2"},
		topics.Result("pump"):                           {"o-1"},
	}
	for topic, ids := range want {
		if strings.Join(heard[topic], " ") != strings.Join(ids, " ") {
			t.Errorf("%s heard %q, want %q", topic, heard[topic], ids)
		}
	}
	if len(heard) != len(want) {
		t.Errorf("answers went to %v, want only %v", heard, want)
	}
}

// Options whose reply topic the gateway would refuse are refused by Dial,
// before it connects, with what to change.
func TestReplyOptionsChecked(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		o    client.Options
		want string
	}{
		{client.Options{ClientID: "ctl/a"}, `client id "ctl/a" cannot be a level of the reply topic (fencegate/gw/reply/[<user name>/]<client id>): it has + # or /; choose another client id, or set Reply`},
		{client.Options{ClientID: "ctl+a"}, "it has + # or /"},
		{client.Options{Username: "ctl#a", Password: "p"}, `user name "ctl#a" cannot be a level of the reply topic`},
		{client.Options{ClientID: strings.Repeat("c", 300)}, "the limit is 256; choose a shorter client id, or set Reply"},
		{client.Options{Reply: "fencegate/other/reply/me"}, "client: Reply: reply topic \"fencegate/other/reply/me\" is outside this gateway's reply topics: use fencegate/gw/reply/<your client id>"},
		{client.Options{Reply: "fencegate/gw/reply/#"}, "wildcard"},
		{client.Options{Reply: "fencegate/gw/reply/me", SharedAnswers: true}, "is set with SharedAnswers"},
		// What a broker refuses in a topic, named where it comes from.
		{client.Options{ClientID: "ctl\n1"}, `client id "ctl\n1" cannot be a level of the reply topic (fencegate/gw/reply/[<user name>/]<client id>): character 4 (U+000A) is a control character`},
		{client.Options{ClientID: "ctl-1", Username: "ops\u0085", Password: "p"}, `user name "ops\u0085" cannot be a level of the reply topic`},
		{client.Options{ClientID: "ctl\ufffe"}, "is a non-character, which MQTT brokers refuse in a topic"},
		{client.Options{ClientID: "ctl\xed\xa0\x80"}, "is not valid UTF-8"},
		{client.Options{Reply: "fencegate/gw/reply/me\x1b"}, "client: Reply: reply topic: character 22 (U+001B) is a control character"},
		// The gateway id and prefix are levels of every topic too.
		{client.Options{GatewayID: "gw\n"}, "client: GatewayID: character 3 (U+000A) is a control character"},
		{client.Options{GatewayID: "gw/2"}, `client: GatewayID "gw/2" is not a gateway's id`},
		{client.Options{Prefix: "site/\u0085"}, "client: Prefix: character 6 (U+0085) is a control character"},
		{client.Options{Prefix: "site//fg"}, "an empty level"},
	} {
		tt.o.Broker = "tcp://127.0.0.1:1"
		if tt.o.GatewayID == "" {
			tt.o.GatewayID = "gw"
		}
		_, err := client.Dial(ctx, tt.o)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Dial(%+v) = %v, want an error with %q", tt.o, err, tt.want)
		}
	}
}
