package main

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// TestHomeAssistantDiscovery: a gateway with home_assistant publishes its
// discovery message, retained, once online; when Home Assistant says
// "online" on its status topic (its birth message, after a restart) the
// gateway publishes the message and every state again. A gateway without
// home_assistant publishes none.
func TestHomeAssistantDiscovery(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	prefix := testenv.ID(t, "ha") // a discovery prefix of this test's own
	g := startGateway(t, broker, "actuators:\n  - {name: pump, pin: GPIO17}\n  - {name: fan, pin: GPIO22}\n"+
		"home_assistant:\n  discovery_prefix: "+prefix+"\n", false)
	id, ctl := g.id, g.ctl
	topics := wire.Topics{GatewayID: id}

	var mu sync.Mutex
	got := map[string]int{}
	var discovery []byte
	ha := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "home-assistant")))
	if tok := ha.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer ha.Disconnect(0)
	note := func(_ mqtt.Client, m mqtt.Message) {
		mu.Lock()
		defer mu.Unlock()
		got[m.Topic()]++
		if m.Topic() == prefix+"/device/fencegate_"+id+"/config" {
			discovery = m.Payload()
		}
	}
	for _, f := range []string{prefix + "/device/+/config", topics.StateFilter()} {
		if tok := ha.Subscribe(f, 1, note); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("subscribe %s: %v", f, tok.Error())
		}
	}
	count := func(topic string) int {
		mu.Lock()
		defer mu.Unlock()
		return got[topic]
	}
	waitCountWithin := func(topic string, n int, d time.Duration) {
		t.Helper()
		deadline := time.Now().Add(d)
		for count(topic) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d messages within %v, want %d", topic, count(topic), d, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitCount := func(topic string, n int) {
		t.Helper()
		waitCountWithin(topic, n, 20*time.Second)
	}
	config := prefix + "/device/fencegate_" + id + "/config"
	// birth says "online" as Home Assistant does after a restart, then
	// sends a command the gateway rejects (it changes no state): once
	// that is answered the gateway has had the birth message, and its
	// answer to it must follow within a short grace.
	birth := func(n int) {
		t.Helper()
		if tok := ha.Publish(prefix+"/status", 1, false, "online"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
		cmd := fence.Command{ID: testenv.ID(t, fmt.Sprintf("after-birth-%d", n)), Actuator: "no-such-pump", Fence: fence.Fence{Token: 1}, State: fence.StateOn}
		if tok := ha.Publish(topics.Set(cmd.Actuator), 1, false, wire.EncodeCommand(cmd)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
		if res := ctl.Result(t, cmd.ID); res.Outcome != fence.Rejected {
			t.Fatalf("command to an unknown actuator: %+v, want rejected", res)
		}
		waitCountWithin(config, n, 3*time.Second)
	}
	waitCount(config, 1) // retained, from the connect
	waitCount(topics.State("pump"), 1)
	var msg struct {
		Cmps map[string]struct {
			P          string `json:"p"`
			StateTopic string `json:"state_topic"`
		} `json:"cmps"`
	}
	mu.Lock()
	err := json.Unmarshal(discovery, &msg)
	mu.Unlock()
	if err != nil || len(msg.Cmps) != 2 || msg.Cmps["fencegate_"+id+"_pump"].StateTopic != topics.State("pump") {
		t.Fatalf("discovery message: %+v, %v", msg, err)
	}
	states := count(topics.State("pump"))
	birth(2)
	waitCountWithin(topics.State("pump"), states+1, 3*time.Second)

	// Without home_assistant: no discovery message.
	plain := gatewayID(t) + "-plain"
	cfg2 := writeConfigWith(t, t.TempDir(), plain, broker, "", "actuators:\n  - {name: pump, pin: GPIO17}\n")
	startProc(t, nil, "run", "--config", cfg2, "--init", "--log-level", "warn")
	testctl.Connect(t, broker, wire.Topics{GatewayID: plain}).WaitStatus(t, "online")
	birth(3) // the first gateway's answer to the birth message, the second's would come with it
	if n := count(prefix + "/device/fencegate_" + plain + "/config"); n != 0 {
		t.Errorf("a gateway without home_assistant published %d discovery messages", n)
	}
}
