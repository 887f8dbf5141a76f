package mqttbroker_test

import (
	"bytes"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/mqttbroker"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestMaxPacket: the embedded broker read and forwarded a
// publish of any size (up to MQTT's 256 MB). A packet of up to MaxPacket
// bytes is forwarded; a client that sends a larger one is disconnected,
// and nothing of it reaches a subscriber.
func TestMaxPacket(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	connect := func(id string, lost chan<- error) mqtt.Client {
		o := mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, id)).SetAutoReconnect(false)
		if lost != nil {
			o.SetConnectionLostHandler(func(_ mqtt.Client, err error) { lost <- err })
		}
		c := mqtt.NewClient(o)
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("connect: %v", tok.Error())
		}
		t.Cleanup(func() { c.Disconnect(100) })
		return c
	}
	got := make(chan int, 4)
	sub := connect("sub", nil)
	if tok := sub.Subscribe("t/+", 1, func(_ mqtt.Client, m mqtt.Message) { got <- len(m.Payload()) }); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	lost := make(chan error, 1)
	pub := connect("pub", lost)
	const topic = "t/a"
	fits := mqttbroker.MaxPacket - 2 - len(topic) - 2 - 5 // fixed header (5 bytes at most), topic, packet id
	for _, tt := range []struct {
		size      int
		forwarded bool
	}{{fits, true}, {mqttbroker.MaxPacket + 1, false}} {
		pub.Publish(topic, 1, false, bytes.Repeat([]byte("x"), tt.size))
		select {
		case n := <-got:
			if !tt.forwarded || n != tt.size {
				t.Errorf("a publish of %d bytes reached the subscriber with %d bytes; want it forwarded: %v", tt.size, n, tt.forwarded)
			}
		case err := <-lost:
			if tt.forwarded {
				t.Errorf("a publish of %d bytes (a packet within %d bytes) lost the connection: %v", tt.size, mqttbroker.MaxPacket, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("a publish of %d bytes was neither forwarded nor refused within 10 s", tt.size)
		}
	}
}
