package mqttbroker

import (
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// holdHook holds, on topic, either a subscription between its two steps
// (entered the broker's index; sent the retained messages) or a retained
// publish between its two steps (stored; forwarded), until release is
// closed; it says when the other one went through.
type holdHook struct {
	mochi.HookBase
	topic     string
	holdSub   bool
	held      chan struct{} // the held packet reached the hold
	release   chan struct{}
	otherDone chan struct{} // the other packet was processed
	subDone   chan struct{} // the subscription was processed (its retained messages queued)
	once      sync.Once
}

func (h *holdHook) ID() string { return "test-hold" }

func (h *holdHook) Provides(b byte) bool {
	return b == mochi.OnSubscribed || b == mochi.OnRetainMessage || b == mochi.OnPacketProcessed
}

func (h *holdHook) OnSubscribed(_ *mochi.Client, pk packets.Packet, _ []byte) {
	if h.holdSub && pk.Filters[0].Filter == h.topic {
		close(h.held)
		<-h.release
	}
}

func (h *holdHook) OnRetainMessage(_ *mochi.Client, pk packets.Packet, _ int64) {
	if !h.holdSub && pk.TopicName == h.topic {
		close(h.held)
		<-h.release
	}
}

func (h *holdHook) OnPacketProcessed(_ *mochi.Client, pk packets.Packet, _ error) {
	other := pk.FixedHeader.Type == packets.Publish && pk.TopicName == h.topic && pk.FixedHeader.Retain
	if !h.holdSub {
		other = pk.FixedHeader.Type == packets.Subscribe && pk.Filters[0].Filter == h.topic
	}
	if other {
		h.once.Do(func() { close(h.otherDone) })
	}
	if pk.FixedHeader.Type == packets.Subscribe && pk.Filters[0].Filter == h.topic {
		close(h.subDone)
	}
}

// TestRetainedPublishDuringSubscribe (the embedded broker
// delivered one live retained publish twice, first flagged retained, then
// unflagged, so that a gateway subscribing again rejected a retained
// command and then applied it). Hooks force both interleavings: a
// subscription held between its steps while a retained publish on its
// topic goes through, and a retained publish held between its steps while
// a subscription goes through (with the fix, the other one waits at the
// lock instead). The subscriber must get the publish once, flagged or not.
// The subscription's filter names the topic exactly: with a wildcard, mochi
// reads the retained index without its lock (see the package comment), and
// the race detector would fail the test for that instead.
func TestRetainedPublishDuringSubscribe(t *testing.T) {
	for _, tt := range []struct {
		name    string
		holdSub bool
	}{
		{"publish within a subscription", true},
		{"subscription within a publish", false},
	} {
		t.Run(tt.name, func(t *testing.T) { retainedDuringSubscribe(t, tt.holdSub) })
	}
}

func retainedDuringSubscribe(t *testing.T, holdSub bool) {
	b, err := Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const topic = "fencegate/gw/pump/set"
	h := &holdHook{topic: topic, holdSub: holdSub, held: make(chan struct{}), release: make(chan struct{}), otherDone: make(chan struct{}),
		subDone: make(chan struct{})}
	if err := b.srv.AddHook(h, nil); err != nil {
		t.Fatal(err)
	}
	// With the fix, the second packet waits at the lock the held one holds.
	waiting := make(chan struct{})
	var once sync.Once
	testHookRetainWait = func(pk packets.Packet) {
		select {
		case <-h.held:
			once.Do(func() { close(waiting) })
		default:
		}
	}
	defer func() { testHookRetainWait = nil }()

	connect := func(id string) mqtt.Client {
		c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(b.URL()).SetClientID(id).SetOrderMatters(true))
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("connect %s: %v", id, tok.Error())
		}
		t.Cleanup(func() { c.Disconnect(100) })
		return c
	}
	type delivery struct {
		payload  string
		retained bool
	}
	got := make(chan delivery, 8)
	sub, pub := connect("sub"), connect("pub")
	subscribe := func() mqtt.Token {
		return sub.Subscribe(topic, 1, func(_ mqtt.Client, m mqtt.Message) { got <- delivery{string(m.Payload()), m.Retained()} })
	}
	publish := func() mqtt.Token { return pub.Publish(topic, 1, true, "command") }
	first, second := subscribe, publish
	if !holdSub {
		first, second = publish, subscribe
	}
	firstTok := first()
	select {
	case <-h.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the first packet did not reach the hold within 10 s")
	}
	secondTok := second()
	select {
	case <-h.otherDone: // without the lock
	case <-waiting: // with it
	case <-time.After(10 * time.Second):
		t.Fatal("the second packet was neither processed nor made to wait within 10 s")
	}
	close(h.release)
	for _, tok := range []mqtt.Token{firstTok, secondTok} {
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("subscribe or publish: %v", tok.Error())
		}
	}
	// Messages from one publisher reach a subscriber in order, after the
	// retained messages its subscription queued: once the marker is in,
	// every copy of the command is.
	select {
	case <-h.subDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription was not processed within 10 s")
	}
	if tok := pub.Publish(topic, 1, false, "marker"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish the marker: %v", tok.Error())
	}
	var copies []delivery
	for {
		select {
		case d := <-got:
			if d.payload == "marker" {
				if len(copies) != 1 {
					t.Errorf("the subscriber got the retained publish %d times %+v, want once", len(copies), copies)
				}
				return
			}
			copies = append(copies, d)
		case <-time.After(10 * time.Second):
			t.Fatalf("the marker did not arrive within 10 s (copies so far: %+v)", copies)
		}
	}
}
