package mqttlink

import (
	"strings"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// TestAnswersGoWhereTheCommandSays: a command that names a reply topic is
// answered there and nowhere else; one that names none, on the actuator's
// shared result topic. A command whose reply topic the gateway does not
// answer on is rejected (reason reply-topic) on the shared topic, where
// its sender can see why, and never reaches the core; a malformed command
// with a good reply topic is answered there; an empty reply is none. One listener hears both
// trees, so every answer is seen exactly once, on the topic it went to.
func TestAnswersGoWhereTheCommandSays(t *testing.T) {
	for _, broker := range []struct {
		name string
		url  func(testing.TB) string
	}{
		{"embedded", testenv.EmbeddedBroker},
		{"mosquitto", testenv.Mosquitto},
	} {
		t.Run(broker.name, func(t *testing.T) { answersWhereAsked(t, broker.url(t)) })
	}
}

func answersWhereAsked(t *testing.T, broker string) {
	topics := wire.Topics{GatewayID: testenv.ID(t, "reply")}
	h := &countHandler{}
	startLink(t, Options{Broker: broker, Topics: topics, Actuators: []string{"pump"}, Store: "s"}, h)

	type heard struct{ topic, id, outcome, reason string }
	got := make(chan heard, 64)
	obs := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "observer")))
	if tok := obs.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("observer: connect: %v", tok.Error())
	}
	t.Cleanup(func() { obs.Disconnect(0) })
	listen := func(_ mqtt.Client, m mqtt.Message) {
		r, err := wire.DecodeResult(m.Payload())
		if err != nil {
			t.Errorf("%s: %v", m.Topic(), err)
			return
		}
		got <- heard{m.Topic(), r.ID, string(r.Outcome), r.Reason}
	}
	if tok := obs.SubscribeMultiple(map[string]byte{topics.ResultFilter(): 1, topics.ReplyFilter(): 1}, listen); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("observer: subscribe: %v", tok.Error())
	}

	mine := topics.Reply("ctl-a")
	shared := topics.Result("pump")
	long := topics.Reply(strings.Repeat("x", wire.MaxReply))
	for _, tt := range []struct {
		payload string
		want    heard
	}{
		{`{"id":"r-1","token":1,"state":"on","reply":"` + mine + `"}`, heard{mine, "r-1", "applied", ""}},
		{`{"id":"r-2","token":2,"reply":"` + mine + `/run-7"}`, heard{mine + "/run-7", "r-2", "applied", ""}},
		{`{"id":"r-3","token":3}`, heard{shared, "r-3", "applied", ""}},
		{`{"id":"r-4","token":4,"reply":"` + mine + `","state":"ON"}`, heard{mine, "r-4", "rejected", fence.ReasonInvalid}},
		{`{"id":"r-5","token":5,"reply":"` + topics.Reply("+") + `"}`, heard{shared, "r-5", "rejected", fence.ReasonReplyTopic}},
		{`{"id":"r-6","token":6,"reply":"` + topics.ReplyFilter() + `"}`, heard{shared, "r-6", "rejected", fence.ReasonReplyTopic}},
		{`{"id":"r-7","token":7,"reply":"elsewhere/ctl-a"}`, heard{shared, "r-7", "rejected", fence.ReasonReplyTopic}},
		{`{"id":"r-8","token":8,"reply":"` + long + `"}`, heard{shared, "r-8", "rejected", fence.ReasonReplyTopic}},
		{`{"id":"r-9","token":9,"reply":"` + topics.Set("reply") + `"}`, heard{shared, "r-9", "rejected", fence.ReasonReplyTopic}},
		{`{"id":"r-10","token":10,"reply":""}`, heard{shared, "r-10", "applied", ""}}, // as if none
	} {
		if tok := obs.Publish(topics.Set("pump"), 1, false, tt.payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
		select {
		case h := <-got:
			if h != tt.want {
				t.Errorf("%s:\n got %+v\nwant %+v", tt.payload, h, tt.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer within 10 s", tt.payload)
		}
	}
	// r-10's answer was the last: any second copy of an answer would have
	// come before it, on one connection in publish order.
	select {
	case h := <-got:
		t.Errorf("an answer more than one per command: %+v", h)
	default:
	}
	if n := h.n.Load(); n != 4 {
		t.Errorf("the core decided %d commands, want 4 (r-1, r-2, r-3, r-10): a command with a bad reply topic must not reach it", n)
	}
}
